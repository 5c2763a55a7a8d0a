// Package redisfast is the fast first tier of idempotency on Redis (single
// node, Sentinel or Cluster through redis.UniversalClient). A claim reads the
// key with one HMGET, which answers a key Redis has no entry for and a
// finished one; any other entry goes to a Lua script that decides and
// registers atomically. A second script mirrors committed records with
// compare-and-set on the fence. Entries live at most DEDUP_TTL_SECONDS and
// only ever hold what the durable store committed or a live claim, so losing
// Redis loses no correctness.
package redisfast

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/idempotency/driver"
)

// MaxTTL is the longest an entry may live (docs/design.md §7).
const MaxTTL = 300 * time.Second

// Entry fields: st status, ow lease owner, ph payload hash, lu lease until (ms,
// Redis clock), fe fence, at attempt, rr result_ref, ec/em last error, tr the
// owner's try, uc 1 while the owner's claim is registered here but not yet
// confirmed by the Store (set by a STALE claim, cleared by a publish that
// lands). The claim script answers an explicit verdict string, never nil.
// Claim reads the common cases without it (Layer.read); the script decides
// them too, for the entry may have changed since that read.
var claimScript = newScript(`
-- Redis before 5.0 refuses a write after TIME unless the script replicates
-- its effects rather than itself (from 5.0 on, that is the default and the
-- call is a no-op; it is skipped where it no longer exists).
if redis.replicate_commands then redis.replicate_commands() end
local owner, ph, lease, ttl, try = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local h = redis.call('HMGET', KEYS[1], 'st', 'ow', 'ph', 'lu', 'fe', 'at', 'rr', 'ec', 'em', 'tr', 'uc')
local st = h[1]
-- As the store compares (driver.SamePayload): an empty hash is one too, so an
-- entry of a record claimed without one never answers a request that names
-- one. MISMATCH only sends the caller to the store, which decides.
if st and (h[3] or '') ~= ph then
  return {'MISMATCH'}
end
-- The common duplicate is answered before reading the clock. The owner is
-- the holder that completed it: its request's own retry asks the store for
-- the finish (handler/finish.go), whatever its try says.
if st == 'SUCCEEDED' or st == 'FAILED_FINAL' then
  return {st, h[5] or '0', h[6] or '0', h[7] or '', h[8] or '', h[9] or '', h[2] or ''}
end
-- A FIRST registers nothing: a claim the store has not confirmed answers no
-- duplicate (the engine sends them to the store), so an entry would only
-- cost a write. The completion's publish creates the entry.
if not st then
  return {'FIRST'}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lu = tonumber(h[4] or '0')
if st == 'RUNNING' then
  -- The same request's known later try may take over (the Store decides);
  -- a copy of the same try, or one without a retry count, waits like any
  -- other duplicate (answered retry later: the lease is its own). An empty
  -- owner is nobody's.
  if owner ~= '' and h[2] == owner and try >= 0 and try > tonumber(h[10] or '-1') then
    return {'REPEAT_SAME'}
  end
  if lu > now then
    return {'REPEAT_OTHER', h[5] or '0', h[6] or '0', h[2] or '', tostring(lu - now), h[11] or '0'}
  end
end
-- An expired lease or a record waiting for a retry: register this caller so
-- that concurrent duplicates wait for it, keep the fence for CAS ordering.
redis.call('HSET', KEYS[1], 'st', 'RUNNING', 'ow', owner, 'tr', try, 'lu', now + lease, 'uc', 1)
redis.call('PEXPIRE', KEYS[1], ttl)
return {'STALE'}
`)

// publishScript mirrors a committed record. It refuses to go back: an entry
// with a higher fence, a terminal entry at the same fence, a failed entry
// against a RUNNING of the same fence, or another owner's unconfirmed
// registration against a RUNNING of the same fence, stays.
var publishScript = newScript(`
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local fence = tonumber(ARGV[2])
local h = redis.call('HMGET', KEYS[1], 'st', 'fe', 'uc', 'ow')
if h[1] then
  local cur = tonumber(h[2] or '0')
  if cur > fence then return 'KEPT' end
  -- Another owner registered over this fence (its lease ran out, or the
  -- record failed): a RUNNING of that fence for someone else is older news
  -- than the registration, whose claimant's Store answer comes at a higher
  -- fence (its takeover, or a third owner's).
  if cur == fence and h[3] == '1' and ARGV[1] == 'RUNNING' and h[4] ~= ARGV[4] then return 'KEPT' end
  if cur == fence and (h[1] == 'SUCCEEDED' or h[1] == 'FAILED_FINAL') and ARGV[1] ~= h[1] then return 'KEPT' end
  -- A renewal that arrives after the same fence's failure is stale: only a
  -- takeover (a higher fence) makes a key RUNNING again.
  if cur == fence and h[1] ~= 'RUNNING' and ARGV[1] == 'RUNNING' then return 'KEPT' end
end
-- ph is the record's, empty too: duplicates are answered here only when
-- theirs is the same (Layer.read, the claim script).
redis.call('HSET', KEYS[1], 'st', ARGV[1], 'fe', ARGV[2], 'at', ARGV[3], 'ow', ARGV[4], 'tr', ARGV[11],
  'lu', now + tonumber(ARGV[6]), 'rr', ARGV[7], 'ec', ARGV[8], 'em', ARGV[9], 'uc', 0, 'ph', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[10])
return 'SET'
`)

// takeFinishScript mirrors a finish taken over (driver.FastLayer.TakeFinish):
// only a SUCCEEDED entry of a lower fence changes, and only its holder and
// fence; its time to live stays.
var takeFinishScript = newScript(`
local h = redis.call('HMGET', KEYS[1], 'st', 'fe')
if h[1] ~= 'SUCCEEDED' or tonumber(h[2] or '0') >= tonumber(ARGV[3]) then return 'KEPT' end
redis.call('HSET', KEYS[1], 'ow', ARGV[1], 'tr', ARGV[2], 'fe', ARGV[3])
return 'SET'
`)

// Layer implements driver.FastLayer.
type Layer struct {
	rdb redis.UniversalClient
	ap  *redis.AutoPipeliner // nil when rdb has none (see New)
	ttl time.Duration
	// prefix starts every key of this layer (WithKeyPrefix).
	prefix string
	// calls is the number of commands under way: one alone takes the
	// plain round trip, which the autopipeliner's hand-off would only slow.
	calls atomic.Int64
}

var (
	_ driver.FastLayer      = (*Layer)(nil)
	_ driver.FastReplicated = (*Layer)(nil)
)

// Option configures a Layer.
type Option func(*Layer)

// WithKeyPrefix starts every key of the layer with p (REDIS_KEY_PREFIX), so
// that deployments or test runs sharing one Redis database keep apart and
// each can find and delete its own keys (SCAN MATCH p*). p holds at most
// MaxKeyPrefix of A-Z a-z 0-9 : . _ - (as REDIS_KEY_PREFIX): no brace, for the
// hash tag {K} must stay the key's first so that Cluster keeps the whole key
// on K's slot, and no glob character, which would make p* match other keys.
func WithKeyPrefix(p string) Option { return func(l *Layer) { l.prefix = p } }

// MaxKeyPrefix is the longest key prefix accepted.
const MaxKeyPrefix = 64

// New wraps a client. ttl is DEDUP_TTL_SECONDS; it must be in (0, 300 s].
// Build the client with ContextTimeoutEnabled so that the engine's per-call
// bound (50 ms by default) reaches the socket.
func New(rdb redis.UniversalClient, ttl time.Duration, opts ...Option) (*Layer, error) {
	if ttl <= 0 || ttl > MaxTTL {
		return nil, fmt.Errorf("redisfast: ttl %s out of (0, %s]", ttl, MaxTTL)
	}
	l := &Layer{rdb: rdb, ttl: ttl}
	for _, o := range opts {
		o(l)
	}
	if !ValidKeyPrefix(l.prefix) {
		return nil, fmt.Errorf("redisfast: key prefix %q: want at most %d of A-Z a-z 0-9 : . _ -", l.prefix, MaxKeyPrefix)
	}
	if ap, err := rdb.AsyncAutoPipeline(); err == nil {
		l.ap = ap
	}
	return l, nil
}

// ValidKeyPrefix reports whether WithKeyPrefix accepts p (REDIS_KEY_PREFIX is
// checked by it too): no brace, for the hash tag {K} must stay the key's
// first, and no glob character, so that SCAN MATCH p* finds only its keys.
func ValidKeyPrefix(p string) bool {
	if len(p) > MaxKeyPrefix {
		return false
	}
	for _, c := range []byte(p) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(":._-", c) >= 0) {
			return false
		}
	}
	return true
}

// Key is the Redis key of K without a prefix, hash-tagged so that Cluster
// keeps it on one slot.
func Key(k string) string { return "idem:{" + k + "}" }

// Key is the Redis key of K in this layer: its prefix, then Key(k).
func (l *Layer) Key(k string) string { return l.prefix + "idem:{" + k + "}" } // Key(k) in one concatenation

// Claim reads key (Layer.read) and, unless that answers, runs the claim
// script: a second round trip, within the same bound.
func (l *Layer) Claim(ctx context.Context, key, owner string, try int, payloadHash string, lease time.Duration) (driver.FastAnswer, error) {
	if ans, ok, err := l.read(ctx, key, payloadHash); ok || err != nil {
		return ans, err
	}
	return l.claimByScript(ctx, key, owner, try, payloadHash, lease)
}

// claimByScript decides by the claim script alone, whatever the entry.
func (l *Layer) claimByScript(ctx context.Context, key, owner string, try int, payloadHash string, lease time.Duration) (driver.FastAnswer, error) {
	vals, err := l.run(ctx, claimScript, []string{l.Key(key)}, owner, payloadHash, lease.Milliseconds(), l.ttl.Milliseconds(), try).StringSlice()
	if err != nil {
		return driver.FastAnswer{}, fmt.Errorf("redis claim: %w", err)
	}
	if len(vals) == 0 {
		return driver.FastAnswer{}, errors.New("redis claim: empty answer")
	}
	ans := driver.FastAnswer{Verdict: driver.FastVerdict(vals[0])}
	switch ans.Verdict {
	case driver.FastSucceeded, driver.FastFailedFinal:
		if len(vals) < 6 {
			return ans, fmt.Errorf("redis claim: short answer %q", vals)
		}
		ans.Record = finished(key, vals)
	case driver.FastRepeatOther:
		if len(vals) < 5 {
			return ans, fmt.Errorf("redis claim: short answer %q", vals)
		}
		ans.Record = driver.Record{Key: key, Status: driver.StatusRunning, Fence: atoi64(vals[1]),
			Attempt: int(atoi64(vals[2])), LeaseOwner: vals[3]}
		ans.LeaseLeft = time.Duration(atoi64(vals[4])) * time.Millisecond
		ans.Unconfirmed = len(vals) > 5 && vals[5] == "1"
	case driver.FastFirst, driver.FastRepeatSame, driver.FastStale, driver.FastMismatch:
	default:
		return ans, fmt.Errorf("redis claim: unknown verdict %q", vals[0])
	}
	return ans, nil
}

// readFields are the fields read answers from: a finished entry's, in the
// order of the claim script's terminal answer (see finished), then ph; as
// HMGET's arguments, built once rather than on every claim.
var readFields = []any{"st", "fe", "at", "rr", "ec", "em", "ow", "ph"}

// read answers a claim with one HMGET, without the script, in the two
// common cases (issue #24: Lua took most of Redis's time per claim): no
// entry (FIRST, registering nothing, as the script does) and a finished
// entry of the caller's payload hash (an empty hash is one too, as the
// store compares). ok is false for any other entry: the script decides.
func (l *Layer) read(ctx context.Context, key, payloadHash string) (ans driver.FastAnswer, ok bool, err error) {
	args := make([]any, 0, 2+len(readFields))
	args = append(append(args, "hmget", l.Key(key)), readFields...)
	cmd := redis.NewStringSliceCmd(ctx, args...)
	if err := l.do(ctx, cmd); err != nil {
		return ans, false, fmt.Errorf("redis claim: %w", err)
	}
	vals := cmd.Val() // a missing field reads as ""
	if len(vals) != len(readFields) {
		return ans, false, fmt.Errorf("redis claim: %d fields read, want %d", len(vals), len(readFields))
	}
	switch st := driver.FastVerdict(vals[0]); {
	case st == "":
		return driver.FastAnswer{Verdict: driver.FastFirst}, true, nil
	case (st == driver.FastSucceeded || st == driver.FastFailedFinal) && vals[7] == payloadHash:
		return driver.FastAnswer{Verdict: st, Record: finished(key, vals)}, true, nil
	}
	return ans, false, nil
}

// finished is the record of a finished entry from its fields st, fe, at,
// rr, ec, em and, when there, ow: the holder that completed it, whose own
// request's retry asks the store for the finish (handler/finish.go).
func finished(key string, vals []string) driver.Record {
	rec := driver.Record{Key: key, Status: driver.Status(vals[0]), Fence: atoi64(vals[1]),
		Attempt: int(atoi64(vals[2])), ResultRef: vals[3], LastErrorCode: vals[4], LastError: vals[5]}
	if len(vals) > 6 {
		rec.LeaseOwner = vals[6]
	}
	return rec
}

// Publish mirrors a committed record with CAS on its fence.
func (l *Layer) Publish(ctx context.Context, rec driver.Record, leaseLeft time.Duration) error {
	err := l.run(ctx, publishScript, []string{l.Key(rec.Key)}, l.publishArgs(rec, leaseLeft)...).Err()
	if err != nil {
		return fmt.Errorf("redis publish: %w", err)
	}
	return nil
}

func (l *Layer) publishArgs(rec driver.Record, leaseLeft time.Duration) []any {
	return []any{string(rec.Status), rec.Fence, rec.Attempt, rec.LeaseOwner, rec.PayloadHash, leaseLeft.Milliseconds(),
		rec.ResultRef, rec.LastErrorCode, rec.LastError, l.ttl.Milliseconds(), rec.LeaseTry}
}

// ReplicaWait bounds PublishReplicated's wait for the replicas.
const ReplicaWait = 2 * time.Second

// PublishReplicated mirrors rec and returns once every replica connected to
// the primary (INFO replication) acknowledged it (WAIT, on the connection
// that wrote it): a reset's entry, which a promoted replica must hold
// (driver.FastReplicated). Without replicas it is Publish. A Cluster or Ring
// client writes it on the key's node and does not wait (each shard's
// replicas are not known here).
func (l *Layer) PublishReplicated(ctx context.Context, rec driver.Record) error {
	c, ok := l.rdb.(*redis.Client)
	if !ok {
		return l.Publish(ctx, rec, 0)
	}
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Errorf("redis publish: INFO replication: %w", err)
	}
	n := connectedReplicas(info)
	if n == 0 {
		return l.Publish(ctx, rec, 0)
	}
	var wait *redis.IntCmd
	_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		publishScript.Eval(ctx, p, []string{l.Key(rec.Key)}, l.publishArgs(rec, 0)...)
		wait = redis.NewIntCmd(ctx, "wait", n, ReplicaWait.Milliseconds())
		return p.Process(ctx, wait)
	})
	if err != nil {
		return fmt.Errorf("redis publish: %w", err)
	}
	if got := wait.Val(); got < int64(n) {
		return fmt.Errorf("%w: %d of %d replicas acknowledged the entry of %s within %s", driver.ErrFastReplicaBehind,
			got, n, rec.Key, ReplicaWait)
	}
	return nil
}

// connectedReplicas reads connected_slaves from INFO replication (0 when
// absent).
func connectedReplicas(info string) int {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// TakeFinish names owner the holder of a finished entry's finish at fence
// (takeFinishScript).
func (l *Layer) TakeFinish(ctx context.Context, key, owner string, try int, fence int64) error {
	if err := l.run(ctx, takeFinishScript, []string{l.Key(key)}, owner, try, fence).Err(); err != nil {
		return fmt.Errorf("redis take finish: %w", err)
	}
	return nil
}

// Release does nothing: this layer leaves no claim for the store to confirm
// (a FIRST registers nothing, and a STALE registration keeps the entry's
// fence and ends with its own lease).
func (l *Layer) Release(context.Context, string, string) error { return nil }

// Forget deletes the entry.
func (l *Layer) Forget(ctx context.Context, key string) error {
	if err := l.rdb.Del(ctx, l.Key(key)).Err(); err != nil {
		return fmt.Errorf("redis forget: %w", err)
	}
	return nil
}

func atoi64(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// script is a Lua script with its source, for the EVAL that loads it.
type script struct {
	*redis.Script
	src string
}

func newScript(src string) script { return script{redis.NewScript(src), src} }

// run runs s through do, falling back to EVAL when Redis does not know
// the script (a restart, SCRIPT FLUSH, another Cluster node). Every script
// is safe to run late, as a timed-out call may (a STALE claim registers a lease
// that expires, the publish is fenced).
func (l *Layer) run(ctx context.Context, s script, keys []string, args ...any) *redis.Cmd {
	cmd := s.cmd(ctx, "evalsha", s.Hash(), keys, args)
	err := l.do(ctx, cmd)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd = s.cmd(ctx, "eval", s.src, keys, args)
		err = l.do(ctx, cmd)
	}
	if err != nil {
		// A batch may still fill cmd in after its wait ran out: answer a
		// command of our own.
		failed := redis.NewCmd(ctx)
		failed.SetErr(err)
		return failed
	}
	return cmd
}

func (s script) cmd(ctx context.Context, name, body string, keys []string, args []any) *redis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, name, body, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	return redis.NewCmd(ctx, a...)
}

// do sends cmd and waits for its reply. While other calls are under way it
// goes through the autopipeliner (go-redis's deferred face): the commands
// of concurrent invocations share one write and one read instead of a round
// trip each, on the client and in Redis (issue #24, BENCHMARKS.md). A call
// alone takes the plain round trip, which the hand-off would only slow.
// The wait for the reply is bounded by ctx, as a plain call is by
// ContextTimeoutEnabled; the batch is not cancelled, so the command may
// still run.
func (l *Layer) do(ctx context.Context, cmd redis.Cmder) error {
	alone := l.calls.Add(1) == 1
	defer l.calls.Add(-1)
	if l.ap == nil || alone {
		return l.rdb.Process(ctx, cmd)
	}
	if err := l.ap.Submit(ctx, cmd).WaitContext(ctx); err != nil && ctx.Err() != nil {
		return err // the batch may still fill cmd in: the caller must not read it
	}
	return cmd.Err()
}
