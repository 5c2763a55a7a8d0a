package mysqlstore_test

import (
	"context"
	"testing"

	"github.com/idemgate/idemgate/idempotency/mysqlstore"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// Migration 008 (retry_after) runs again safely when its version was not
// recorded — with the column there (a run that failed after the ALTER)
// and without it — and leaves the column once.
func TestMigration008ReRuns(t *testing.T) {
	s, err := mysqlstore.Open(testenv.FreshMySQLDSN(t), mysqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	columns := func() int {
		var n int
		if err := s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
 AND table_name = 'idempotency_record' AND column_name = 'retry_after'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		name string
		drop bool
	}{{"the column is there", false}, {"the column is gone", true}} {
		t.Run(c.name, func(t *testing.T) {
			if c.drop {
				if _, err := s.DB().ExecContext(ctx, `ALTER TABLE idempotency_record DROP COLUMN retry_after`); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.DB().ExecContext(ctx, `DELETE FROM idempotency_schema_migrations WHERE version = '008_retry_after'`); err != nil {
				t.Fatal(err)
			}
			applied, err := s.Migrate(ctx)
			if err != nil || len(applied) != 1 || applied[0] != "008_retry_after" {
				t.Fatalf("re-run applied %v, %v", applied, err)
			}
			if n := columns(); n != 1 {
				t.Fatalf("%d retry_after columns", n)
			}
		})
	}
}
