package idemtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
)

// Fast-layer cases. Engines here use a short back-off so that a restored
// Redis is used again within the test.
const testBackoff = 50 * time.Millisecond

func fastAnswers(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	key := NewKey()
	_, l := claim(t, e, req(key, "a"))
	// a's fast-layer claim is not confirmed there (a FIRST on both tiers
	// publishes nothing): the first duplicate asks the store, which
	// confirms it, and the next is answered by the fast layer.
	res, _ := claim(t, e, req(key, "b"))
	want(t, "first live duplicate decision", res.Decision, idempotency.DecisionRepeatOther)
	if res.Source == "redis" {
		t.Fatal("a claim the store had not confirmed in the fast layer answered a duplicate")
	}
	res, _ = claim(t, e, req(key, "b2"))
	want(t, "live duplicate decision", res.Decision, idempotency.DecisionRepeatOther)
	want(t, "live duplicate answered by", res.Source, "redis")
	want(t, "mirrored owner", res.Record.LeaseOwner, "a")
	if err := l.Complete(context.Background(), "ref"); err != nil {
		t.Fatal(err)
	}
	res, _ = claim(t, e, req(key, "c"))
	want(t, "done duplicate decision", res.Decision, idempotency.DecisionRepeatDone)
	want(t, "done duplicate answered by", res.Source, "redis")
	want(t, "result", res.Record.ResultRef, "ref")
	st := e.Stats()
	want(t, "fast rejects", st.FastRejects, 2)
	want(t, "store conflicts", st.StoreConflicts, 1)
}

// cutAfterClaim is a fast layer that vanishes right after it answered a
// claim: between the Redis claim and the MySQL claim.
type cutAfterClaim struct {
	driver.FastLayer
	once sync.Once
	cut  func()
}

func (c *cutAfterClaim) Claim(ctx context.Context, key, owner string, try int, ph string, lease time.Duration) (driver.FastAnswer, error) {
	ans, err := c.FastLayer.Claim(ctx, key, owner, try, ph, lease)
	c.once.Do(c.cut)
	return ans, err
}

func fastDownMidClaim(t *testing.T, h Harness) {
	defer h.FastUp(t)
	wrapped := &cutAfterClaim{FastLayer: h.Fast, cut: func() { h.FastDown(t, false) }}
	e := h.NewEngine(t, idempotency.WithFastLayer(wrapped), idempotency.WithFastBackoff(testBackoff))
	key := NewKey()
	res, l := claim(t, e, req(key, "a"))
	want(t, "decision", res.Decision, idempotency.DecisionFirst)
	if l == nil {
		t.Fatal("claim lost when Redis vanished mid-claim")
	}
	// With Redis gone, 64 more deliveries and a completion work on the store alone.
	var owners atomic.Int32
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			_, l, err := e.Claim(context.Background(), req(key, fmt.Sprintf("dup-%d", i)))
			if err != nil {
				t.Error(err)
			}
			if l != nil {
				owners.Add(1)
			}
		})
	}
	wg.Wait()
	want(t, "duplicates that took the key", owners.Load(), 0)
	if err := l.Complete(context.Background(), "ref"); err != nil {
		t.Fatalf("complete without Redis: %v", err)
	}
	if e.Stats().FastErrors == 0 {
		t.Fatal("Redis failures were not counted")
	}
	want(t, "status", get(t, e, key).Status, driver.StatusSucceeded)
}

func fastHangs(t *testing.T, h Harness) {
	defer h.FastUp(t)
	e := h.NewEngine(t, idempotency.WithFastTimeout(50*time.Millisecond), idempotency.WithFastBackoff(time.Minute))
	h.FastDown(t, true)
	key := NewKey()
	done := make(chan struct{})
	var res driver.ClaimResult
	var l *idempotency.Lease
	go func() { defer close(done); res, l = claim(t, e, req(key, "a")) }()
	select { // a liveness guard, not a timing assertion: a hung Redis must not hang the claim
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("claim hung behind a hung Redis")
	}
	if l == nil {
		t.Fatalf("decision %s", res.Decision)
	}
	_, l2 := claim(t, e, req(key, "b")) // inside the back-off window: Redis is skipped
	if l2 != nil {
		t.Fatal("duplicate owns the key")
	}
	st := e.Stats()
	if st.FastErrors == 0 || st.FastSkipped == 0 {
		t.Fatalf("stats %+v: want errors and skips counted", st)
	}
}

func fastStaleRunning(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	ctx := context.Background()
	// A Redis entry left by a claimant that never reached the store.
	ghost := NewKey()
	r := req(ghost, "ghost")
	if err := h.Fast.Publish(ctx, driver.Record{Key: ghost, Status: driver.StatusRunning, LeaseOwner: "ghost",
		PayloadHash: r.PayloadHash}, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	res, l := claim(t, e, req(ghost, "b"))
	want(t, "decision on a stale-only entry", res.Decision, idempotency.DecisionFirst)
	if l == nil {
		t.Fatal("stale Redis entry blocked the first claim")
	}
	// A crashed owner: its lease expires in both tiers; the takeover goes through.
	key := NewKey()
	claim(t, e, short(req(key, "crashed")))
	time.Sleep(shortLease + 150*time.Millisecond)
	res, l = claim(t, e, req(key, "b"))
	want(t, "decision after expiry", res.Decision, idempotency.DecisionTakeover)
	if l == nil {
		t.Fatal("stale Redis RUNNING blocked the takeover")
	}
}

func fastStaleVsStore(t *testing.T, h Harness) {
	defer h.FastUp(t)
	e := h.NewEngine(t, idempotency.WithFastBackoff(testBackoff))
	key := NewKey()
	_, l := claim(t, e, short(req(key, "a")))
	h.FastDown(t, false)
	if err := l.Complete(context.Background(), "ref"); err != nil { // Redis misses the terminal state
		t.Fatal(err)
	}
	h.FastUp(t)
	time.Sleep(2 * testBackoff)
	// Redis holds nothing the Store confirmed (a FIRST on both tiers
	// publishes nothing; a layer may have registered a's claim): the Store
	// answers.
	res, l2 := claim(t, e, req(key, "b"))
	if l2 != nil {
		t.Fatal("a duplicate ran a SUCCEEDED key because Redis was stale")
	}
	want(t, "decision over the stale mirror", res.Decision, idempotency.DecisionRepeatDone)
	if res.Source == "redis" {
		t.Fatal("the stale mirror answered instead of the store")
	}
	if res.Record.ResultRef != "ref" {
		t.Fatalf("store answer %+v", res)
	}
	res, _ = claim(t, e, req(key, "c"))
	want(t, "repaired mirror answers", res.Source, "redis")
	want(t, "result", res.Record.ResultRef, "ref")
}

// fastUnconfirmed: a claimant that died between its fast-layer claim and the
// Store's leaves an entry at fence 0 in a layer that registers a FIRST
// (redisfast registers nothing; TestEntriesOfThePreviousVersion there
// checks the entries its previous version left). It never answers a
// duplicate by itself, however young: an "in progress" answer acknowledges the delivery,
// and nothing durable carries the work. The Store decides (here: nobody
// holds the key, the duplicate runs it), and the Store's answer is
// mirrored, so the next duplicate is answered by the fast layer again.
func fastUnconfirmed(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	ctx := context.Background()
	key := NewKey()
	dead := req(key, "dead")
	if _, err := h.Fast.Claim(ctx, key, dead.Owner, -1, dead.PayloadHash, idempotency.DefaultLease); err != nil {
		t.Fatal(err)
	}
	l := storeDecides(t, e, key, idempotency.DecisionFirst)
	if err := l.Complete(ctx, "ref"); err != nil {
		t.Fatal(err)
	}
	want(t, "status", get(t, e, key).Status, driver.StatusSucceeded)
	want(t, "attempt", get(t, e, key).Attempt, 1)
}

// fastUnconfirmedTakeover: the same after a takeover. A worker whose lease
// ran out is superseded in the fast layer by a claimant that registers
// there (the entry keeps the old, confirmed fence) and dies before the
// Store's takeover; its entry must not hold a duplicate off.
func fastUnconfirmedTakeover(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	ctx := context.Background()
	key := NewKey()
	_, l := claim(t, e, short(req(key, "first")))
	if err := l.Renew(ctx); err != nil { // publishes: the entry carries a confirmed fence
		t.Fatal(err)
	}
	time.Sleep(shortLease + 150*time.Millisecond) // "first" is gone; its lease ran out
	dead := req(key, "dead")
	ans, err := h.Fast.Claim(ctx, key, dead.Owner, -1, dead.PayloadHash, idempotency.DefaultLease)
	if err != nil {
		t.Fatal(err)
	}
	want(t, "fast-layer verdict for the dead claimant", ans.Verdict, driver.FastStale)
	l2 := storeDecides(t, e, key, idempotency.DecisionTakeover)
	want(t, "fence after the takeover", l2.Fence, 2)
	if err := l2.Complete(ctx, "ref"); err != nil {
		t.Fatal(err)
	}
}

// storeDecides: a dead claimant's unconfirmed entry (or none: a layer may
// register nothing for a FIRST) sends the next duplicate to the Store,
// which decides (want, owned). The Store's answers are mirrored: once a
// duplicate has met the new holder's lease there, the next is answered by
// the fast layer.
func storeDecides(t *testing.T, e *idempotency.Engine, key string, decision idempotency.Decision) *idempotency.Lease {
	t.Helper()
	res, l := claim(t, e, req(key, "next-delivery"))
	want(t, "over an unconfirmed claim", res.Decision, decision)
	if l == nil || res.Source == "redis" {
		t.Fatalf("the Store did not decide over an unconfirmed claim: %+v", res)
	}
	res, _ = claim(t, e, req(key, "after"))
	want(t, "after the Store's answer", res.Decision, idempotency.DecisionRepeatOther)
	res, _ = claim(t, e, req(key, "after-that"))
	want(t, "once mirrored", res.Decision, idempotency.DecisionRepeatOther)
	want(t, "once mirrored, answered by", res.Source, "redis")
	want(t, "mirrored owner", res.Record.LeaseOwner, "next-delivery")
	return l
}

// fastUnconfirmedLive: asking the Store is also right when the claimant is
// alive and simply has not published (a FIRST on both tiers leaves the
// mirror at fence 0, or empty): the Store says "in progress", never a
// second owner.
func fastUnconfirmedLive(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	key := NewKey()
	_, l := claim(t, e, req(key, "a"))
	var owners atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			res, l, err := e.Claim(context.Background(), req(key, fmt.Sprintf("dup-%d", i)))
			if err != nil {
				t.Error(err)
				return
			}
			if l != nil {
				owners.Add(1)
			}
			if res.Decision != idempotency.DecisionRepeatOther {
				t.Errorf("decision %s", res.Decision)
			}
		})
	}
	wg.Wait()
	want(t, "duplicates that took the key", owners.Load(), 0)
	if err := l.Complete(context.Background(), "ref"); err != nil {
		t.Fatalf("the owner lost its key: %v", err)
	}
}

// fastUnconfirmedRetry (issue 20, found by the explorer's acked world): a's
// Store claim commits but reports failure, so the engine drops a's fast
// claim and a's delivery is answered retryably; b registers its own fast
// claim on its way to the Store (in a layer that registers a FIRST). FC's retry of a must reach the Store and
// take its own lease over: answered "in progress" from b's unconfirmed
// claim it would be acknowledged, b would be answered "in progress" by the
// Store (a's lease), and nobody would run the task.
func fastUnconfirmedRetry(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	ctx := context.Background()
	key := NewKey()
	first := req(key, "a")
	claim(t, e, first)
	if err := h.Fast.Release(ctx, key, first.Owner); err != nil { // as Claim does on a Store error
		t.Fatal(err)
	}
	if _, err := h.Fast.Claim(ctx, key, "b", -1, first.PayloadHash, idempotency.DefaultLease); err != nil {
		t.Fatal(err)
	}
	retry := first
	retry.Try = 1
	res, l := claim(t, e, retry)
	if l == nil {
		t.Fatalf("the claimant's retry was answered %s by %s over another delivery's unconfirmed claim", res.Decision, res.Source)
	}
	want(t, "the claimant's retry", res.Decision, idempotency.DecisionRepeatSame)
	if err := l.Complete(ctx, "ref"); err != nil {
		t.Fatal(err)
	}
}
