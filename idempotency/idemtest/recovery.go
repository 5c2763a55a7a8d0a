package idemtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
)

// Cases of the recovery paths: a budget spent under a dead worker, results
// a record cannot hold, the finish that follows a completion, and claims
// that carry no owner.

// expireTwice leaves key RUNNING under a dead worker's expired lease at
// attempt 2 (the budget of engines built WithMaxAttempts(2)).
func expireTwice(t *testing.T, e *idempotency.Engine, key string) {
	claim(t, e, short(req(key, "a")))
	time.Sleep(shortLease + 150*time.Millisecond)
	if _, l := claim(t, e, short(req(key, "b"))); l == nil {
		t.Fatal("no takeover")
	}
	time.Sleep(shortLease + 150*time.Millisecond)
}

// expiredExhausted: with the budget spent, Do does not run fn again: the key
// ends FAILED_FINAL attempts_exhausted.
func expiredExhausted(t *testing.T, h Harness) {
	e := h.NewEngine(t, idempotency.WithMaxAttempts(2))
	key := NewKey()
	expireTwice(t, e, key)
	var runs atomic.Int32
	out, err := e.Do(context.Background(), req(key, "c"), func(context.Context, *idempotency.Lease) (string, error) {
		runs.Add(1)
		return "ref", nil
	})
	want(t, "runs", runs.Load(), 0)
	var ie *idempotency.Error
	if !errors.As(err, &ie) || ie.Code != driver.ExhaustedCode || ie.Retryable() {
		t.Fatalf("err %v", err)
	}
	want(t, "status", out.Status, driver.StatusFailedFinal)
	rec := get(t, e, key)
	want(t, "stored status", rec.Status, driver.StatusFailedFinal)
	want(t, "code", rec.LastErrorCode, driver.ExhaustedCode)
	want(t, "attempts", rec.Attempt, 2)
}

// salvaged: a caller that can complete from saved work (AllowSalvage) gets a
// salvage lease without a new attempt, and completes.
func salvaged(t *testing.T, h Harness) {
	e := h.NewEngine(t, idempotency.WithMaxAttempts(2))
	key := NewKey()
	expireTwice(t, e, key)
	r := req(key, "c")
	r.AllowSalvage = true
	out, err := e.Do(context.Background(), r, func(_ context.Context, l *idempotency.Lease) (string, error) {
		if !l.Salvage() {
			return "", errors.New("not a salvage lease")
		}
		return "saved-by-attempt-2", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want(t, "status", out.Status, driver.StatusSucceeded)
	rec := get(t, e, key)
	want(t, "attempts (no new one)", rec.Attempt, 2)
	want(t, "fence (the salvage's own)", rec.Fence, int64(3))
	want(t, "result", rec.ResultRef, "saved-by-attempt-2")
}

// resultTooLarge: a result over MaxResultRef is recorded FAILED_FINAL
// result_too_large on every store alike, and the work never runs again.
func resultTooLarge(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	key := NewKey()
	var runs atomic.Int32
	big := strings.Repeat("x", driver.MaxResultRef+1)
	fn := func(context.Context, *idempotency.Lease) (string, error) { runs.Add(1); return big, nil }
	for _, owner := range []string{"a", "b", "a"} {
		_, err := e.Do(context.Background(), req(key, owner), fn)
		var ie *idempotency.Error
		if !errors.As(err, &ie) || ie.Code != "result_too_large" || ie.Retryable() {
			t.Fatalf("%s: err %v", owner, err)
		}
	}
	want(t, "runs", runs.Load(), 1)
	rec := get(t, e, key)
	want(t, "status", rec.Status, driver.StatusFailedFinal)
	want(t, "code", rec.LastErrorCode, "result_too_large")
	// A step's result obeys the same limit.
	_, l := claim(t, e, req(NewKey(), "s"))
	if _, err := l.Step(context.Background(), "big", func(context.Context) (string, error) { return big, nil }); err == nil {
		t.Fatal("a step result over the limit was kept")
	}
	exact := strings.Repeat("y", driver.MaxResultRef)
	if out, err := l.Step(context.Background(), "exact", func(context.Context) (string, error) { return exact, nil }); err != nil || out != exact {
		t.Fatalf("a step result of exactly the limit: %v", err)
	}
}

// finishOnce: a completion with FinishAfter leaves a finish pending under
// the completing owner; nobody else takes it while its lease runs, nor the
// owner without a known try, the owner's later try does at once, and after
// Done nothing is pending. A holder that died is replaced after its lease.
// Before the completion there is no finish: a finish claim is answered
// REPEAT_DONE with no lease left and marks nothing (a mark there would make
// the holder's later try a copy). (A copy of its try: finishCopy.)
func finishOnce(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	ctx := context.Background()
	key := NewKey()
	r := req(key, "a")
	r.Try, r.FinishAfter = 0, true
	_, l := claim(t, e, r)
	for _, c := range []struct {
		name  string
		owner string
		try   int
	}{{"the running try's copy", "a", 0}, {"a sweeper", "sweeper", -1}} {
		res, g, err := e.ClaimFinish(ctx, key, c.owner, c.try)
		if err != nil || g != nil || res.Decision != idempotency.DecisionRepeatDone || res.LeaseLeft != 0 {
			t.Fatalf("%s's finish claim while the task runs: %s, %s left, %v; want REPEAT_DONE, none left", c.name,
				res.Decision, res.LeaseLeft, err)
		}
		want(t, "the running lease's try after "+c.name+"'s finish claim", get(t, e, key).LeaseTry, 0)
	}
	if err := l.Complete(ctx, "ref"); err != nil {
		t.Fatal(err)
	}
	f := l.Finisher()
	if f == nil {
		t.Fatal("no finisher after a FinishAfter completion")
	}
	rec := get(t, e, key)
	want(t, "finish", rec.Finish, driver.FinishPending)
	for _, c := range []struct {
		owner string
		try   int
		want  idempotency.Decision
	}{{"b", 0, idempotency.DecisionRepeatOther}, {"a", -1, idempotency.DecisionRepeatOther}} {
		res, g, err := e.ClaimFinish(ctx, key, c.owner, c.try)
		if err != nil || g != nil || res.Decision != c.want {
			t.Fatalf("%s/%d: %s %v", c.owner, c.try, res.Decision, err)
		}
	}
	res, g, err := e.ClaimFinish(ctx, key, "a", 1) // the same request, retried
	if err != nil || g == nil {
		t.Fatalf("the owner's later try: %s %v", res.Decision, err)
	}
	if err := f.Done(ctx); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("the replaced holder finished: %v", err)
	}
	if err := g.Done(ctx); err != nil {
		t.Fatal(err)
	}
	want(t, "finish", get(t, e, key).Finish, driver.FinishDone)
	if res, g, _ := e.ClaimFinish(ctx, key, "c", 0); g != nil || res.Decision != idempotency.DecisionRepeatDone {
		t.Fatalf("after done: %s", res.Decision)
	}
	// A dead holder: its finish is claimed after its lease.
	key2 := NewKey()
	r2 := short(req(key2, "d"))
	r2.FinishAfter = true
	_, l2 := claim(t, e, r2)
	if err := l2.Complete(ctx, "ref"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(shortLease + 150*time.Millisecond)
	completed := get(t, e, key2).UpdatedAt
	if res, g, err := e.ClaimFinish(ctx, key2, "sweeper", -1); err != nil || g == nil {
		t.Fatalf("after the holder's lease: %s %v", res.Decision, err)
	} else if g.OriginRequestID != "origin-d" || l2.Finisher().OriginRequestID != "origin-d" {
		// The finish names the task's request, whoever holds it (the
		// notification says it: docs/design.md §13).
		t.Fatalf("the finish's origin request id %q (the lease's finisher's %q), want origin-d", g.OriginRequestID,
			l2.Finisher().OriginRequestID)
	} else if err := g.Fail(ctx, idempotency.Retryable("temporary_unavailable", errors.New("503"))); err != nil {
		t.Fatal(err)
	}
	// Released: still pending, claimable at once, and dated now, so that a
	// finish that keeps failing goes behind the sweeper's other work.
	if rec = get(t, e, key2); rec.Finish != driver.FinishPending || !rec.UpdatedAt.After(completed) {
		t.Fatalf("released finish: %s, updated %s (completed %s)", rec.Finish, rec.UpdatedAt, completed)
	}
	if res, g, err := e.ClaimFinish(ctx, key2, "sweeper2", -1); err != nil || g == nil {
		t.Fatalf("after a release: %s %v", res.Decision, err)
	} else if err := g.Fail(ctx, idempotency.Final("notify_forbidden", errors.New("host not allowed"))); err != nil {
		t.Fatal(err)
	}
	rec = get(t, e, key2)
	want(t, "failed finish", rec.Finish, driver.FinishFailed)
	want(t, "its code", rec.LastErrorCode, "notify_forbidden")
	want(t, "the result stands", rec.Status, driver.StatusSucceeded)
}

// emptyOwner: a claim that carries no owner (a request without an id) is
// nobody's: a second one never takes its live lease over.
func emptyOwner(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	key := NewKey()
	r := req(key, "")
	r.Try = -1
	if _, l := claim(t, e, r); l == nil {
		t.Fatal("first claim not owned")
	}
	res, l := claim(t, e, r)
	if l != nil {
		t.Fatalf("an empty owner took a live lease over: %s", res.Decision)
	}
	want(t, "decision", res.Decision, idempotency.DecisionRepeatOther)
}

// finishCopy (issue 20, found by the explorer's copy-retry-takes-finish):
// FC delivered the holder's try twice. The copy, met during the run or the
// finish, is answered in progress and marks its try; FC's retries of the
// copy then never count as the holder's later try, so none takes the live
// finish over beside the holder (a second notify). The holder's own writes
// still land: the mark leaves the fence. Another finisher (the sweeper,
// without a retry count) that meets the live finish between the copy and
// its retries leaves the mark and is told how long the holder's lease runs.
func finishCopy(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		during string
		other  bool // another finisher's claim after the copy's
	}{
		{"copy during the run", "run", false},
		{"copy during the finish", "finish", false},
		{"copy during the finish, then another finisher", "finish", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := NewKey()
			r := req(key, "a")
			r.Try, r.FinishAfter = 0, true
			_, l := claim(t, e, r)
			if c.during == "run" {
				if res, cl := claim(t, e, r); cl != nil || res.Decision != idempotency.DecisionRepeatOther {
					t.Fatalf("the copy of the running try: %s", res.Decision)
				}
			}
			if err := l.Complete(ctx, "ref"); err != nil {
				t.Fatal(err)
			}
			f := l.Finisher()
			if c.during == "finish" {
				if res, g, err := e.ClaimFinish(ctx, key, "a", 0); err != nil || g != nil || res.Decision != idempotency.DecisionRepeatOther {
					t.Fatalf("the copy of the finishing try: %s %v", res.Decision, err)
				}
			}
			if c.other {
				res, g, err := e.ClaimFinish(ctx, key, "sweeper", -1)
				if err != nil || g != nil || res.Decision != idempotency.DecisionRepeatOther {
					t.Fatalf("another finisher met the live finish: %s %v", res.Decision, err)
				}
				if res.LeaseLeft <= 0 {
					t.Fatalf("another finisher was told the live finish has %s left", res.LeaseLeft)
				}
			}
			for try := 1; try <= 3; try++ { // FC's retries of the copy
				if res, g, err := e.ClaimFinish(ctx, key, "a", try); err != nil || g != nil {
					t.Fatalf("FC's retry %d of the copy took the live finish over: %s %v", try, res.Decision, err)
				}
			}
			if err := f.Done(ctx); err != nil {
				t.Fatalf("the holder's finish after the copy's retries: %v", err)
			}
			want(t, "finish", get(t, e, key).Finish, driver.FinishDone)
		})
	}
}

// copyMarkOutlivesTakeover (issue 20, found by review): a copy of the
// holder's try marks its try past; the holder's lease then runs out and is
// taken over. By a copy of the same try (the holder's own request) the mark
// stays (driver.TakeoverTry), so FC's retry of the first copy waits for the
// new holder instead of taking its live lease over (a second run or
// notify). By another request, the count is the new holder's own: its
// later try takes its lease over at once.
func copyMarkOutlivesTakeover(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	ctx := context.Background()
	for _, during := range []string{"run", "finish"} {
		for _, next := range []string{"a", "b"} {
			t.Run(fmt.Sprintf("copy during the %s, taken over by %s", during, next), func(t *testing.T) {
				key := NewKey()
				r := short(req(key, "a"))
				r.Try, r.FinishAfter = 0, true
				_, l := claim(t, e, r)
				if during == "finish" {
					if err := l.Complete(ctx, "ref"); err != nil {
						t.Fatal(err)
					}
				}
				take := func(owner string, try int) (idempotency.Decision, bool) {
					if during == "run" {
						c := req(key, owner)
						c.Try, c.FinishAfter = try, true
						res, cl := claim(t, e, c)
						return res.Decision, cl != nil
					}
					res, g, err := e.ClaimFinish(ctx, key, owner, try)
					if err != nil {
						t.Fatalf("claim finish by %s at try %d: %v", owner, try, err)
					}
					return res.Decision, g != nil
				}
				if d, owned := take("a", 0); owned {
					t.Fatalf("the copy took the live holder's lease: %s", d)
				}
				time.Sleep(shortLease + 150*time.Millisecond)
				if d, owned := take(next, 0); !owned {
					t.Fatalf("%s at try 0 after the holder's lease ran out: %s, want it owned", next, d)
				}
				d, owned := take(next, 1)
				switch {
				case next == "a" && owned:
					t.Fatalf("FC's retry of the first copy took the new holder's live lease over: %s", d)
				case next == "b" && !owned:
					t.Fatalf("the new holder's own later try waited for its lease (%s): another request's mark was kept", d)
				}
			})
		}
	}
}

// copyMarkOutlivesAnotherOwner: a copy's mark outlives a lease of another
// owner (a sweeper's) between two leases of the copy's request. The holder
// a/0 meets a copy of its try and FC's retry of that copy (marked to 2), and
// dies; b takes the key (or the finish) over and lets it go; a's own retry
// (try 1) takes it over. FC's next retry of the copy (try 2) must then wait
// for that lease: a store whose mark was lost with b's lease (one column,
// lease_try) counts it a/1's later try, a second run (or notify) beside it.
func copyMarkOutlivesAnotherOwner(t *testing.T, h Harness) {
	e := h.NewEngine(t, idempotency.WithMaxAttempts(5))
	for _, during := range []string{"run", "finish"} {
		t.Run("copy during the "+during, func(t *testing.T) {
			ctx := context.Background()
			key := NewKey()
			r := short(req(key, "a"))
			r.Try, r.FinishAfter = 0, true
			_, l := claim(t, e, r)
			if during == "finish" {
				if err := l.Complete(ctx, "ref"); err != nil {
					t.Fatal(err)
				}
			}
			take := func(owner string, try int, lease time.Duration) (idempotency.Decision, bool) {
				t.Helper()
				if during == "run" {
					c := req(key, owner)
					c.Try, c.FinishAfter, c.Lease = try, true, lease
					res, cl := claim(t, e, c)
					return res.Decision, cl != nil
				}
				cctx, cancel := context.WithTimeout(ctx, lease)
				defer cancel()
				res, g, err := e.ClaimFinish(cctx, key, owner, try)
				if err != nil {
					t.Fatalf("claim finish by %s at try %d: %v", owner, try, err)
				}
				return res.Decision, g != nil
			}
			for _, try := range []int{0, 1} { // a copy of a/0, and FC's retry of it
				if d, owned := take("a", try, time.Minute); owned {
					t.Fatalf("the copy at try %d took the live holder's lease: %s", try, d)
				}
			}
			time.Sleep(shortLease + 150*time.Millisecond)
			if d, owned := take("b", -1, shortLease); !owned {
				t.Fatalf("b after the holder's lease ran out: %s, want it owned", d)
			}
			time.Sleep(shortLease + 150*time.Millisecond)
			if d, owned := take("a", 1, time.Minute); !owned {
				t.Fatalf("the holder's retry after b's lease ran out: %s, want it owned", d)
			}
			if d, owned := take("a", 2, time.Minute); owned {
				t.Fatalf("FC's retry of the copy's retry took the live lease of a's retry over (%s): the mark was lost to b's lease", d)
			}
			// a/2 was marked a copy too (to 3): FC's try 4 is past every copy's.
			if d, owned := take("a", 4, time.Minute); !owned {
				t.Fatalf("a try past every mark waited for the live lease (%s): it is the holder's later try", d)
			}
		})
	}
}

// finishTakeoverNamed: once b took a finish over from the holder a that
// completed the key, every duplicate's answer names b — the store's, and
// the fast layer's and the cache's, which named a (the completion's
// publish): a's request's deliveries then do not ask the store for a
// finish that is not theirs, and b's do (idempotency.Outcome.Holder).
func finishTakeoverNamed(t *testing.T, h Harness) {
	e := h.NewEngine(t, idempotency.WithLocalCache(16, time.Minute)) // the taker's own cache forgets the key
	ctx := context.Background()
	key := NewKey()
	r := short(req(key, "a"))
	r.Try, r.FinishAfter = 0, true
	_, l := claim(t, e, r)
	if err := l.Complete(ctx, "ref"); err != nil {
		t.Fatal(err)
	}
	dup := func(e *idempotency.Engine, owner string) string {
		t.Helper()
		c := req(key, owner)
		c.Try = 0
		res, cl := claim(t, e, c)
		if cl != nil || res.Decision != idempotency.DecisionRepeatDone {
			t.Fatalf("a duplicate by %s: %s, want REPEAT_DONE", owner, res.Decision)
		}
		return res.Record.LeaseOwner
	}
	if got := dup(e, "c"); got != "a" {
		t.Fatalf("before the takeover the answer names %q, want a", got)
	}
	time.Sleep(shortLease + 150*time.Millisecond)
	if _, g, err := e.ClaimFinish(ctx, key, "b", 1); err != nil || g == nil {
		t.Fatalf("b's finish claim past a's lease: granted %t, %v", g != nil, err)
	}
	for name, e := range map[string]*idempotency.Engine{"the same engine": e, "another engine": h.NewEngine(t)} {
		for _, owner := range []string{"c", "a"} {
			if got := dup(e, owner); got != "b" {
				t.Fatalf("%s: %s's duplicate after b took the finish over names %q, want b", name, owner, got)
			}
		}
	}
}

// copyMarkOutlivesFailure: a copy's mark (driver.ActMarkTry) outlives the
// holder's retryable failure. Two copies of try 0 met the live lease (the
// second at FC's try 1 of the copy: marked to 2); the holder fails, and its
// own retry (try 1) takes the key over past the back-off. FC's next retry of
// the copy (try 2) must then wait for that lease: a store whose Fail cleared
// lease_try would count it the new holder's later try, a second run beside it.
func copyMarkOutlivesFailure(t *testing.T, h Harness) {
	const base = 100 * time.Millisecond
	e := h.NewEngine(t, idempotency.WithRetryBackoff(base))
	ctx := context.Background()
	key := NewKey()
	try := func(n int) (idempotency.Decision, *idempotency.Lease) {
		r := req(key, "a")
		r.Try = n
		res, l := claim(t, e, r)
		return res.Decision, l
	}
	_, holder := try(0)
	if holder == nil {
		t.Fatal("the first claim was not owned")
	}
	for _, n := range []int{0, 1} { // the copy, and FC's retry of it
		if d, l := try(n); l != nil {
			t.Fatalf("the copy at try %d took the live holder's lease: %s", n, d)
		}
	}
	if _, err := holder.Fail(ctx, idempotency.Retryable("rate_limited", errors.New("429"))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(base + 100*time.Millisecond)
	d, retry := try(1)
	if retry == nil {
		t.Fatalf("the holder's retry past the back-off: %s, want it owned", d)
	}
	if d, l := try(2); l != nil {
		t.Fatalf("FC's second retry of the copy took the holder's retry's live lease over: %s", d)
	}
	if err := retry.Complete(ctx, "ref"); err != nil {
		t.Fatal(err)
	}
}

// RunMarkInTheLeaseAlone checks that a copy's mark an earlier version of
// the store left in lease_try alone (markLeaseAlone writes lease_try 2 on
// key's record, as copies of tries 0 and 1 marked it, and nothing else)
// outlives a retryable failure: Fail keeps lease_owner and lease_try, and
// the failed request's next lease starts at the mark (driver.TakeoverTry).
func RunMarkInTheLeaseAlone(t *testing.T, s driver.Store, markLeaseAlone func(t *testing.T, key string)) {
	ctx := context.Background()
	key := NewKey()
	req := driver.ClaimRequest{Key: key, PayloadHash: "ph", Owner: "a", Try: 0, Lease: time.Minute, MaxAttempts: 5}
	res, err := s.Claim(ctx, req)
	if err != nil || res.Decision != driver.DecisionFirst {
		t.Fatalf("first claim: %v %v", res.Decision, err)
	}
	markLeaseAlone(t, key) // copies of tries 0 and 1, marked by the old code
	if err := s.Fail(ctx, key, res.Record.Fence, driver.Failure{Code: "rate_limited", Message: "429"}); err != nil {
		t.Fatal(err)
	}
	req.Try = 1
	if r, err := s.Claim(ctx, req); err != nil || !r.Decision.Owned() {
		t.Fatalf("the failed request's retry: %v %v", r.Decision, err)
	}
	if rec, err := s.Get(ctx, key); err != nil || rec.LeaseTry != 2 {
		t.Fatalf("the retry's lease starts at try %d (%v), want 2: the mark was lost to the failure", rec.LeaseTry, err)
	}
}
