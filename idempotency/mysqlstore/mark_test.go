package mysqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/idemtest"
	"github.com/idemgate/idemgate/idempotency/mysqlstore"
	"github.com/idemgate/idemgate/idempotency/redisfast/redistest"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// During a rolling deploy, code from before migration 009 shares the table:
// it marks a copy's try in lease_try alone and takes leases over without
// reading or writing mark_owner and mark_try (its statements list their
// columns). Either way a takeover by the marked request must start at the
// mark: one the old code left in the lease (the same request's lease
// followed), and one the new code kept apart past the old code's takeover
// by another owner. Both on the task's claim and on the finish's.
func TestAMarkOutlivesARollingDeploy(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	exec := func(t *testing.T, q string, args ...any) {
		t.Helper()
		if _, err := s.DB().ExecContext(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		// old is what the old code wrote meanwhile, on a's lease marked by
		// the new code at try 1 (a copy of a's try 0).
		old  string
		want int // the try a's next lease starts at
	}{
		{"the old code's copy marks the lease alone", `lease_try = 2`, 2},
		{"the old code's sweeper takes the lease over", `lease_owner = 'sweep', lease_try = -1, fence = fence + 1`, 1},
	} {
		for _, finish := range []bool{false, true} {
			name := c.name + ", the task"
			if finish {
				name = c.name + ", the finish"
			}
			t.Run(name, func(t *testing.T) {
				key := idemtest.NewKey()
				req := driver.ClaimRequest{Key: key, PayloadHash: "ph", Owner: "a", Try: 0, Lease: time.Minute, MaxAttempts: 5}
				res, err := s.Claim(ctx, req)
				if err != nil || res.Decision != driver.DecisionFirst {
					t.Fatalf("first claim: %v %v", res.Decision, err)
				}
				if finish {
					if err := s.Complete(ctx, key, res.Record.Fence, driver.Completion{ResultRef: "ref", FinishLease: time.Minute}); err != nil {
						t.Fatal(err)
					}
					if r, err := s.ClaimFinish(ctx, driver.FinishRequest{Key: key, Owner: "a", Try: 0, Lease: time.Minute}); err != nil || r.Decision != driver.DecisionRepeatOther {
						t.Fatalf("a copy's finish claim: %v %v", r.Decision, err)
					}
				} else if r, err := s.Claim(ctx, req); err != nil || r.Decision != driver.DecisionRepeatOther {
					t.Fatalf("a copy's claim: %v %v", r.Decision, err)
				}
				exec(t, `UPDATE idempotency_record SET `+c.old+`, lease_until = NOW(3) - INTERVAL 1 SECOND WHERE request_id = ?`, key)
				before, err := s.Get(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if before.MarkOwner != "a" || before.MarkTry != 1 {
					t.Fatalf("the copy's mark: %q/%d, want a/1 kept apart from the lease", before.MarkOwner, before.MarkTry)
				}
				if finish {
					r, err := s.ClaimFinish(ctx, driver.FinishRequest{Key: key, Owner: "a", Try: 0, Lease: time.Minute})
					if err != nil || !r.Decision.Owned() {
						t.Fatalf("a late copy's finish claim past the lease: %v %v", r.Decision, err)
					}
				} else if r, err := s.Claim(ctx, req); err != nil || !r.Decision.Owned() {
					t.Fatalf("a late copy's claim past the lease: %v %v", r.Decision, err)
				}
				after, err := s.Get(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if want := c.want; after.LeaseTry != want {
					t.Fatalf("the lease starts at try %d after the takeover (record before it: lease %s/%d, mark %s/%d); want %d",
						after.LeaseTry, before.LeaseOwner, before.LeaseTry, before.MarkOwner, before.MarkTry, want)
				}
			})
		}
	}
}

// A mark the old code left in lease_try alone outlives a retryable failure
// (Fail keeps lease_owner and lease_try): the failed request's next lease
// starts at it.
func TestAMarkInTheLeaseAloneOutlivesAFailure(t *testing.T) {
	s := open(t)
	idemtest.RunMarkInTheLeaseAlone(t, s, func(t *testing.T, key string) {
		if _, err := s.DB().ExecContext(context.Background(), `UPDATE idempotency_record SET lease_try = 2
 WHERE request_id = ?`, key); err != nil {
			t.Fatal(err)
		}
	})
}

// The cost of the fast layer's bounded window (docs/design.md §7), counted
// by the session's own statement counters (the pool holds one connection):
// while a claimant's registration over the holder's live lease stands, a
// duplicate costs the store's refused INSERT and its read; once the
// holder's completion replaced the registration, none.
func TestARegistrationOverALiveHolderCostsTwoStatements(t *testing.T) {
	s, err := mysqlstore.Open(testenv.MySQLDSN(t), mysqlstore.Options{MaxOpenConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	h := redistest.Harness(t, s)
	e := h.NewEngine(t)
	statements := func() (n int64) {
		rows, err := s.DB().QueryContext(ctx, `SHOW SESSION STATUS WHERE Variable_name IN ('Com_insert', 'Com_select', 'Com_update')`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			var v int64
			if err := rows.Scan(&name, &v); err != nil {
				t.Fatal(err)
			}
			n += v
		}
		return n
	}
	key := idemtest.NewKey()
	claim := func(owner string) driver.ClaimResult {
		t.Helper()
		res, _, err := e.Claim(ctx, idempotency.ClaimRequest{Key: key, Owner: owner, PayloadHash: "ph", Try: 0})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first, lh, err := e.Claim(ctx, idempotency.ClaimRequest{Key: key, Owner: "h", PayloadHash: "ph"})
	if err != nil || lh == nil {
		t.Fatalf("h's claim: %v", err)
	}
	if err := h.Fast.Publish(ctx, first.Record, time.Millisecond); err != nil { // h's mirror, its renewals skipped
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	claim("c") // registers over the entry; the store answers h's live lease
	for _, d := range []string{"d1", "d2"} {
		before := statements()
		res := claim(d)
		if n := statements() - before; n != 2 || res.Source != "mysql" {
			t.Fatalf("%s in the window: %d statements, answered by %s; want 2 (the refused INSERT and the read), by mysql",
				d, n, res.Source)
		}
	}
	if err := lh.Complete(ctx, "ref"); err != nil {
		t.Fatal(err)
	}
	before := statements()
	if res := claim("e"); res.Source != "redis" {
		t.Fatalf("after h's completion: answered by %s, want redis", res.Source)
	}
	if n := statements() - before; n != 0 {
		t.Fatalf("after h's completion: %d statements, want none", n)
	}
}
