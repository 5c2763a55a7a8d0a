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
