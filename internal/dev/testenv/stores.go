package testenv

import (
	"context"
	"testing"

	"github.com/idemgate/idemgate/idempotency/mysqlstore"
)

// FreshMySQLStore opens a migrated store on a database of the test's own
// (FreshMySQLDSN), closed at the end of the test.
func FreshMySQLStore(t testing.TB) *mysqlstore.Store {
	t.Helper()
	s, err := mysqlstore.Open(FreshMySQLDSN(t), mysqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return s
}
