package idemtest

import (
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/redisfast"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// StoreOnly is the harness of a durable store without a fast layer.
func StoreOnly(s idempotency.Store) Harness {
	return Harness{NewEngine: func(t *testing.T, opts ...idempotency.Option) *idempotency.Engine {
		return idempotency.New(s, append([]idempotency.Option{idempotency.WithLogger(testLogger(t))}, opts...)...)
	}}
}

// WithRedis is the harness of s behind a real Redis reached through a relay
// that the fast-layer cases cut or stall.
func WithRedis(t *testing.T, redisURL string, s idempotency.Store) Harness {
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, opt.Addr)
	opt.Addr = proxy.Addr()
	opt.ContextTimeoutEnabled, opt.MaxRetries = true, -1
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	fast, err := redisfast.New(rdb, redisfast.MaxTTL)
	if err != nil {
		t.Fatal(err)
	}
	return Harness{
		NewEngine: func(t *testing.T, opts ...idempotency.Option) *idempotency.Engine {
			// A generous bound: two test packages share two cores and the relay;
			// FastHangs sets the production 50 ms itself.
			return idempotency.New(s, append([]idempotency.Option{idempotency.WithFastLayer(fast),
				idempotency.WithFastTimeout(time.Second), idempotency.WithLogger(testLogger(t))}, opts...)...)
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

// testLogger sends the engine's lines to the test's output, shown on failure
// or with -v, instead of the process's stderr.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}
