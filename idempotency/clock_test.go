package idempotency_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/idemtest"
)

// An operator's reset judges the record's lease on the store's clock, as
// the store's own Reset does: with this process's clock ten minutes behind
// the store's, a claim whose lease ended is reset, not refused as live.
func TestResetJudgesTheLeaseOnTheStoresClock(t *testing.T) {
	store, err := boltstore.Open(t.TempDir(), time.Second,
		boltstore.WithClock(func() time.Time { return time.Now().Add(10 * time.Minute) }))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	eng := idempotency.New(store)
	ctx := context.Background()
	key := idemtest.NewKey()
	if _, l, err := eng.Claim(ctx, idempotency.ClaimRequest{Key: key, Owner: "dead", PayloadHash: "ph",
		Lease: 100 * time.Millisecond}); err != nil || l == nil {
		t.Fatalf("claim: %v", err)
	}
	time.Sleep(200 * time.Millisecond) // the lease ends on the store's clock
	_, after, err := eng.Reset(ctx, key, driver.Replay{Reason: "the worker died", Operator: "ops"})
	if err != nil || after.Status != driver.StatusReceived {
		t.Fatalf("reset: %s, %v", after.Status, err)
	}
}

// A duplicate waiting for an owner (WithWaitInFlight) judges the owner's
// lease on the store's clock: with this process's clock ahead of the
// store's it would stop waiting at its first poll and answer in progress
// while the owner still runs; behind, it would wait out its whole wait
// for a dead owner whose lease the store has already ended.
func TestWaitInFlightJudgesTheLeaseOnTheStoresClock(t *testing.T) {
	for _, tc := range []struct {
		name      string
		storeSkew time.Duration // the store's clock less this process's
		noNow     bool          // the store reads no clock (no driver.NowReader): the wait judges on this process's
		ownerDies bool
		want      idempotency.Decision
	}{
		{"process ahead: waits for the live owner's result", -10 * time.Minute, false, false, idempotency.DecisionRepeatDone},
		{"process behind: takes a dead owner's ended lease over", 10 * time.Minute, false, true, idempotency.DecisionTakeover},
		// The lease looks ended here, and the store answers in progress: the
		// wait goes on rather than ending in the answer it waited to avoid.
		{"no store clock, process ahead: waits on after the store's in-progress answer", -10 * time.Minute, true, false, idempotency.DecisionRepeatDone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, err := boltstore.Open(t.TempDir(), time.Second,
				boltstore.WithClock(func() time.Time { return time.Now().Add(tc.storeSkew) }))
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			var s driver.Store = store
			if tc.noNow {
				s = struct{ driver.Store }{store}
			}
			eng := idempotency.New(s, idempotency.WithWaitInFlight(3*time.Second))
			ctx := context.Background()
			req := idempotency.ClaimRequest{Key: idemtest.NewKey(), Owner: "owner", PayloadHash: "ph", Lease: 300 * time.Millisecond}
			_, l, err := eng.Claim(ctx, req)
			if err != nil || l == nil {
				t.Fatalf("claim: %v", err)
			}
			if !tc.ownerDies {
				go func() {
					time.Sleep(300 * time.Millisecond)
					_ = l.Complete(ctx, "the owner's")
				}()
			}
			req.Owner = "waiter"
			out, err := eng.Do(ctx, req, func(context.Context, *idempotency.Lease) (string, error) { return "the waiter's", nil })
			if err != nil || out.Decision != tc.want {
				t.Fatalf("the waiter was answered %s (%v), want %s", out.Decision, err, tc.want)
			}
		})
	}
}
