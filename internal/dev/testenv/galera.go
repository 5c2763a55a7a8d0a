package testenv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/dev/proc"
)

// Galera starts a private n-node MariaDB Galera cluster (proc.StartGalera in
// a temporary directory; every node killed when the test ends, also after a
// failure) with database db created on it. Without mariadbd or the Galera
// provider the test skips, and fails under CI=true (.ci/run installs
// galera-4 when it is missing).
func Galera(t testing.TB, n int, db string, o proc.GaleraOptions) *proc.Galera {
	t.Helper()
	began := time.Now()
	g, err := proc.StartGalera(context.Background(), t.TempDir(), n, o)
	if errors.Is(err, proc.ErrNoMariaDB) || errors.Is(err, proc.ErrNoGalera) {
		unavailable(t, "a private Galera cluster", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Kill)
	t.Logf("Galera: %d nodes Synced in %s", n, time.Since(began).Round(100*time.Millisecond))
	if err := proc.EnsureDatabase(context.Background(), g.Nodes[0].DSN(db)); err != nil {
		t.Fatal(err)
	}
	return g
}
