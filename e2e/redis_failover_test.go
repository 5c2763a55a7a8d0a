package e2e_test

// Issue 40, drill 2: the fast layer's Redis fails over. A private primary
// and its replica (the replica's link through a proxy the test can stall),
// REDIS_URL on a proxy that plays the endpoint; the replica promoted with
// REPLICAOF NO ONE while writes are in flight, the endpoint moved to it and
// the old primary killed. A stale or missing entry may cost statements,
// never a wrong answer: in particular a replay done just before the
// failover is not answered by the promoted replica's stale FAILED_FINAL.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/redisfast"
	"github.com/idemgate/idemgate/internal/dev/proc"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

func TestFailoverRedisReplicaPromoted(t *testing.T) {
	ctx := context.Background()
	primary := testenv.PrivateRedis(t, "")
	link := testenv.NewProxy(t, primary.Addr) // the replica's link, which the test stalls
	replica := testenv.PrivateRedis(t, link.Addr())
	endpoint := testenv.NewProxy(t, primary.Addr)
	replicaClient := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer replicaClient.Close()
	const prefix = "drill:"
	d := newDrill(t, "REDIS_URL=redis://"+endpoint.Addr()+"/0", "REDIS_KEY_PREFIX="+prefix)
	inst := start(t, d.env...)
	entry := func(key string) string { // the replica's copy of key's entry: its status
		st, _ := replicaClient.HGet(ctx, prefix+redisfast.Key(key), "st").Result()
		return st
	}
	awaitReplica := func(key, st string) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); entry(key) != st; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("the replica's entry of %s is %q, want %s", key, entry(key), st)
			}
		}
	}

	// A task refused FINAL by the model; its entry reaches the replica.
	d.llm.Set(func(int64) (time.Duration, int) { return 0, 400 })
	body := taskEvent("ev-"+nonce(), "redis failover "+nonce(), nil)
	a, err := inst.tryInvoke(body, "fc-"+nonce(), 0)
	m := mustJSON(t, a, err)
	key, _ := m["idempotency_key"].(string)
	if a.status != 404 || m["retryable"] != false || key == "" {
		t.Fatalf("the refused task: %d %v", a.status, m)
	}
	awaitReplica(key, string(driver.StatusFailedFinal))

	// The replica falls behind; the operator replays the key.
	d.llm.Set(func(int64) (time.Duration, int) { return 0, 200 })
	link.Block()
	replay := func() (string, error) {
		return proc.CLI(ctx, binary, d.env, "replay", "--key", key, "--reason", "model fixed", "--operator", "oncall@acme")
	}
	out, err := replay()
	if err != nil {
		// Refused while a replica lags: retryable, saying why, and changing
		// nothing (the lagging replica's FAILED_FINAL is still the store's).
		if !strings.Contains(err.Error(), "fast_layer_replica_behind") {
			t.Fatalf("replay: %v", err)
		}
		if rec := d.record(key); rec.Status != driver.StatusFailedFinal || d.llm.Calls(key) != 1 {
			t.Fatalf("a refused replay changed the key: %s, model calls %d", rec.Status, d.llm.Calls(key))
		}
		t.Logf("replay refused while the replica lagged: %v", err)
		link.Restore()
		if out, err = replay(); err != nil {
			t.Fatalf("replay with the replica caught up: %v", err)
		}
		link.Block() // what follows the replay's reset may not reach it
	}
	rec := d.record(key)
	if rec.Status != driver.StatusSucceeded {
		t.Fatalf("after the replay: %s (%s)", rec.Status, out)
	}

	// Writes in flight: other tasks, each delivered twice, across the
	// promotion.
	var wg sync.WaitGroup
	inflight := map[string][]string{} // key → the result_refs answered
	var mu sync.Mutex
	for i := range 24 {
		wg.Go(func() {
			ev := taskEvent(fmt.Sprintf("ev-%d-%s", i, nonce()), fmt.Sprintf("in flight %d %s", i, nonce()), nil)
			for range 2 {
				deliverUntilDone(t, inst, ev, &mu, inflight)
				time.Sleep(time.Duration(i) * 10 * time.Millisecond)
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	if err := replicaClient.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	endpoint.Cut()
	endpoint.Retarget(replica.Addr)
	endpoint.Restore()
	primary.Kill()
	wg.Wait()

	// The replayed key after the failover (and past the fast layer's
	// back-off after the endpoint's errors): its stored result, never the
	// promoted replica's stale FAILED_FINAL.
	time.Sleep(2 * time.Second)
	t.Logf("the promoted replica's entry of the replayed key: %q", entry(key))
	for try := range 2 {
		a, err := inst.tryInvoke(body, "fc-"+nonce(), 0)
		m := mustJSON(t, a, err)
		if a.status != 200 || m["status"] != "SUCCEEDED" || m["result_ref"] != rec.ResultRef {
			t.Fatalf("the replayed key after the failover (delivery %d; the promoted replica holds %q): %d %v",
				try, entry(key), a.status, m)
		}
	}
	for k, refs := range inflight {
		if n := d.llm.Calls(k); n != 1 {
			t.Errorf("key %s: %d model calls across the failover", k, n)
		}
		for _, r := range refs[1:] {
			if r != refs[0] {
				t.Errorf("key %s: two results answered: %v", k, refs)
			}
		}
	}
	t.Logf("REDIS-FAILOVER keys_in_flight=%d model_calls=%d", len(inflight), d.llm.Total())
}

// deliverUntilDone delivers ev as FC does (the next retry count after a
// failed try) until it is answered 200, and records the answered
// result_ref of a success by key.
func deliverUntilDone(t *testing.T, in *instance, ev []byte, mu *sync.Mutex, refs map[string][]string) {
	reqID := "fc-" + nonce()
	for try := range 8 {
		a, err := in.tryInvoke(ev, reqID, try)
		if err == nil && a.status == 200 {
			m := a.json(t)
			if m["status"] == "SUCCEEDED" {
				mu.Lock()
				k := m["idempotency_key"].(string)
				refs[k] = append(refs[k], fmt.Sprint(m["result_ref"]))
				mu.Unlock()
			}
			return
		}
		time.Sleep(time.Duration(100<<try) * time.Millisecond)
	}
	t.Errorf("a delivery was never acknowledged")
}
