// Package redistest brings the Redis fast layer into a store's conformance
// run: every durable store's tests run the suite with and without it.
package redistest

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/idemtest"
	"github.com/idemgate/idemgate/idempotency/redisfast"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// Harness is the conformance harness of s behind the test Redis
// (testenv.RedisURL), reached through a relay that the fast-layer cases cut
// or stall. Its keys are under a prefix of the test's own
// (testenv.RedisPrefix): deleted when the test ends, and a key sent outside
// it fails the test.
func Harness(t *testing.T, s driver.Store) idemtest.Harness {
	prefix := testenv.RedisPrefix(t)
	opt, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, opt.Addr)
	opt.Addr = proxy.Addr()
	opt.ContextTimeoutEnabled, opt.MaxRetries = true, -1
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	testenv.GuardRedisKeys(t, rdb, prefix)
	fast, err := redisfast.New(rdb, redisfast.MaxTTL, redisfast.WithKeyPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	return idemtest.Harness{
		NewEngine: func(t *testing.T, opts ...idempotency.Option) *idempotency.Engine {
			// A generous bound: two test packages share two cores and the relay;
			// FastHangs sets the production 50 ms itself.
			return idempotency.New(s, append([]idempotency.Option{idempotency.WithFastLayer(fast),
				idempotency.WithFastTimeout(time.Second), idempotency.WithLogger(idemtest.TestLogger(t))}, opts...)...)
		},
		Fast: fast,
		FastDown: func(t *testing.T, block bool) {
			if block {
				proxy.Block()
			} else {
				proxy.Cut()
			}
		},
		FastUp: func(t *testing.T) { proxy.Restore() },
	}
}
