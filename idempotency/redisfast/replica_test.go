package redisfast_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/redisfast"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// A reset's entry must be on every replica before the store changes: a
// replica that lags would, promoted, answer the old FAILED_FINAL after the
// replay (docs/design.md §7). While one lags the reset is refused,
// retryable, changing nothing; once it caught up the reset goes through
// and the replica holds the reset record.
func TestResetWaitsForTheReplicas(t *testing.T) {
	ctx := context.Background()
	primary := testenv.PrivateRedis(t, "")
	link := testenv.NewProxy(t, primary.Addr)
	replica := redis.NewClient(&redis.Options{Addr: testenv.PrivateRedis(t, link.Addr()).Addr})
	defer replica.Close()
	rdb := redis.NewClient(&redis.Options{Addr: primary.Addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	l, err := redisfast.New(rdb, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	eng := idempotency.New(store, idempotency.WithFastLayer(l), idempotency.WithMaxAttempts(1))
	k := key()
	_, err = eng.Do(ctx, idempotency.ClaimRequest{Key: k, PayloadHash: "ph", Owner: "first"},
		func(context.Context, *idempotency.Lease) (string, error) {
			return "", idempotency.Final("invalid_request", errors.New("refused"))
		})
	if err == nil {
		t.Fatal("the task did not fail")
	}
	status := func() string { st, _ := replica.HGet(ctx, redisfast.Key(k), "st").Result(); return st }
	for end := time.Now().Add(10 * time.Second); status() != string(driver.StatusFailedFinal); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the replica's entry is %q", status())
		}
	}
	before, _ := store.Get(ctx, k)

	link.Block()
	rp := driver.Replay{Key: k, Reason: "drill", Operator: "oncall", Source: "key"}
	_, _, err = eng.Reset(ctx, k, rp)
	if _, code := idempotency.Classify(err); code != "fast_layer_replica_behind" || !strings.Contains(err.Error(), "0 of 1 replicas") {
		t.Fatalf("reset with a replica behind: %v", err)
	}
	if after, _ := store.Get(ctx, k); after.Status != driver.StatusFailedFinal || after.Fence != before.Fence {
		t.Fatalf("a refused reset changed the record: %+v", after)
	}
	if st, _ := rdb.HGet(ctx, redisfast.Key(k), "st").Result(); st == string(driver.StatusReceived) {
		t.Fatal("the primary kept the refused reset's entry")
	}

	link.Restore()
	if _, after, err := eng.Reset(ctx, k, rp); err != nil || after.Status != driver.StatusReceived {
		t.Fatalf("reset with the replica caught up: %v %+v", err, after)
	}
	if st := status(); st != string(driver.StatusReceived) { // acknowledged before the reset returned
		t.Fatalf("the replica's entry after the reset: %q", st)
	}
}
