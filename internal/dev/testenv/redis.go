package testenv

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/internal/dev/proc"
)

// RedisKeyPrefix is what every test's Redis keys start with, before the
// test's own part (RedisPrefix).
const RedisKeyPrefix = "idemgate-test:"

// RedisPrefix returns a key prefix of the test's own on the test Redis
// (RedisURL): give it to the fast layer (redisfast.WithKeyPrefix, or
// REDIS_KEY_PREFIX of a spawned binary, RedisEnv) and to every key the test
// writes itself. When the test ends, every key under it is deleted (SCAN of
// that prefix and UNLINK: never a FLUSHDB, never another run's keys), and
// the test fails if a key under it is still there after that: something
// kept writing after the test was done with it. Call it before starting
// what writes, so that its cleanup runs after theirs.
func RedisPrefix(t testing.TB) string {
	t.Helper()
	url := RedisURL(t)
	prefix := RedisKeyPrefix + proc.Nonce()[:12] + ":"
	t.Cleanup(func() {
		n, err := DeleteRedisKeys(url, prefix)
		if err != nil {
			t.Errorf("deleting the test's Redis keys (%s*): %v", prefix, err)
			return
		}
		if left, err := CountRedisKeys(url, prefix); err != nil || left != 0 {
			t.Errorf("%d Redis keys under %s* outlived the test (%d deleted; %v)", left, prefix, n, err)
		}
	})
	return prefix
}

// RedisEnv is the environment of a spawned binary on the test Redis with a
// prefix of the test's own (RedisPrefix).
func RedisEnv(t testing.TB) []string {
	t.Helper()
	prefix := RedisPrefix(t)
	return []string{"REDIS_URL=" + RedisURL(t), "REDIS_KEY_PREFIX=" + prefix}
}

// DeleteRedisKeys unlinks every key under prefix (which holds no SCAN pattern
// character) in the database url names, and says how many it deleted.
func DeleteRedisKeys(url, prefix string) (int, error) {
	n := 0
	err := scanPrefix(url, prefix, func(c *redis.Client, keys []string) error {
		if err := c.Unlink(context.Background(), keys...).Err(); err != nil {
			return err
		}
		n += len(keys)
		return nil
	})
	return n, err
}

// CountRedisKeys counts the keys under prefix.
func CountRedisKeys(url, prefix string) (int, error) {
	n := 0
	err := scanPrefix(url, prefix, func(_ *redis.Client, keys []string) error { n += len(keys); return nil })
	return n, err
}

func scanPrefix(url, prefix string, each func(*redis.Client, []string) error) error {
	if prefix == "" || strings.ContainsAny(prefix, `*?[]\`) {
		return fmt.Errorf("refused: prefix %q is empty or a pattern", prefix)
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	c := redis.NewClient(opt)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := each(c, keys); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// GuardRedisKeys fails t when a command of rdb names a key outside prefix:
// keys outside it would outlive the test (RedisPrefix deletes only its own).
// It knows the commands the tests and the fast layer send; others pass.
func GuardRedisKeys(t testing.TB, rdb redis.UniversalClient, prefix string) {
	g := &keyGuard{prefix: prefix}
	rdb.AddHook(g)
	// Reported at the end: a command may come from a goroutine the test
	// does not wait for, where t.Errorf must not be called.
	t.Cleanup(func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, k := range g.outside {
			t.Errorf("Redis key %q outside the test's prefix %q: it would outlive the test", k, prefix)
		}
	})
}

type keyGuard struct {
	prefix  string
	mu      sync.Mutex
	outside []string // the first few
}

func (g *keyGuard) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *keyGuard) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		g.check(cmd)
		return next(ctx, cmd)
	}
}

func (g *keyGuard) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			g.check(c)
		}
		return next(ctx, cmds)
	}
}

// keyed are the commands whose arguments after the name are all keys, or
// whose first argument is.
var (
	allKeys  = map[string]bool{"del": true, "unlink": true, "exists": true, "mget": true, "touch": true}
	firstKey = map[string]bool{"get": true, "set": true, "setnx": true, "getdel": true, "hset": true, "hget": true,
		"hmget": true, "hgetall": true, "hdel": true, "expire": true, "pexpire": true, "pexpireat": true, "persist": true,
		"ttl": true, "pttl": true, "type": true, "incr": true, "incrby": true, "dump": true, "restore": true}
)

func (g *keyGuard) check(cmd redis.Cmder) {
	args := cmd.Args()
	var keys []any
	switch name := cmd.Name(); {
	case name == "eval" || name == "evalsha" || name == "eval_ro" || name == "evalsha_ro":
		if len(args) < 3 {
			return
		}
		n, _ := strconv.Atoi(fmt.Sprint(args[2]))
		keys = args[3:min(len(args), 3+n)]
	case allKeys[name]:
		keys = args[1:]
	case firstKey[name] && len(args) > 1:
		keys = args[1:2]
	}
	for _, k := range keys {
		if s := fmt.Sprint(k); !strings.HasPrefix(s, g.prefix) {
			g.mu.Lock()
			if len(g.outside) < 10 {
				g.outside = append(g.outside, s)
			}
			g.mu.Unlock()
		}
	}
}
