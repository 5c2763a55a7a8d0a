package idemtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
)

// fastLatePublishOverRegistration (review1): a confirmed entry can carry
// an owner the Store no longer has. d's Store claim read c's live lease
// (fence 1); its publish of that answer runs late (a stalled goroutine, or
// an autopipelined script whose wait ran out). Meanwhile c failed
// retryably before saving its input, its back-off passed, a registered in
// the fast layer (STALE: fence 1 kept, st RUNNING) and took the key over
// in the Store (fence 2), and a's claim reported failure (or a died before
// its publish). d's late publish lands at fence 1 over a's registration:
// the publish script sees RUNNING at the same fence and overwrites it as
// confirmed (uc 0), owner c. FC's retry of a is then answered "in
// progress" from the fast layer — acknowledged — and c's retry is answered
// "in progress" by the Store (a's lease): nobody carries the work.
func fastLatePublishOverRegistration(t *testing.T, h Harness) {
	e := h.NewEngine(t, idempotency.WithRetryBackoff(time.Millisecond))
	storeOnly := h.NewEngine(t, idempotency.WithFastLayer(nil), idempotency.WithRetryBackoff(time.Millisecond))
	ctx := context.Background()
	key := NewKey()
	_, lc := claim(t, e, req(key, "c"))
	dRes, _ := claim(t, storeOnly, req(key, "d")) // d's Store answer; its publish is held back
	want(t, "d's Store answer", dRes.Decision, idempotency.DecisionRepeatOther)
	if _, err := lc.Fail(ctx, idempotency.Retryable("temporary_unavailable", errors.New("input save failed"))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // c's back-off passes
	a := req(key, "a")
	ans, err := h.Fast.Claim(ctx, key, a.Owner, 0, a.PayloadHash, idempotency.DefaultLease)
	if err != nil {
		t.Fatal(err)
	}
	want(t, "a's fast-layer verdict", ans.Verdict, driver.FastStale)
	if _, la := claim(t, storeOnly, a); la == nil { // a's Store claim commits ...
		t.Fatal("a did not take the key over")
	}
	if err := h.Fast.Release(ctx, key, a.Owner); err != nil { // ... but reports failure
		t.Fatal(err)
	}
	if err := h.Fast.Publish(ctx, dRes.Record, dRes.LeaseLeft); err != nil { // d's late publish
		t.Fatal(err)
	}
	// The entry must still say "a registered, unconfirmed": the Store
	// decides for whoever meets it next.
	peek, err := h.Fast.Claim(ctx, key, "x", 0, a.PayloadHash, idempotency.DefaultLease)
	if err != nil {
		t.Fatal(err)
	}
	if peek.Verdict == driver.FastRepeatOther && !peek.Unconfirmed && peek.Record.LeaseOwner == "c" {
		t.Fatalf("d's late publish of fence %d turned a's registration into c's confirmed lease", dRes.Record.Fence)
	}
	// FC's retry over the go1 runtime (try 0 again): only the entry tells.
	retry := a
	res, l := claim(t, e, retry)
	if l == nil && res.Decision == idempotency.DecisionRepeatOther && !driver.RetryLater(res.Record, retry.Owner) {
		cRetry := req(key, "c")
		cRetry.Try = 1
		cres, cl := claim(t, e, cRetry)
		t.Fatalf("a's retry was answered in progress (acknowledged) by %s from owner %s's entry, while the Store's lease is a's own; "+
			"c's retry: %s by %s (owner %s, lease %v)", res.Source, res.Record.LeaseOwner, cres.Decision, cres.Source,
			cres.Record.LeaseOwner, cl != nil)
	}
	if l != nil {
		_ = l.Complete(ctx, "ref")
	}
}

// fastRetryAsksTheStore: FC's known later try never takes "in progress"
// from the fast layer, which may be older news than the Store — here an
// entry naming c's lease, as a late publish leaves it on a key whose entry
// was evicted, while the Store's lease is a's own. Answered from it, a's
// retry would be acknowledged while a's dead try holds the key.
func fastRetryAsksTheStore(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	storeOnly := h.NewEngine(t, idempotency.WithFastLayer(nil))
	ctx := context.Background()
	key := NewKey()
	a := req(key, "a")
	first, _ := claim(t, storeOnly, a)
	stale := first.Record
	stale.LeaseOwner, stale.LeaseTry = "c", 0
	if err := h.Fast.Publish(ctx, stale, idempotency.DefaultLease); err != nil {
		t.Fatal(err)
	}
	retry := a
	retry.Try = 1
	res, l := claim(t, e, retry)
	if l == nil {
		t.Fatalf("FC's retry of a was answered %s by %s (owner %s) over a's own lease in the Store", res.Decision, res.Source,
			res.Record.LeaseOwner)
	}
	want(t, "a's retry", res.Decision, idempotency.DecisionRepeatSame)
	if err := l.Complete(ctx, "ref"); err != nil {
		t.Fatal(err)
	}
}

// fastRegistrationOverALiveHolder bounds a window of the fast layer
// (docs/design.md §7): the holder h's entry says its lease ended (its
// renewal mirrors were skipped), so c registers over it (STALE), and the
// store answers c with h's live lease at the entry's fence — which the
// publish keeps out, as it keeps h's renewal mirrors out, for a RUNNING
// of that fence may be older news than a registration. Until h's
// completion (or failure) lands, every duplicate asks the store: each
// answer is the store's, and correct (h's lease, in progress), only not
// cheap. h's completion replaces the registration, and the fast layer
// answers again.
func fastRegistrationOverALiveHolder(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	ctx := context.Background()
	key := NewKey()
	first, lh := claim(t, e, req(key, "h"))
	if lh == nil {
		t.Fatal("h's claim was not owned")
	}
	if err := h.Fast.Publish(ctx, first.Record, time.Millisecond); err != nil { // h's mirror, its renewals skipped
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // the fast layer sees h's lease end; the store's runs
	dup := func(who, owner string) driver.ClaimResult {
		t.Helper()
		res, l := claim(t, e, req(key, owner))
		if l != nil || res.Decision != idempotency.DecisionRepeatOther || res.Record.LeaseOwner != "h" {
			t.Fatalf("%s: %s (owner %q, owned %t), want in progress under h's lease", who, res.Decision,
				res.Record.LeaseOwner, l != nil)
		}
		return res
	}
	dup("c, registering over the entry", "c")
	if err := lh.Renew(ctx); err != nil { // h's renewal mirror: kept out too
		t.Fatal(err)
	}
	for i := range 3 {
		if res := dup(fmt.Sprintf("duplicate %d after c's registration", i), fmt.Sprintf("d%d", i)); res.Source == "redis" {
			t.Fatalf("duplicate %d was answered by the fast layer over c's registration", i)
		}
	}
	if err := lh.Complete(ctx, "ref"); err != nil {
		t.Fatal(err)
	}
	res, _ := claim(t, e, req(key, "e"))
	if res.Decision != idempotency.DecisionRepeatDone || res.Source != "redis" {
		t.Fatalf("after h's completion: %s by %s, want REPEAT_DONE by the fast layer (the completion replaced c's registration)",
			res.Decision, res.Source)
	}
}
