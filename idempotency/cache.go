package idempotency

import (
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/idemgate/idemgate/idempotency/driver"
)

// maxCacheTTL bounds WithLocalCache's TTL: the fast layer's own bound
// (redisfast.MaxTTL), so the instance never remembers longer than Redis.
const maxCacheTTL = 300 * time.Second

// WithLocalCache keeps up to size terminal answers in the instance's memory
// for ttl (at most maxCacheTTL), so a hot duplicate on a warm instance is
// answered without a network round trip (default off). It changes one
// guarantee, which is why it is off: an operator's replay resets a key on
// one instance, and every other instance may still answer the key's old
// final state from its cache until ttl has passed.
func WithLocalCache(size int, ttl time.Duration) Option {
	return func(o *options) { o.cacheSize, o.cacheTTL = size, min(ttl, maxCacheTTL) }
}

// cache is the local cache of terminal claim results by key.
type cache struct {
	lru *expirable.LRU[string, driver.ClaimResult]
}

func newCache(size int, ttl time.Duration) *cache {
	return &cache{lru: expirable.NewLRU[string, driver.ClaimResult](size, nil, ttl)}
}

// get answers a duplicate req from the cache.
func (c *cache) get(req ClaimRequest) (driver.ClaimResult, bool) {
	if c == nil {
		return driver.ClaimResult{}, false
	}
	res, ok := c.lru.Get(req.Key)
	if !ok {
		return res, false
	}
	if !driver.SamePayload(res.Record.PayloadHash, req.PayloadHash, req.LegacyPayloadHash) {
		res.Decision = DecisionPayloadMismatch
	}
	res.Source = "cache"
	return res, true
}

// put remembers a terminal record.
func (c *cache) put(rec driver.Record) {
	if c == nil || !rec.Status.Terminal() || rec.PayloadHash == "" {
		return
	}
	c.lru.Add(rec.Key, driver.ClaimResult{Decision: DecisionRepeatDone, Record: rec})
}

func (c *cache) forget(key string) {
	if c != nil {
		c.lru.Remove(key)
	}
}
