package proc

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
)

// Without the provider library StartGalera says so, wrapping ErrNoGalera
// (testenv turns it into a skip, or a failure under CI=true), before it
// starts anything.
func TestStartGaleraWithoutTheProvider(t *testing.T) {
	if _, _, err := mariadbBinaries(); err != nil {
		t.Skip("no MariaDB binaries: the provider is looked for after them")
	}
	t.Setenv("IDEMGATE_TEST_GALERA", filepath.Join(t.TempDir(), "libgalera_smm.so"))
	g, err := StartGalera(context.Background(), t.TempDir(), 3, GaleraOptions{})
	if !errors.Is(err, ErrNoGalera) || g != nil {
		t.Fatalf("StartGalera without a provider: %v, %v; want ErrNoGalera", g, err)
	}
}

// A node's flags keep everything on loopback and in its own directories.
func TestGaleraNodeArgsStayOnLoopback(t *testing.T) {
	nd, err := newGaleraNode(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	args := nd.args("/p.so", "gcomm://127.0.0.1:1,127.0.0.1:2", GaleraOptions{})
	for _, want := range []string{"--bind-address=127.0.0.1", "--tmpdir=" + nd.tmp, "--datadir=" + nd.data,
		"--wsrep-retry-autocommit=0", "--binlog-format=ROW", "--innodb-autoinc-lock-mode=2"} {
		if !slices.Contains(args, want) {
			t.Errorf("no %s in %q", want, args)
		}
	}
}
