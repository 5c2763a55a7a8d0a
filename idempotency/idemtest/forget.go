package idemtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
)

// RunForget checks an operator's forget (Engine.Forget, driver.Forgetter)
// on h: a forgotten key runs again on its next delivery, under a fence its
// old life never held; the audit row says who and why; an unknown key, a
// live lease and a record that changed meanwhile are refused and change
// nothing. With a fast layer, it never answers the forgotten state.
func RunForget(t *testing.T, h Harness) {
	t.Run("ForgottenKeyRunsAgain", func(t *testing.T) { forgetRunsAgain(t, h) })
	t.Run("ForgetOfAFinalFailureRunsAgain", func(t *testing.T) { forgetFinal(t, h) })
	t.Run("ForgetRefusesALiveLease", func(t *testing.T) { forgetLive(t, h) })
	t.Run("ForgetOfAnUnknownKeyChangesNothing", func(t *testing.T) { forgetUnknown(t, h) })
	t.Run("ForgottenLifeCannotWrite", func(t *testing.T) { forgetStale(t, h) })
}

func forgetter(t *testing.T, e *idempotency.Engine) driver.Maintainer {
	t.Helper()
	m, ok := e.Store().(driver.Maintainer)
	if _, forgets := e.Store().(driver.Forgetter); !ok || !forgets {
		t.Fatalf("%T is not a driver.Maintainer and driver.Forgetter", e.Store())
	}
	return m
}

func forgetReq() driver.Replay { return driver.Replay{Reason: "bad summary", Operator: "ops@example"} }

func forgetRunsAgain(t *testing.T, h Harness) {
	ctx := context.Background()
	e := h.NewEngine(t)
	m := forgetter(t, e)
	k := NewKey()
	runs := 0
	fn := func(_ context.Context, l *idempotency.Lease) (string, error) {
		runs++
		if _, err := l.Step(ctx, "plan", func(context.Context) (string, error) { return "p", nil }); err != nil {
			return "", err
		}
		return "result-" + string(rune('0'+runs)), nil
	}
	first, err := e.Do(ctx, req(k, "r1"), fn)
	if err != nil || first.ResultRef != "result-1" {
		t.Fatalf("first: %+v %v", first, err)
	}
	if again, _ := e.Do(ctx, req(k, "r2"), fn); again.Decision != idempotency.DecisionRepeatDone || runs != 1 {
		t.Fatalf("duplicate before the forget: %+v, runs %d", again, runs)
	}
	prior, err := e.Forget(ctx, k, forgetReq())
	if err != nil || prior.Status != driver.StatusSucceeded || prior.ResultRef != "result-1" {
		t.Fatalf("forget: %+v %v", prior, err)
	}
	rec, err := e.Get(ctx, k)
	if err != nil || rec.Status != driver.StatusReceived || rec.ResultRef != "" || rec.Attempt != 0 ||
		len(rec.Steps) != 0 || rec.Fence <= prior.Fence {
		t.Fatalf("after the forget: %+v %v", rec, err)
	}
	next, err := e.Do(ctx, req(k, "r3"), fn)
	if err != nil || next.ResultRef != "result-2" || next.Attempt != 1 || runs != 2 {
		t.Fatalf("the next delivery: %+v %v, runs %d", next, err, runs)
	}
	if again, _ := e.Do(ctx, req(k, "r4"), fn); again.ResultRef != "result-2" || runs != 2 {
		t.Fatalf("a duplicate of the new life: %+v, runs %d", again, runs)
	}
	rps, err := m.Replays(ctx, k)
	if err != nil || len(rps) != 1 || rps[0].Source != "forget" || rps[0].Reason != "bad summary" ||
		rps[0].Operator != "ops@example" || rps[0].PriorStatus != driver.StatusSucceeded {
		t.Fatalf("audit: %+v %v", rps, err)
	}
}

func forgetFinal(t *testing.T, h Harness) {
	ctx := context.Background()
	e := h.NewEngine(t)
	forgetter(t, e)
	k := NewKey()
	_, err := e.Do(ctx, req(k, "r1"), func(context.Context, *idempotency.Lease) (string, error) {
		return "", idempotency.Final("policy_rejected", errors.New("refused"))
	})
	var ie *idempotency.Error
	if !errors.As(err, &ie) || ie.Code != "policy_rejected" {
		t.Fatalf("first: %v", err)
	}
	if _, err := e.Forget(ctx, k, forgetReq()); err != nil {
		t.Fatal(err)
	}
	out, err := e.Do(ctx, req(k, "r2"), func(context.Context, *idempotency.Lease) (string, error) { return "ok", nil })
	if err != nil || out.Status != driver.StatusSucceeded || out.ResultRef != "ok" {
		t.Fatalf("after the forget: %+v %v", out, err)
	}
}

func forgetLive(t *testing.T, h Harness) {
	ctx := context.Background()
	e := h.NewEngine(t)
	m := forgetter(t, e)
	k := NewKey()
	_, l, err := e.Claim(ctx, req(k, "r1"))
	if err != nil || l == nil {
		t.Fatalf("claim: %v", err)
	}
	before, _ := e.Get(ctx, k)
	if _, err := e.Forget(ctx, k, forgetReq()); !errors.Is(err, driver.ErrNotReplayable) {
		t.Fatalf("forget under a live lease: %v", err)
	}
	after, _ := e.Get(ctx, k)
	if rps, _ := m.Replays(ctx, k); after.Fence != before.Fence || after.Status != driver.StatusRunning || len(rps) != 0 {
		t.Fatalf("changed: %+v, audit %v", after, rps)
	}
	if err := l.Complete(ctx, "done"); err != nil {
		t.Fatalf("the holder: %v", err)
	}
}

func forgetUnknown(t *testing.T, h Harness) {
	ctx := context.Background()
	e := h.NewEngine(t)
	m := forgetter(t, e)
	k := NewKey()
	if _, err := e.Forget(ctx, k, forgetReq()); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("forget of an unknown key: %v", err)
	}
	if _, err := e.Get(ctx, k); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("a record appeared: %v", err)
	}
	if rps, err := m.Replays(ctx, k); err != nil || len(rps) != 0 {
		t.Fatalf("audited: %v %v", rps, err)
	}
	// A record changed since forget read it is refused by the store.
	k2 := NewKey()
	if _, err := e.Do(ctx, req(k2, "r1"), func(context.Context, *idempotency.Lease) (string, error) { return "x", nil }); err != nil {
		t.Fatal(err)
	}
	f := e.Store().(driver.Forgetter)
	rec, _ := e.Get(ctx, k2)
	rp := forgetReq()
	rp.ExpectFence = rec.Fence + 1
	if _, _, err := f.Forget(ctx, k2, rp); !errors.Is(err, driver.ErrNotReplayable) {
		t.Fatalf("forget of a record that changed: %v", err)
	}
	if got, _ := e.Get(ctx, k2); got.Status != driver.StatusSucceeded || got.Fence != rec.Fence {
		t.Fatalf("changed: %+v", got)
	}
}

// A worker of an earlier attempt whose lease ran out (a frozen instance)
// wakes up after the forget and after the new life claimed: nothing it
// writes lands. While its record is RUNNING, forget refuses, expired lease
// or not: the worker may still write.
func forgetStale(t *testing.T, h Harness) {
	ctx := context.Background()
	e := h.NewEngine(t)
	forgetter(t, e)
	k := NewKey()
	_, stale, err := e.Claim(ctx, short(req(k, "r1")))
	if err != nil || stale == nil {
		t.Fatalf("claim: %v", err)
	}
	time.Sleep(shortLease + 100*time.Millisecond)
	if _, err := e.Forget(ctx, k, forgetReq()); !errors.Is(err, driver.ErrNotReplayable) {
		t.Fatalf("forget of a RUNNING record whose lease ran out: %v", err)
	}
	_, next, err := e.Claim(ctx, req(k, "r2"))
	if err != nil || next == nil {
		t.Fatalf("takeover: %v", err)
	}
	if _, err := next.Fail(ctx, idempotency.Retryable("timeout", errors.New("slow"))); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Forget(ctx, k, forgetReq()); err != nil {
		t.Fatalf("forget of a FAILED_RETRYABLE record: %v", err)
	}
	_, fresh, err := e.Claim(ctx, req(k, "r3"))
	if err != nil || fresh == nil || fresh.Fence <= next.Fence || fresh.Attempt != 1 {
		t.Fatalf("the new life's claim: %+v %v", fresh, err)
	}
	if err := stale.Complete(ctx, "stale"); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("the stale worker completed: %v", err)
	}
	if err := fresh.Complete(ctx, "fresh"); err != nil {
		t.Fatal(err)
	}
	if rec, _ := e.Get(ctx, k); rec.ResultRef != "fresh" {
		t.Fatalf("result %q", rec.ResultRef)
	}
}
