package redisfast_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/driver"
)

// During a rolling deploy, instances of the version before the claim read
// still register a FIRST: RUNNING at fence 0, unconfirmed (uc 1), owner and
// try theirs. Such an entry goes to the claim script and comes back
// unconfirmed, so the engine lets the store decide, as it did for its own
// registrations: it holds no delivery off, and the owner's later try takes
// its lease.
func TestEntriesOfThePreviousVersion(t *testing.T) {
	rdb, l := clientLayer(t)
	s, err := boltstore.Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	e := idempotency.New(s, idempotency.WithFastLayer(l), idempotency.WithFastTimeout(time.Second))
	storeOnly := idempotency.New(s)
	ctx := context.Background()
	oldFirst := func(k string) { // the previous version's FIRST, as its script wrote it
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.HSet(ctx, l.Key(k), "st", "RUNNING", "ow", "a", "tr", 0, "ph", "ph", "lu",
			now.Add(time.Minute).UnixMilli(), "fe", 0, "at", 0, "uc", 1).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.PExpire(ctx, l.Key(k), 5*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(k, owner string, try int) (driver.ClaimResult, *idempotency.Lease) {
		t.Helper()
		res, lease, err := e.Claim(ctx, idempotency.ClaimRequest{Key: k, Owner: owner, Try: try, PayloadHash: "ph"})
		if err != nil {
			t.Fatal(err)
		}
		return res, lease
	}
	for _, c := range []struct {
		name     string
		inStore  bool // a's store claim committed
		owner    string
		try      int
		decision idempotency.Decision
	}{
		{"another delivery, a died before the store", false, "b", 0, idempotency.DecisionFirst},
		{"another delivery beside a's live lease", true, "b", 0, idempotency.DecisionRepeatOther},
		{"a's later try", true, "a", 1, idempotency.DecisionRepeatSame},
		{"a copy of a's try", true, "a", 0, idempotency.DecisionRepeatOther},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := key()
			oldFirst(k)
			if c.inStore {
				if _, la, err := storeOnly.Claim(ctx, idempotency.ClaimRequest{Key: k, Owner: "a", PayloadHash: "ph"}); err != nil || la == nil {
					t.Fatalf("a's store claim: %v", err)
				}
			}
			res, lease := claim(k, c.owner, c.try)
			if res.Decision != c.decision || res.Source == "redis" || (lease != nil) != c.decision.Owned() {
				t.Fatalf("%s (try %d): %s by %s, owned %v; want %s decided by the store", c.owner, c.try, res.Decision,
					res.Source, lease != nil, c.decision)
			}
		})
	}
}
