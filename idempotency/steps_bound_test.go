package idempotency_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/idemtest"
)

// hungCheckpoints is a store whose checkpoint writes hang until their
// context ends (a partitioned database, a row lock held elsewhere).
type hungCheckpoints struct{ driver.Store }

func (hungCheckpoints) Checkpoint(ctx context.Context, _ string, _ int64, _ map[string]string) error {
	<-ctx.Done()
	return ctx.Err()
}

// A step's checkpoint is written detached, bounded by the terminal-write
// timeout (5s), so that an invocation that timed out still ends soon after.
// Concurrent steps of one lease wait for each other's checkpoint under the
// lease's lock, each starting its own 5s only once it holds the lock: on a
// hung store, n steps that end together return after n×5s (the last one
// 15s for three), and Do's Fail adds its own 5s after that. The bound a
// step's end has must not grow with the number of steps that end with it.
func TestReviewConcurrentCheckpointsShareTheTerminalBound(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the terminal-write timeout")
	}
	store, err := boltstore.Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	eng := idempotency.New(hungCheckpoints{store})
	_, l, err := eng.Claim(context.Background(), idempotency.ClaimRequest{Key: idemtest.NewKey(), PayloadHash: "ph", Owner: "o1"})
	if err != nil || l == nil {
		t.Fatalf("claim: %v", err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, op := range []string{"reserve", "quote", "charge"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := l.Step(context.Background(), op, func(context.Context) (string, error) { return op + "-id", nil }); err == nil {
				t.Errorf("step %s: checkpoint on a hung store reported written", op)
			}
		}()
	}
	wg.Wait()
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("three steps ending together on a hung store returned after %v; each is bounded by the 5s terminal-write timeout", d.Round(100*time.Millisecond))
	}
}
