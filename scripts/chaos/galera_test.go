package main

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/dev/proc"
	"github.com/idemgate/idemgate/internal/dev/testenv"
	"github.com/idemgate/idemgate/internal/statsrec"
)

// The Galera drill (docs/operations.md): a short chaos run, MySQL alone,
// against a private three-node MariaDB Galera cluster, each instance
// writing to its own node (certification conflicts reach the store as 1213
// at COMMIT: the nodes do not retry them, wsrep_retry_autocommit=0), with
// instances killed and paused, and one database node SIGKILLed mid-run.
// The same invariants as TestChaosShort: every answered delivery ends done
// or dead-lettered, one effective result per key, model calls within the
// recorded attempts; and a delivery the dead node failed is answered
// retryable, never lost.
func TestChaosGalera(t *testing.T) {
	if testing.Short() {
		t.Skip("a 40 s run of a database cluster and real processes")
	}
	const db = "idemgate_chaos"
	g := testenv.Galera(t, 3, db, proc.GaleraOptions{})
	ctx := context.Background()
	conflicts := func(node int) int64 { // certification failures and brute-force aborts on node
		return g.Status(ctx, "wsrep_local_cert_failures")[node] + g.Status(ctx, "wsrep_local_bf_aborts")[node]
	}
	var killed int64
	o := DefaultOptions()
	o.MySQLDSN, o.Nodes, o.RedisURL = g.Nodes[0].DSN(db), g.DSNs(""), ""
	o.Instances, o.Keys, o.Duration = 3, 30, 15*time.Second
	o.KillEvery, o.PauseEvery, o.Faults = 3*time.Second, 5*time.Second, 1
	// Node 2: the sweeper and the checks read through node 0.
	o.NodeKill = &NodeKill{At: 6 * time.Second, Node: 2, Kill: func() { killed = conflicts(2); g.KillNode(2) }}
	rep := runChecked(t, o, 2*time.Minute)
	switch {
	case rep.NodeKills != 1:
		t.Errorf("database nodes killed %d, want 1", rep.NodeKills)
	case rep.Duplicates == 0 || rep.Succeeded == 0 || rep.ModelCalls == 0:
		t.Errorf("nothing ran: duplicates %d, succeeded %d, model calls %d", rep.Duplicates, rep.Succeeded, rep.ModelCalls)
	case rep.Succeeded+rep.FailedFinal+rep.NoRecord+rep.DeadCarried != rep.Keys:
		t.Errorf("final states %d + %d + %d + %d do not add up to %d keys", rep.Succeeded, rep.FailedFinal, rep.NoRecord,
			rep.DeadCarried, rep.Keys)
	}
	for kind := range rep.Failures {
		if kind == "unknown" || kind == "internal" {
			t.Errorf("failed invocations answered %q: %v", kind, rep.Failures)
		}
	}
	t.Logf("Galera drill: certification conflicts (cert failures + brute-force aborts) node 0 %d, node 1 %d, node 2 %d (at its kill); "+
		"aborted writes the instances ran again %d (their flushed counters); model calls %d for %d keys, %d attempts, "+
		"executions %d, failed invocations %v",
		conflicts(0), conflicts(1), killed, retried(t, g.Nodes[0].DSN(db)), rep.ModelCalls, rep.Keys, rep.Attempts,
		rep.Executions, rep.Failures)
}

// retried is what the instances counted as store_abort_retried
// (internal/statsrec) in the run's database: what they flushed, so a lower
// bound (a killed instance loses its last ten seconds).
func retried(t *testing.T, dsn string) int64 {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	if err := db.QueryRow(`SELECT COALESCE(SUM(count), 0) FROM idempotency_stats WHERE name = ?`,
		statsrec.StatStoreAbortRetried).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
