package redisfast_test

import (
	"context"
	"crypto/sha1"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/redisfast"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// batches counts the pipelines the client sends with more than one call of
// the layer (a script, or a claim's HMGET): the autopipeliner's batches go
// through the pipeline hooks (as does the handshake of a new connection,
// which holds none).
type batches struct{ n atomic.Int64 }

func (*batches) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*batches) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (b *batches) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		calls := 0
		for _, c := range cmds {
			if layerCommand(c) {
				calls++
			}
		}
		if calls > 1 {
			b.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// layerCommand: c is one the layer sends for a claim or a publish (a
// script, or the claim's HMGET), not a new connection's handshake.
func layerCommand(c redis.Cmder) bool {
	switch c.Name() {
	case "evalsha", "eval", "hmget":
		return true
	}
	return false
}

// commands counts the layer's commands the client sends (scripts and
// HMGET; not a new connection's handshake), by name, whether alone or in a
// batch.
type commands struct {
	mu sync.Mutex
	n  map[string]int
}

func (*commands) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commands) count(cmds ...redis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cmd := range cmds {
		if layerCommand(cmd) {
			c.n[cmd.Name()]++
		}
	}
}
func (c *commands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.count(cmd); return next(ctx, cmd) }
}
func (c *commands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.count(cmds...); return next(ctx, cmds) }
}

func (c *commands) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// The two claims almost every delivery makes — of a key Redis has no entry
// for, and of a finished one — are one HMGET each and run no script (issue
// #24: the claim script's Lua was most of Redis's time per claim); any
// other entry is decided by the script.
func TestCommonClaimsRunNoScript(t *testing.T) {
	rdb, prefix := client(t)
	seen := &commands{n: map[string]int{}}
	rdb.AddHook(seen)
	l, err := redisfast.New(rdb, 5*time.Second, redisfast.WithKeyPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	k := key()
	publish := func(st driver.Status, left time.Duration) {
		t.Helper()
		if err := l.Publish(ctx, driver.Record{Key: k, Status: st, Fence: 1, Attempt: 1, LeaseOwner: "a", PayloadHash: "ph",
			ResultRef: "ref"}, left); err != nil {
			t.Fatal(err)
		}
		seen.take()
	}
	for _, c := range []struct {
		name    string
		before  func()
		ph      string
		verdict driver.FastVerdict
		want    map[string]int
	}{
		{"no entry", func() {}, "ph", driver.FastFirst, map[string]int{"hmget": 1}},
		{"another delivery's live lease", func() { publish(driver.StatusRunning, time.Minute) }, "ph", driver.FastRepeatOther,
			map[string]int{"hmget": 1, "evalsha": 1}},
		{"a finished entry", func() { publish(driver.StatusSucceeded, 0) }, "ph", driver.FastSucceeded, map[string]int{"hmget": 1}},
		{"a finished entry of another payload", func() {}, "other", driver.FastMismatch, map[string]int{"hmget": 1, "evalsha": 1}},
	} {
		c.before()
		ans, err := l.Claim(ctx, k, "b", 0, c.ph, time.Minute)
		if err != nil || ans.Verdict != c.verdict {
			t.Fatalf("%s: %+v %v, want %s", c.name, ans, err, c.verdict)
		}
		got := seen.take()
		delete(got, "eval") // a script Redis did not know yet is sent again
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: commands %v, want %v", c.name, got, c.want)
		}
	}
}

// unknownScripts plays a Redis that does not know the scripts yet (after a
// restart or a failover): it answers NOSCRIPT to every EVALSHA of a script
// that no EVAL through this client has loaded, without sending it. SCRIPT
// FLUSH would do the same for every client of the server, other runs' too.
type unknownScripts struct {
	mu      sync.Mutex
	loaded  map[string]bool
	refused atomic.Int64
}

func (u *unknownScripts) refuse(c redis.Cmder) bool {
	args := c.Args()
	if len(args) < 2 {
		return false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	switch c.Name() {
	case "eval":
		u.loaded[fmt.Sprintf("%x", sha1.Sum([]byte(fmt.Sprint(args[1]))))] = true
	case "evalsha":
		if !u.loaded[fmt.Sprint(args[1])] {
			c.SetErr(redis.ErrNoScript)
			u.refused.Add(1)
			return true
		}
	}
	return false
}

func (*unknownScripts) DialHook(next redis.DialHook) redis.DialHook { return next }
func (u *unknownScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if u.refuse(cmd) {
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}
func (u *unknownScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		sent := make([]redis.Cmder, 0, len(cmds))
		for _, c := range cmds {
			if !u.refuse(c) {
				sent = append(sent, c)
			}
		}
		if len(sent) == 0 {
			return nil
		}
		return next(ctx, sent)
	}
}

// Concurrent calls share round trips (issue #24) and each still gets its
// own answer, also when Redis has to be sent the script's source again.
func TestConcurrentCallsShareRoundTrips(t *testing.T) {
	rdb, prefix := client(t)
	var seen batches
	rdb.AddHook(&seen)
	// Scripts unknown to Redis: the first calls fall back to EVAL.
	unknown := &unknownScripts{loaded: map[string]bool{}}
	rdb.AddHook(unknown)
	l, err := redisfast.New(rdb, 5*time.Second, redisfast.WithKeyPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const n = 64
	keys := make([]string, n)
	for i := range keys {
		keys[i] = key()
	}
	each := func(what string, f func(i int) error) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				if err := f(i); err != nil {
					t.Errorf("%s %d: %v", what, i, err)
				}
			})
		}
		wg.Wait()
	}
	each("claim", func(i int) error {
		ans, err := l.Claim(ctx, keys[i], "o", 0, "ph", time.Minute)
		if err == nil && ans.Verdict != driver.FastFirst {
			t.Errorf("claim %d: verdict %s", i, ans.Verdict)
		}
		return err
	})
	each("publish", func(i int) error {
		return l.Publish(ctx, driver.Record{Key: keys[i], Status: driver.StatusSucceeded, Fence: 1, Attempt: 1,
			LeaseOwner: "o", PayloadHash: "ph", ResultRef: "ref-" + keys[i]}, 0)
	})
	each("duplicate", func(i int) error {
		ans, err := l.Claim(ctx, keys[i], "d", 0, "ph", time.Minute)
		if err == nil && (ans.Verdict != driver.FastSucceeded || ans.Record.ResultRef != "ref-"+keys[i]) {
			t.Errorf("duplicate %d: %+v", i, ans)
		}
		return err
	})
	if seen.n.Load() == 0 {
		t.Fatal("192 concurrent calls were sent one round trip each: no batch of more than one")
	}
	if unknown.refused.Load() == 0 {
		t.Fatal("no call met an unknown script: the EVAL fallback was not exercised")
	}
}

// A hung Redis bounds every waiting call by its own context, also the calls
// waiting in a batch: the socket has no read timeout here, so only the wait
// for the batch can end them.
func TestHungRedisBoundsConcurrentCalls(t *testing.T) {
	prefix := testenv.RedisPrefix(t)
	opt, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, opt.Addr)
	opt.Addr, opt.ReadTimeout, opt.WriteTimeout = proxy.Addr(), -1, -1
	opt.ContextTimeoutEnabled, opt.MaxRetries = true, -1
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { proxy.Restore(); rdb.Close() })
	testenv.GuardRedisKeys(t, rdb, prefix)
	l, err := redisfast.New(rdb, 5*time.Second, redisfast.WithKeyPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	proxy.Block()
	done := make(chan error, 16)
	for range cap(done) {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, err := l.Claim(ctx, key(), "o", 0, "ph", time.Minute)
			done <- err
		}()
	}
	guard := time.After(10 * time.Second) // a liveness guard, not a timing assertion
	for range cap(done) {
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("a claim succeeded against a hung Redis")
			}
		case <-guard:
			t.Fatal("calls hung behind a hung Redis")
		}
	}
}
