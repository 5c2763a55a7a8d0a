package idemtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
)

// Claim and finish edges of issue 20: copies of one request without a
// later retry count (cases 3 and 4), a retryable failure's back-off (case
// 8) and a finish holder's fenced, bounded hold (case 7).

// retryLater fails unless err is the not-acknowledged retry_later answer.
func retryLater(t *testing.T, what string, err error) {
	t.Helper()
	var ie *idempotency.Error
	if !errors.Is(err, idempotency.ErrRetryLater) || errors.Is(err, idempotency.ErrInProgress) ||
		!errors.As(err, &ie) || !ie.Retryable() || ie.Code != "retry_later" {
		t.Fatalf("%s: %v, want a RETRYABLE retry_later error (ErrRetryLater, not ErrInProgress)", what, err)
	}
}

// neverRuns is a function Do must not run.
func neverRuns(t *testing.T) func(context.Context, *idempotency.Lease) (string, error) {
	return func(context.Context, *idempotency.Lease) (string, error) {
		t.Error("ran while its own live lease or a back-off held it")
		return "", errors.New("ran")
	}
}

// ownLeaseRetryLater: a delivery whose try is not known to be later than
// its own live lease's (no retry count, or the go1 runtime's 0 again) is a
// copy or a retry of a try that may have died: it neither takes the lease
// over (copies would take turns spending the budget) nor is answered "in
// progress" (acknowledged, the work of a dead try would be lost); once the
// lease ends it takes over. Another owner's live lease stays in progress.
func ownLeaseRetryLater(t *testing.T, h Harness) {
	const lease = time.Second // long enough that no stall of the machine ends it among the copies
	e := h.NewEngine(t)
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		holder   int
		delivery int
	}{{"no retry count", -1, -1}, {"go1: try 0 again", 0, 0}, {"unknown try against a known one", 0, -1}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each its own key: the lease waits overlap
			key := NewKey()
			first := req(key, "fc-req-1")
			first.Try, first.Lease = c.holder, lease
			sent := time.Now() // the lease ends no earlier than sent + lease
			if _, l := claim(t, e, first); l == nil {
				t.Fatal("first claim not owned")
			}
			live := func() bool { return time.Since(sent) < lease/2 } // what follows ends inside the lease
			copyReq := req(key, "fc-req-1")
			copyReq.Try = c.delivery
			for i := 0; i < 3 && live(); i++ {
				res, l := claim(t, e, copyReq)
				if l != nil && time.Since(sent) < lease {
					t.Fatalf("copy %d took its twin's live lease: %s", i, res.Decision)
				}
				if !live() {
					break // the machine stalled: the lease may end during the next call
				}
				_, err := e.Do(ctx, copyReq, neverRuns(t))
				retryLater(t, "a copy of the holder's request", err)
			}
			if live() {
				if _, err := e.Do(ctx, req(key, "fc-req-2"), neverRuns(t)); !errors.Is(err, idempotency.ErrInProgress) {
					t.Fatalf("another request: %v, want ErrInProgress (its holder carries the work)", err)
				}
			}
			time.Sleep(lease + 150*time.Millisecond)
			res, l := claim(t, e, copyReq)
			if l == nil || res.Decision != idempotency.DecisionRepeatSame {
				t.Fatalf("after the lease: %s, want REPEAT_SAME", res.Decision)
			}
			want(t, "attempt", l.Attempt, 2)
		})
	}
}

// knownTryAfterUnknown: -1 (no retry count) sorts below every count FC
// sends, so the holder's request at a known try is its later try and takes
// its own live lease or finish over at once, on every store: MySQL rules
// the finish claim in SQL, the others with the driver's state machine.
func knownTryAfterUnknown(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		finish bool // the request's later try meets its finish, not its run
	}{{"the task's lease", false}, {"the finish", true}} {
		t.Run(c.name, func(t *testing.T) {
			key := NewKey()
			first := req(key, "fc-req-1")
			first.Try, first.FinishAfter = -1, true
			_, l := claim(t, e, first)
			if l == nil {
				t.Fatal("first claim not owned")
			}
			var d idempotency.Decision
			var owned bool
			if c.finish {
				if err := l.Complete(ctx, "ref"); err != nil {
					t.Fatal(err)
				}
				res, f, err := e.ClaimFinish(ctx, key, "fc-req-1", 0)
				if err != nil {
					t.Fatalf("claim finish: %v", err)
				}
				d, owned = res.Decision, f != nil
			} else {
				later := req(key, "fc-req-1")
				later.Try = 0
				res, l := claim(t, e, later)
				d, owned = res.Decision, l != nil
			}
			// Owned is the rule; MySQL's finish claim answers every takeover
			// TAKEOVER, so the finish's decision is not asked for.
			if !owned || !c.finish && d != idempotency.DecisionRepeatSame {
				t.Fatalf("the request's try 0 after its unknown try: %s (owned %t), want it owned (REPEAT_SAME)", d, owned)
			}
		})
	}
}

// retryBackoff: a retryable failure is not retried by another delivery
// until its back-off (base·2^(attempt-1), on the store's clock) has passed;
// the failed request's own later try goes on at once, a copy of its try
// does not. Duplicates in the back-off are answered retry_later.
func retryBackoff(t *testing.T, h Harness) {
	ctx := context.Background()
	transient := func(context.Context, *idempotency.Lease) (string, error) {
		return "", idempotency.Retryable("rate_limited", errors.New("429"))
	}
	t.Run("duplicates wait, the failed request's retry does not", func(t *testing.T) {
		e := h.NewEngine(t, idempotency.WithRetryBackoff(time.Minute))
		key := NewKey()
		if _, err := e.Do(ctx, req(key, "batch#0"), transient); err == nil {
			t.Fatal("attempt 1 did not fail")
		}
		if rec := get(t, e, key); rec.RetryAfter.IsZero() {
			t.Fatal("the failure recorded no back-off")
		}
		for _, owner := range []string{"batch#1", "batch#2", "batch#0"} { // the last: a copy of the failed try
			_, err := e.Do(ctx, req(key, owner), neverRuns(t))
			retryLater(t, owner+" in the back-off", err)
		}
		want(t, "attempt after the duplicates", get(t, e, key).Attempt, 1)
		retry := req(key, "batch#0")
		retry.Try = 1 // FC's retry of the failed request: it waited FC's back-off
		res, l := claim(t, e, retry)
		if l == nil {
			t.Fatalf("the failed request's later try: %s", res.Decision)
		}
		want(t, "attempt", l.Attempt, 2)
		if rec := get(t, e, key); !rec.RetryAfter.IsZero() {
			t.Fatalf("a takeover left the back-off set: %s", rec.RetryAfter)
		}
		if err := l.Complete(ctx, "ok"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("it ends, and doubles per attempt", func(t *testing.T) {
		const base = 200 * time.Millisecond
		e := h.NewEngine(t, idempotency.WithRetryBackoff(base))
		key := NewKey()
		if _, err := e.Do(ctx, req(key, "a"), transient); err == nil {
			t.Fatal("attempt 1 did not fail")
		}
		time.Sleep(base + 50*time.Millisecond)
		res, l := claim(t, e, req(key, "b"))
		if l == nil {
			t.Fatalf("after attempt 1's back-off: %s", res.Decision)
		}
		sent := time.Now() // the back-off starts no earlier
		if _, err := l.Fail(ctx, idempotency.Retryable("rate_limited", errors.New("429"))); err != nil {
			t.Fatal(err)
		}
		failed := time.Now()                   // and no later
		time.Sleep(base + 50*time.Millisecond) // past attempt 1's back-off, not attempt 2's (2·base)
		res, l = claim(t, e, req(key, "c"))
		switch early := time.Since(sent) < 2*base; {
		case l != nil && early:
			t.Fatalf("taken over %v after attempt 2 failed, inside its back-off of %v", time.Since(sent), 2*base)
		case l == nil:
			// Still in the back-off; it ends by failed + 2·base.
			time.Sleep(time.Until(failed.Add(2*base + 100*time.Millisecond)))
			if res, l = claim(t, e, req(key, "c")); l == nil {
				t.Fatalf("after attempt 2's back-off: %s", res.Decision)
			}
		} // else the machine stalled past the back-off: the takeover was due
		want(t, "decision", res.Decision, idempotency.DecisionTakeover)
		want(t, "attempt", l.Attempt, 3)
		if err := l.Complete(ctx, "ok"); err != nil {
			t.Fatal(err)
		}
	})
}

// finishHold: the finish's holder checks, and past a third of its lease
// renews, the finish lease before a side effect, fenced: once another
// holder took the finish over — even one with the same owner and try — the
// old holder's Hold is refused and it must not notify. The context Hold
// returns ends before the finish lease does.
func finishHold(t *testing.T, h Harness) {
	ctx := context.Background()
	const lease = time.Second
	holder := h.NewEngine(t, idempotency.WithLease(lease)) // the one whose lease runs out
	taker := h.NewEngine(t)                                // the default lease: no stall expires it
	completed := func(e *idempotency.Engine, key string) *idempotency.Finisher {
		t.Helper()
		r := req(key, "a")
		r.FinishAfter = true
		_, l := claim(t, e, r)
		if err := l.Complete(ctx, "ref"); err != nil {
			t.Fatal(err)
		}
		return l.Finisher()
	}
	for _, c := range []struct {
		name  string
		owner string
		try   int
	}{{"the sweeper takes it over", "sweeper", -1}, {"a copy of the same request and try", "a", 0}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each its own key: the lease waits overlap
			key := NewKey()
			f := completed(holder, key)
			hctx, release, err := f.Hold(ctx)
			if err != nil {
				t.Fatalf("hold at once: %v", err)
			}
			if dl, ok := hctx.Deadline(); !ok || time.Until(dl) > lease-lease/10 {
				t.Fatalf("the hold's context ends in %v, past the finish lease less a tenth", time.Until(dl))
			}
			release()
			time.Sleep(lease + 150*time.Millisecond) // a slow publish: the lease ran out
			res, g, err := taker.ClaimFinish(ctx, key, c.owner, c.try)
			if err != nil || g == nil {
				t.Fatalf("claim after the lease: %s %v", res.Decision, err)
			}
			if _, _, err := f.Hold(ctx); !errors.Is(err, idempotency.ErrLeaseLost) {
				t.Fatalf("the replaced holder's hold: %v, want ErrLeaseLost", err)
			}
			// Its late release and its late record land nowhere, even where
			// the new holder has its owner and try (the fence tells them apart).
			if err := f.Fail(ctx, idempotency.Retryable("timeout", errors.New("late post"))); !errors.Is(err, idempotency.ErrLeaseLost) {
				t.Fatalf("the replaced holder's release: %v, want ErrLeaseLost", err)
			}
			if err := f.Done(ctx); !errors.Is(err, idempotency.ErrLeaseLost) {
				t.Fatalf("the replaced holder's done: %v, want ErrLeaseLost", err)
			}
			if res, other, err := taker.ClaimFinish(ctx, key, "sweeper", -1); err != nil || other != nil {
				t.Fatalf("a sweep while the new holder holds the finish: %s %v, want it held", res.Decision, err)
			}
			if _, release, err := g.Hold(ctx); err != nil {
				t.Fatalf("the new holder's hold: %v", err)
			} else {
				release()
			}
			if err := g.Done(ctx); err != nil {
				t.Fatal(err)
			}
			want(t, "finish", get(t, taker, key).Finish, driver.FinishDone)
		})
	}
	t.Run("past a third of the lease it renews", func(t *testing.T) {
		t.Parallel()
		const lease = 1500 * time.Millisecond
		e := h.NewEngine(t, idempotency.WithLease(lease))
		key := NewKey()
		f := completed(e, key)
		completedAt := time.Now() // Complete's lease ends by completedAt + lease
		time.Sleep(lease/3 + 100*time.Millisecond)
		sent := time.Now() // the renewed lease ends no earlier than sent + lease
		_, release, err := f.Hold(ctx)
		if err != nil {
			t.Fatalf("hold: %v", err)
		}
		defer release()
		time.Sleep(time.Until(completedAt.Add(lease + 100*time.Millisecond))) // past the lease as Complete set it
		res, g, err := taker.ClaimFinish(ctx, key, "sweeper", -1)
		if err != nil {
			t.Fatal(err)
		}
		if g != nil && time.Since(sent) < lease { // else the machine stalled past the renewed lease too
			t.Fatalf("the renewed finish was taken over %v after the renewal: %s", time.Since(sent), res.Decision)
		}
	})
}

// copysRetryWaits: a copy of the live holder's known try is answered
// retry_later, and FC retries that copy with the next count. That retry is
// not the holder's (the holder is alive): it waits for the lease like the
// copy did, instead of taking it over at once (driver.ActMarkTry); the
// holder completes and ends its finish at its own try.
func copysRetryWaits(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	ctx := context.Background()
	key := NewKey()
	holder := req(key, "fc-req-1")
	holder.Try, holder.FinishAfter = 0, true
	_, l := claim(t, e, holder)
	if l == nil {
		t.Fatal("first claim not owned")
	}
	for try := range 3 { // the copy, then FC's retries of it
		c := req(key, "fc-req-1")
		c.Try = try
		res, cl := claim(t, e, c)
		if cl != nil {
			t.Fatalf("the copy at try %d took the live holder's lease: %s", try, res.Decision)
		}
		_, err := e.Do(ctx, c, neverRuns(t))
		retryLater(t, fmt.Sprintf("the copy at try %d", try), err)
	}
	if err := l.Complete(ctx, "ref"); err != nil {
		t.Fatalf("the holder's complete: %v", err)
	}
	if err := l.Finisher().Done(ctx); err != nil {
		t.Fatalf("the holder's finish at its own try: %v", err)
	}
	if rec := get(t, e, key); rec.Status != driver.StatusSucceeded || rec.Attempt != 1 || rec.Finish != driver.FinishDone {
		t.Fatalf("record %s attempt %d finish %s", rec.Status, rec.Attempt, rec.Finish)
	}
}

// getNow: GetNow answers the record with a now on the clock its instants
// were set on (driver.NowReader; the wall clock for other stores): a
// claim's lease and a pending finish's run from the write before it to at
// most a lease after it, and end by it once they ran out.
func getNow(t *testing.T, h Harness) {
	ctx := context.Background()
	const lease = 5 * time.Second
	e := h.NewEngine(t, idempotency.WithLease(lease))
	r := req(NewKey(), "owner")
	r.FinishAfter = true
	_, l := claim(t, e, r)
	if l == nil {
		t.Fatal("not claimed")
	}
	live := func(what string) {
		t.Helper()
		rec, now, err := e.GetNow(ctx, r.Key)
		left := rec.LeaseUntil.Sub(now)
		if err != nil || left <= 0 || left > lease || rec.UpdatedAt.After(now.Add(time.Millisecond)) {
			t.Fatalf("%s: %s left of %s, updated %s after now, %v", what, left, lease, rec.UpdatedAt.Sub(now), err)
		}
	}
	live("a claim")
	if err := l.Complete(ctx, "ref"); err != nil {
		t.Fatal(err)
	}
	live("a pending finish")
	ended := req(NewKey(), "gone")
	claim(t, e, short(ended))
	time.Sleep(shortLease + 100*time.Millisecond)
	if rec, now, err := e.GetNow(ctx, ended.Key); err != nil || rec.LeaseUntil.After(now) {
		t.Fatalf("an ended lease: %s left, %v", rec.LeaseUntil.Sub(now), err)
	}
}
