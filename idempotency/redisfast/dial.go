package redisfast

import (
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Dial builds a client for REDIS_URL: redis:// or rediss:// (TLS) for one node
// or a proxy-fronted Tair/Cluster endpoint, and redis:// with several
// ?addr= parameters for a Cluster seen node by node (go-redis's cluster URL).
// It sets what the fast path needs: context deadlines honoured on the socket
// (ContextTimeoutEnabled), no client-side retries — the engine's own bound
// and back-off decide, and a retry would only stretch a 50 ms budget — and
// every command to a master: a claim's HMGET is a read that go-redis would
// send to a replica under read_only, route_by_latency or route_randomly, and
// a replica that lags answers a finished state an operator's reset, written
// to the master, has already replaced.
func Dial(url string, poolSize int) (redis.UniversalClient, error) {
	if strings.Contains(url, "addr=") {
		opt, err := redis.ParseClusterURL(url)
		if err != nil {
			return nil, fmt.Errorf("REDIS_URL: %w", redactURL(err))
		}
		opt.ContextTimeoutEnabled, opt.MaxRetries = true, -1
		opt.ReadOnly, opt.RouteByLatency, opt.RouteRandomly = false, false, false
		if poolSize > 0 {
			opt.PoolSize = poolSize
		}
		return redis.NewClusterClient(opt), nil
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", redactURL(err))
	}
	opt.ContextTimeoutEnabled, opt.MaxRetries = true, -1
	if poolSize > 0 {
		opt.PoolSize = poolSize
	}
	return redis.NewClient(opt), nil
}

// redactURL keeps go-redis's parse error but never a password it may quote.
func redactURL(err error) error {
	return fmt.Errorf("invalid Redis URL (%s)", strings.SplitN(err.Error(), ":", 2)[0])
}
