package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// A short chaos run against the real MariaDB and Redis: three instances,
// 25 keys, about 15 s of duplicates, kills, pauses and a fault-armed start,
// and not one invariant violated.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("a 30 s run of real processes")
	}
	o := DefaultOptions()
	// testenv fails (CI=true) or skips when a service is missing.
	o.MySQLDSN, o.RedisURL, o.RedisKeyPrefix = testenv.FreshMySQLDSN(t), testenv.RedisURL(t), testenv.RedisPrefix(t)
	o.Instances, o.Keys, o.Duration = 3, 25, 15*time.Second
	o.KillEvery, o.PauseEvery = 2*time.Second, 3*time.Second
	rep := runChecked(t, o, 2*time.Minute)
	// The run must have been a chaos run at all.
	switch {
	case rep.Kills == 0 || rep.Pauses == 0 || rep.FaultStarts == 0:
		t.Errorf("no chaos: kills %d, pauses %d, fault starts %d", rep.Kills, rep.Pauses, rep.FaultStarts)
	case rep.Duplicates == 0 || rep.Succeeded == 0 || rep.ModelCalls == 0:
		t.Errorf("nothing ran: duplicates %d, succeeded %d, model calls %d", rep.Duplicates, rep.Succeeded, rep.ModelCalls)
	case rep.Succeeded+rep.FailedFinal+rep.NoRecord+rep.DeadCarried != rep.Keys:
		t.Errorf("final states %d + %d + %d + %d do not add up to %d keys", rep.Succeeded, rep.FailedFinal, rep.NoRecord,
			rep.DeadCarried, rep.Keys)
	}
}

// testLog sends Run's progress lines to the test log; Run returns only
// after its goroutines ended, so nothing logs after the test.
type testLog struct {
	t  *testing.T
	mu sync.Mutex
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// runChecked runs o within limit, its work directory and progress lines
// the test's, prints the report to the test log and fails the test on
// every violation.
func runChecked(t *testing.T, o Options, limit time.Duration) Report {
	t.Helper()
	o.WorkDir = t.TempDir()
	o.Log = &testLog{t: t}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	rep, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.Print(&b, true)
	t.Log("\n" + b.String())
	for _, v := range rep.Violations {
		t.Error(v)
	}
	return rep
}
