package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// A private server must not touch the temporary files of the shared one:
// mariadbd deletes every #sql* file in its tmpdir at start, and under the
// default /tmp that removed a running test's temporary table (a CI failure:
// "Error on delete of '/tmp/#sql-temptable-…'").
func TestPrivateMariaDBLeavesTheSharedTmpdirAlone(t *testing.T) {
	f, err := os.CreateTemp("", "#sql-idemgate-probe-*.MAI")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Cleanup(func() { os.Remove(f.Name()) })
	PrivateMariaDB(t)
	if _, err := os.Stat(f.Name()); err != nil {
		t.Fatalf("starting a private MariaDB removed %s from the shared tmpdir: %v", filepath.Base(f.Name()), err)
	}
}
