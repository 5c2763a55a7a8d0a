package redisfast_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/redisfast"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// client dials the test Redis with a key prefix of the test's own: every
// key the test sends must be under it, and none is left when it ends.
func client(t *testing.T) (redis.UniversalClient, string) {
	t.Helper()
	prefix := testenv.RedisPrefix(t)
	rdb, err := redisfast.Dial(testenv.RedisURL(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	testenv.GuardRedisKeys(t, rdb, prefix)
	return rdb, prefix
}

func layer(t *testing.T) *redisfast.Layer {
	t.Helper()
	_, l := clientLayer(t)
	return l
}

// clientLayer is a layer on client(t), with that client to look behind it.
func clientLayer(t *testing.T) (redis.UniversalClient, *redisfast.Layer) {
	t.Helper()
	rdb, prefix := client(t)
	l, err := redisfast.New(rdb, 5*time.Second, redisfast.WithKeyPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	return rdb, l
}

func key() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func TestTTLBound(t *testing.T) {
	for _, ttl := range []time.Duration{0, -time.Second, 301 * time.Second} {
		if _, err := redisfast.New(nil, ttl); err == nil {
			t.Errorf("ttl %s accepted", ttl)
		}
	}
	if redisfast.Key("abc") != "idem:{abc}" {
		t.Fatal(redisfast.Key("abc"))
	}
}

// A prefix goes before the hash tag, which stays the key's first brace
// (Cluster hashes {K} alone); a prefix with a brace would move it, and one
// with a glob character would make SCAN MATCH prefix* find other keys.
func TestKeyPrefix(t *testing.T) {
	for _, p := range []string{"a{b", "}", "a*", "a?", "a[b]", `a\b`, "a b", strings.Repeat("p", redisfast.MaxKeyPrefix+1)} {
		if _, err := redisfast.New(nil, time.Second, redisfast.WithKeyPrefix(p)); err == nil {
			t.Errorf("prefix %q accepted", p)
		}
	}
	l := layer(t)
	ctx := context.Background()
	k := key()
	if err := l.Publish(ctx, driver.Record{Key: k, Status: driver.StatusSucceeded, Fence: 1, PayloadHash: "ph"}, 0); err != nil {
		t.Fatal(err)
	}
	rdb, err := redisfast.Dial(testenv.RedisURL(t), 0) // unguarded: it reads outside the prefix
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	for name, want := range map[string]int64{l.Key(k): 1, redisfast.Key(k): 0} {
		if n, err := rdb.Exists(ctx, name).Result(); err != nil || n != want {
			t.Errorf("EXISTS %s = %d, %v; want %d", name, n, err, want)
		}
	}
	if !strings.HasSuffix(l.Key(k), "idem:{"+k+"}") || strings.Index(l.Key(k), "{") != len(l.Key(k))-len(k)-2 {
		t.Errorf("key %q: the hash tag {K} is not its first brace", l.Key(k))
	}
}

func TestClaimVerdicts(t *testing.T) {
	l := layer(t)
	ctx := context.Background()
	type step struct {
		name    string
		do      func(k string) (driver.FastAnswer, error)
		verdict driver.FastVerdict
	}
	claim := func(owner, ph string, lease time.Duration) func(string) (driver.FastAnswer, error) {
		return func(k string) (driver.FastAnswer, error) { return l.Claim(ctx, k, owner, 0, ph, lease) }
	}
	publish := func(rec driver.Record, left time.Duration) func(string) (driver.FastAnswer, error) {
		return func(k string) (driver.FastAnswer, error) {
			rec.Key = k
			return driver.FastAnswer{Verdict: "published"}, l.Publish(ctx, rec, left)
		}
	}
	sleep := func(d time.Duration) func(string) (driver.FastAnswer, error) {
		return func(string) (driver.FastAnswer, error) {
			time.Sleep(d)
			return driver.FastAnswer{Verdict: "slept"}, nil
		}
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"first then other then same", []step{
			{"a claims", claim("a", "ph", time.Minute), driver.FastFirst},
			{"a FIRST registers nothing", claim("b", "ph", time.Minute), driver.FastFirst},
			{"the store's answer is mirrored", publish(driver.Record{Status: driver.StatusRunning, Fence: 1, Attempt: 1,
				LeaseOwner: "a", PayloadHash: "ph"}, time.Minute), "published"},
			{"b sees a's live lease", claim("b", "ph", time.Minute), driver.FastRepeatOther},
			{"a copy of a's try", claim("a", "ph", time.Minute), driver.FastRepeatOther},
			{"a's retry", func(k string) (driver.FastAnswer, error) { return l.Claim(ctx, k, "a", 1, "ph", time.Minute) },
				driver.FastRepeatSame},
			// A copy without a retry count may run beside the holder: it waits
			// (issue 20 case 4), answered with the owner so the engine sees
			// the lease is its own.
			{"a, try unknown", func(k string) (driver.FastAnswer, error) { return l.Claim(ctx, k, "a", -1, "ph", time.Minute) },
				driver.FastRepeatOther},
			{"other payload", claim("c", "other", time.Minute), driver.FastMismatch},
		}},
		{"expired lease is stale, then the new claimant holds it", []step{
			{"a claims briefly", claim("a", "ph", 30*time.Millisecond), driver.FastFirst},
			{"the store's answer is mirrored", publish(driver.Record{Status: driver.StatusRunning, Fence: 1, Attempt: 1,
				LeaseOwner: "a", PayloadHash: "ph"}, 30*time.Millisecond), "published"},
			{"wait", sleep(60 * time.Millisecond), "slept"},
			{"b may go to the store", claim("b", "ph", time.Minute), driver.FastStale},
			{"c waits for b", claim("c", "ph", time.Minute), driver.FastRepeatOther},
		}},
		{"terminal state answers with its result", []step{
			{"a claims", claim("a", "ph", time.Minute), driver.FastFirst},
			{"store committed", publish(driver.Record{Status: driver.StatusSucceeded, Fence: 1, Attempt: 1,
				ResultRef: "oss://b/k", PayloadHash: "ph"}, 0), "published"},
			{"duplicate", claim("b", "ph", time.Minute), driver.FastSucceeded},
			{"another payload", claim("c", "other", time.Minute), driver.FastMismatch},
			{"no payload hash", claim("d", "", time.Minute), driver.FastMismatch},
		}},
		{"a finished entry without a payload hash answers only a request without one", []step{
			{"store committed without a hash", publish(driver.Record{Status: driver.StatusFailedFinal, Fence: 1,
				LastErrorCode: "policy_rejected"}, 0), "published"},
			{"a request naming a hash", claim("b", "ph", time.Minute), driver.FastMismatch},
			{"a request without one", claim("c", "", time.Minute), driver.FastFailedFinal},
		}},
		{"retryable failure lets the next claimant try the store", []step{
			{"publish retryable", publish(driver.Record{Status: driver.StatusFailedRetryable, Fence: 1, Attempt: 1,
				PayloadHash: "ph"}, 0), "published"},
			{"b", claim("b", "ph", time.Minute), driver.FastStale},
		}},
		{"lower fence never overwrites", []step{
			{"final at fence 2", publish(driver.Record{Status: driver.StatusFailedFinal, Fence: 2, Attempt: 2,
				LastErrorCode: "policy_rejected", PayloadHash: "ph"}, 0), "published"},
			{"stale RUNNING at fence 1", publish(driver.Record{Status: driver.StatusRunning, Fence: 1,
				LeaseOwner: "old", PayloadHash: "ph"}, time.Minute), "published"},
			{"still final", claim("b", "ph", time.Minute), driver.FastFailedFinal},
		}},
		{"a late renewal does not hide a retryable failure", []step{
			{"failed at 2", publish(driver.Record{Status: driver.StatusFailedRetryable, Fence: 2, PayloadHash: "ph"}, 0), "published"},
			{"renewal at 2 arrives late", publish(driver.Record{Status: driver.StatusRunning, Fence: 2,
				LeaseOwner: "x", PayloadHash: "ph"}, time.Minute), "published"},
			{"the next claimant may go to the store", claim("b", "ph", time.Minute), driver.FastStale},
		}},
		{"terminal at the same fence is not regressed", []step{
			{"succeeded at 3", publish(driver.Record{Status: driver.StatusSucceeded, Fence: 3, PayloadHash: "ph"}, 0), "published"},
			{"renewal at 3 arrives late", publish(driver.Record{Status: driver.StatusRunning, Fence: 3,
				LeaseOwner: "x", PayloadHash: "ph"}, time.Minute), "published"},
			{"still succeeded", claim("b", "ph", time.Minute), driver.FastSucceeded},
		}},
		{"another terminal state at the same fence is older news", []step{
			{"failed for good at 4", publish(driver.Record{Status: driver.StatusFailedFinal, Fence: 4, PayloadHash: "ph",
				LastErrorCode: "notify_rejected"}, 0), "published"},
			{"a duplicate's mirror of the success at 4 arrives late", publish(driver.Record{Status: driver.StatusSucceeded,
				Fence: 4, PayloadHash: "ph"}, 0), "published"},
			{"still failed", claim("b", "ph", time.Minute), driver.FastFailedFinal},
		}},
		{"a retryable failure at a terminal entry's fence is older news", []step{
			{"succeeded at 5", publish(driver.Record{Status: driver.StatusSucceeded, Fence: 5, PayloadHash: "ph"}, 0), "published"},
			{"failed retryably at 5, late", publish(driver.Record{Status: driver.StatusFailedRetryable, Fence: 5,
				PayloadHash: "ph"}, 0), "published"},
			{"still succeeded", claim("b", "ph", time.Minute), driver.FastSucceeded},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := key()
			for _, s := range c.steps {
				ans, err := s.do(k)
				if err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
				if ans.Verdict != s.verdict {
					t.Fatalf("%s: verdict %s, want %s", s.name, ans.Verdict, s.verdict)
				}
			}
		})
	}
}

func TestTerminalAnswerCarriesRecord(t *testing.T) {
	l := layer(t)
	ctx := context.Background()
	k := key()
	rec := driver.Record{Key: k, Status: driver.StatusFailedFinal, Fence: 2, Attempt: 2, PayloadHash: "ph",
		LastErrorCode: "policy_rejected", LastError: "data_inspection_failed"}
	if err := l.Publish(ctx, rec, 0); err != nil {
		t.Fatal(err)
	}
	ans, err := l.Claim(ctx, k, "b", 0, "ph", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := ans.Record
	if got.Status != rec.Status || got.Fence != 2 || got.Attempt != 2 || got.LastErrorCode != "policy_rejected" ||
		got.LastError != "data_inspection_failed" {
		t.Fatalf("answer %+v", got)
	}
}

// A FIRST leaves no entry: the store has not confirmed it, so it would
// answer no duplicate (the engine sends them to the store), and writing it
// cost every first delivery Redis's time (issue #24).
func TestAFirstRegistersNothing(t *testing.T) {
	rdb, l := clientLayer(t)
	ctx := context.Background()
	k := key()
	for _, owner := range []string{"a", "b"} {
		ans, err := l.Claim(ctx, k, owner, 0, "ph", time.Minute)
		if err != nil || ans.Verdict != driver.FastFirst {
			t.Fatalf("claim by %s: %+v %v, want FIRST", owner, ans, err)
		}
		if n, err := rdb.Exists(ctx, l.Key(k)).Result(); err != nil || n != 0 {
			t.Fatalf("after a FIRST by %s: EXISTS = %d, %v; want 0", owner, n, err)
		}
	}
}

// The claim script decides every entry itself, the ones Claim's read
// answers too: the entry may change between the read and the script (a
// duplicate meeting the holder's completion as it lands, a key that
// expires), and the script then answers as the read would have.
func TestTheScriptDecidesAlone(t *testing.T) {
	rdb, l := clientLayer(t)
	ctx := context.Background()
	done := driver.Record{Status: driver.StatusSucceeded, Fence: 2, Attempt: 2, LeaseOwner: "a", PayloadHash: "ph",
		ResultRef: "oss://b/k", LastErrorCode: "c", LastError: "m"}
	cases := []struct {
		name  string
		entry *driver.Record
		ph    string
		want  driver.FastAnswer
	}{
		{"no entry: FIRST, registering nothing", nil, "ph", driver.FastAnswer{Verdict: driver.FastFirst}},
		{"a finished entry: its record, with the owner that completed it", &done, "ph",
			driver.FastAnswer{Verdict: driver.FastSucceeded, Record: driver.Record{Status: driver.StatusSucceeded, Fence: 2,
				Attempt: 2, LeaseOwner: "a", ResultRef: "oss://b/k", LastErrorCode: "c", LastError: "m"}}},
		{"a finished entry of another payload", &done, "other", driver.FastAnswer{Verdict: driver.FastMismatch}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := key()
			if c.entry != nil {
				rec := *c.entry
				rec.Key = k
				if err := l.Publish(ctx, rec, 0); err != nil {
					t.Fatal(err)
				}
			}
			ans, err := redisfast.ClaimByScript(l, ctx, k, "b", 0, c.ph, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if c.want.Record.Status != "" {
				c.want.Record.Key = k
			}
			if fmt.Sprintf("%+v", ans) != fmt.Sprintf("%+v", c.want) {
				t.Fatalf("answer %+v\nwant   %+v", ans, c.want)
			}
			n, err := rdb.Exists(ctx, l.Key(k)).Result()
			if err != nil || (n == 1) != (c.entry != nil) {
				t.Fatalf("EXISTS = %d, %v after the script", n, err)
			}
		})
	}
}

// An entry registered by a claim stays unconfirmed until the Store's record
// is published over it, also when a takeover claimant keeps an older fence.
func TestUnconfirmedUntilPublished(t *testing.T) {
	l := layer(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		prepare func(k string)
		want    bool
	}{
		{"confirmed by a publish", func(k string) {
			mustClaim(t, l, k, "a", time.Minute)
			if err := l.Publish(ctx, driver.Record{Key: k, Status: driver.StatusRunning, Fence: 1, LeaseOwner: "a",
				PayloadHash: "ph"}, time.Minute); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"a STALE registration over a confirmed fence", func(k string) {
			if err := l.Publish(ctx, driver.Record{Key: k, Status: driver.StatusRunning, Fence: 3, LeaseOwner: "old",
				PayloadHash: "ph"}, 20*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			time.Sleep(40 * time.Millisecond)
			mustClaim(t, l, k, "a", time.Minute)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := key()
			tc.prepare(k)
			ans, err := l.Claim(ctx, k, "b", 0, "ph", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if ans.Verdict != driver.FastRepeatOther || ans.Unconfirmed != tc.want {
				t.Fatalf("answer %+v, want REPEAT_OTHER with Unconfirmed %v", ans, tc.want)
			}
		})
	}
}

func mustClaim(t *testing.T, l *redisfast.Layer, k, owner string, lease time.Duration) {
	t.Helper()
	if _, err := l.Claim(context.Background(), k, owner, 0, "ph", lease); err != nil {
		t.Fatal(err)
	}
}
