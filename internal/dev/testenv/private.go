package testenv

import (
	"context"
	"errors"
	"testing"

	"github.com/idemgate/idemgate/internal/dev/proc"
)

// PrivateMariaDB starts a MariaDB server of the test's own (proc.StartMariaDB
// in a temporary directory, stopped when the test ends) and returns the DSN
// of an empty database on it. It is for tests that read the server's GLOBAL
// counters (SHOW GLOBAL STATUS), which every client of the shared server
// moves, a database of its own notwithstanding. Without the binaries the
// test skips, and fails under CI=true.
func PrivateMariaDB(t testing.TB) string {
	t.Helper()
	m, err := proc.StartMariaDB(context.Background(), t.TempDir())
	if errors.Is(err, proc.ErrNoMariaDB) {
		unavailable(t, "a private MariaDB server", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	dsn := m.DSN("idemgate_private")
	if err := proc.EnsureDatabase(context.Background(), dsn); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// PrivateRedis starts a redis-server of the test's own (proc.StartRedis in a
// temporary directory, killed when the test ends), a replica of replicaOf
// (host:port) when it is set: for tests that fail a server over. Without the
// binary the test skips, and fails under CI=true.
func PrivateRedis(t testing.TB, replicaOf string) *proc.Redis {
	t.Helper()
	r, err := proc.StartRedis(context.Background(), t.TempDir(), replicaOf)
	if errors.Is(err, proc.ErrNoRedis) {
		unavailable(t, "a private Redis server", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Kill)
	return r
}
