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
	dsn := FreshMySQLDSN(t)
	MigrateMySQL(t, dsn)
	s, err := mysqlstore.Open(dsn, mysqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// MigrateMySQL applies the store's migrations to the database dsn names.
func MigrateMySQL(t testing.TB, dsn string) {
	t.Helper()
	s, err := mysqlstore.Open(dsn, mysqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
}
