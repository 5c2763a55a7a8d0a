package idempotency_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/idemtest"
)

// Two independent steps of one lease run at once (a fan-out inside Do, as
// a library user writes it; the per-step records this replaced made each
// step's claim and completion its own). Each Step copies the lease's map,
// adds its result and writes the whole map: the second write drops the
// first's checkpoint (and the map is read and written without a lock), so
// a resumed task runs that step again.
func TestReviewConcurrentStepsKeepBothCheckpoints(t *testing.T) {
	store, err := boltstore.Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	eng := idempotency.New(store)
	req := idempotency.ClaimRequest{Key: idemtest.NewKey(), PayloadHash: "ph", Owner: "o1"}
	_, err = eng.Do(context.Background(), req, func(ctx context.Context, l *idempotency.Lease) (string, error) {
		var ready, wg sync.WaitGroup
		release := make(chan struct{})
		errs := make([]error, 2)
		for i, op := range []string{"reserve", "quote"} {
			ready.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = l.Step(ctx, op, func(context.Context) (string, error) {
					ready.Done()
					<-release // both steps end together
					return op + "-id", nil
				})
			}()
		}
		ready.Wait()
		close(release)
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return "", err
			}
		}
		return "ok", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := store.Get(context.Background(), req.Key)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Steps["reserve"] != "reserve-id" || rec.Steps["quote"] != "quote-id" {
		t.Fatalf("checkpoints %v: a step both goroutines completed is missing", rec.Steps)
	}
}
