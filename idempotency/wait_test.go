package idempotency_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/idemtest"
)

// A duplicate waiting for an owner (WithWaitInFlight) whose record turns
// out a malformed tombstone is answered its FINAL error, as a claim is,
// not "in progress", which FC would retry for as long as the record stays.
func TestWaitInFlightAnswersAMalformedTombstone(t *testing.T) {
	store := openBolt(t)
	eng := idempotency.New(store, idempotency.WithWaitInFlight(5*time.Second))
	ctx := context.Background()
	req := idempotency.ClaimRequest{Key: idemtest.NewKey(), PayloadHash: "ph", Owner: "first", Lease: 5 * time.Second}
	if _, l, err := eng.Claim(ctx, req); err != nil || l == nil {
		t.Fatalf("claim: %v", err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond) // the waiter meets the live lease first
		// Of a RUNNING record: malformed (driver.CheckTombstone).
		_ = rewrite(store, req.Key, func(r *driver.Record) { r.Tombstone = true })
	}()
	req.Owner = "second"
	_, err := eng.Do(ctx, req, func(context.Context, *idempotency.Lease) (string, error) { return "ref", nil })
	if class, code := idempotency.Classify(err); class != idempotency.ClassFinal || code != "malformed_tombstone" {
		t.Fatalf("the waiter was answered %v (%s %s), want FINAL malformed_tombstone", err, class, code)
	}
}
