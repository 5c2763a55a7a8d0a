package proc

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// startServer starts a private server for t (skipped without the binaries,
// failed under CI=true), killed when t ends.
func startServer(t *testing.T, o ServerOptions) *MariaDB {
	t.Helper()
	m, err := StartMariaDBWith(context.Background(), t.TempDir(), MariaDBOptions{ServerOptions: o})
	if errors.Is(err, ErrNoMariaDB) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Kill)
	return m
}

// A replica has what its primary committed, and once promoted (after the
// primary was killed) it takes writes.
func TestReplicaPromotedAfterPrimaryKilled(t *testing.T) {
	for _, semi := range []bool{false, true} {
		name := map[bool]string{false: "async", true: "semisync"}[semi]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			primary := startServer(t, ServerOptions{ServerID: 1, SemiSyncPrimary: semi})
			replica := startServer(t, ServerOptions{ServerID: 2, SemiSyncReplica: semi})
			if err := replica.Replicate(ctx, primary.Addr); err != nil {
				t.Fatal(err)
			}
			if err := primary.Exec(ctx, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY)", "INSERT INTO d.t VALUES (1)"); err != nil {
				t.Fatal(err)
			}
			if semi {
				if st, err := primary.Variable(ctx, "SHOW STATUS LIKE 'Rpl_semi_sync_master_yes_tx'"); err != nil || st == "0" {
					t.Fatalf("semi-sync commits: %q %v", st, err)
				}
			}
			if !semi { // asynchronous: nothing says the replica has it yet
				for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					if pos, _ := replica.Variable(ctx, "SELECT @@gtid_slave_pos"); pos == "0-1-3" {
						break
					}
					if time.Now().After(end) {
						t.Fatal("the replica did not catch up")
					}
				}
			}
			primary.Kill()
			pos, err := replica.Promote(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Three transactions (two DDL, an insert), all received.
			if n, err := primary.BinlogGTIDs(ctx); err != nil || n != 3 || pos != "0-1-3" {
				t.Fatalf("the killed primary's binary log holds %d transactions (%v); the promoted replica is at %s", n, err, pos)
			}
			if err := replica.Exec(ctx, "INSERT INTO d.t VALUES (2)"); err != nil {
				t.Fatal(err)
			}
			if n, err := replica.Variable(ctx, "SELECT COUNT(*) FROM d.t"); err != nil || n != "2" {
				t.Fatalf("rows on the promoted replica: %q %v", n, err)
			}
		})
	}
}
