package mysqlstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/idemtest"
	"github.com/idemgate/idemgate/idempotency/mysqlstore"
)

// Migrations run concurrently from several instances and again later apply
// each file exactly once and leave the tables the contract names.
func TestMigrateIdempotentAndConcurrent(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := s.Migrate(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	applied, err := s.Migrate(ctx)
	if err != nil || len(applied) != 0 {
		t.Fatalf("second migrate applied %v, %v", applied, err)
	}
	var n int
	if err := s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE()
 AND table_name = 'idempotency_record' AND index_name = 'uniq_request_id' AND non_unique = 0`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("uniq_request_id: %d %v", n, err)
	}
	for _, table := range []string{"idempotency_record", "idempotency_replay"} {
		if err := s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()
 AND table_name = ?`, table).Scan(&n); err != nil || n != 1 {
			t.Fatalf("%s missing", table)
		}
	}
}

// A raw duplicate insert surfaces as the package's own sentinel.
func TestDuplicateKeyIsSentinel(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	k := idemtest.NewKey()
	ins := `INSERT INTO idempotency_record (request_id, status) VALUES (?, 'RUNNING')`
	if _, err := s.DB().ExecContext(ctx, ins, k); err != nil {
		t.Fatal(err)
	}
	_, err := s.DB().ExecContext(ctx, ins, k)
	if !errors.Is(mysqlstore.MapErr(err), mysqlstore.ErrDuplicateKey) {
		t.Fatalf("1062 mapped to %v", mysqlstore.MapErr(err))
	}
}

// Renewing twice within one millisecond still counts as holding the lease
// (clientFoundRows): a no-op UPDATE must not look like a lost lease.
func TestRenewSameValueIsNotLeaseLost(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	k := idemtest.NewKey()
	res, err := s.Claim(ctx, idempotency.ClaimRequest{Key: k, Owner: "a", Lease: time.Minute, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if err := s.Renew(ctx, k, res.Record.Fence, time.Minute); err != nil {
			t.Fatalf("renew: %v", err)
		}
	}
}

// A store whose database is unreachable answers ErrStoreUnavailable through
// the engine: nothing runs.
func TestUnreachableDatabase(t *testing.T) {
	s, err := mysqlstore.Open("root@tcp(127.0.0.1:1)/x?timeout=200ms", mysqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e := idempotency.New(s)
	ran := false
	_, err = e.Do(context.Background(), idempotency.ClaimRequest{Key: idemtest.NewKey(), Owner: "a"},
		func(context.Context, *idempotency.Lease) (string, error) { ran = true; return "", nil })
	if !errors.Is(err, idempotency.ErrStoreUnavailable) || ran {
		t.Fatalf("err %v ran %v", err, ran)
	}
	if class, _ := idempotency.Classify(err); class != idempotency.ClassRetryable {
		t.Fatalf("class %s", class)
	}
}
