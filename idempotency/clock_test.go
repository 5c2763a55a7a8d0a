package idempotency_test

import (
	"context"
	"errors"
	"sync/atomic"
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
	store := openBolt(t, boltstore.WithClock(func() time.Time { return time.Now().Add(10 * time.Minute) }))
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
// lease on the store's clock. With this process's clock ahead of the
// store's, the lease looks ended at every poll and each poll claims (and,
// were an in-progress answer to end the wait, the wait would end at its
// first poll); behind, it would wait out its whole wait for a dead owner
// whose lease the store has already ended.
func TestWaitInFlightJudgesTheLeaseOnTheStoresClock(t *testing.T) {
	for _, tc := range []struct {
		name      string
		storeSkew time.Duration // the store's clock less this process's
		noNow     bool          // the store reads no clock (no driver.NowReader): the wait judges on this process's
		lease     time.Duration
		owner     string // after 300 ms the owner completes, fails retryably, or has died
		want      idempotency.Decision
		claims    int // the store's claims: the owner's, the waiter's own, then one per poll that saw the lease ended
	}{
		{"process ahead: polls the live owner's record, not claims", -10 * time.Minute, false, 2 * time.Second, "completes",
			idempotency.DecisionRepeatDone, 2},
		{"process behind: takes a dead owner's ended lease over", 10 * time.Minute, false, 300 * time.Millisecond, "dies",
			idempotency.DecisionTakeover, 0},
		// The lease looks ended here, and the store answers in progress: the
		// wait goes on rather than ending in the answer it waited to avoid.
		{"no store clock, process ahead: waits on after the store's in-progress answer", -10 * time.Minute, true,
			2 * time.Second, "completes", idempotency.DecisionRepeatDone, 0},
		// A retryable failure's back-off (1 s) is answered retry_later at the
		// first poll after it, not waited out and taken over: its retry is its
		// own request's, and a copy must not spend the attempt budget.
		{"a retryable failure's back-off is answered, not waited out", 0, false, 2 * time.Second, "fails",
			idempotency.DecisionRepeatOther, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := openBolt(t, boltstore.WithClock(func() time.Time { return time.Now().Add(tc.storeSkew) }))
			counted := &countingStore{Store: store}
			var s driver.Store = counted
			if tc.noNow {
				s = struct{ driver.Store }{counted}
			}
			eng := idempotency.New(s, idempotency.WithWaitInFlight(5*time.Second))
			ctx := context.Background()
			req := idempotency.ClaimRequest{Key: idemtest.NewKey(), Owner: "owner", PayloadHash: "ph", Lease: tc.lease}
			_, l, err := eng.Claim(ctx, req)
			if err != nil || l == nil {
				t.Fatalf("claim: %v", err)
			}
			go func() {
				time.Sleep(300 * time.Millisecond)
				switch tc.owner {
				case "completes":
					_ = l.Complete(ctx, "the owner's")
				case "fails":
					_, _ = l.Fail(ctx, idempotency.Retryable("upstream_timeout", errors.New("the model timed out")))
				}
			}()
			req.Owner = "waiter"
			out, err := eng.Do(ctx, req, func(context.Context, *idempotency.Lease) (string, error) { return "the waiter's", nil })
			if wantErr := tc.owner == "fails"; out.Decision != tc.want || (err != nil) != wantErr ||
				wantErr && !errors.Is(err, idempotency.ErrRetryLater) {
				t.Fatalf("the waiter was answered %s (%v), want %s", out.Decision, err, tc.want)
			}
			if n := int(counted.claims.Load()); tc.claims > 0 && n != tc.claims {
				t.Fatalf("the store was claimed %d times, want %d: a poll claimed a lease live on the store's clock", n, tc.claims)
			}
		})
	}
}

// countingStore counts the store's claims; it keeps the store's GetNow.
type countingStore struct {
	*boltstore.Store
	claims atomic.Int32
}

func (c *countingStore) Claim(ctx context.Context, req driver.ClaimRequest) (driver.ClaimResult, error) {
	c.claims.Add(1)
	return c.Store.Claim(ctx, req)
}
