package mysqlstore_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	idem "github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/idemtest"
	"github.com/idemgate/idemgate/idempotency/mysqlstore"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// aborter is a connector that makes chosen statements fail as a Galera
// node fails a write that lost certification: error 1213 and nothing
// written. A statement containing a marker fails while the marker has
// failures left; the marker "COMMIT" fails a transaction's commit, after
// rolling it back. err, when set, is the failure instead of 1213.
type aborter struct {
	driver.Connector
	mu   sync.Mutex
	left map[string]int
	err  error
	// commit, when set, runs the next COMMIT once (given the real one).
	commit func(do func() error) error
}

var errCertification = &mysql.MySQLError{Number: 1213, SQLState: [5]byte{'4', '0', '0', '0', '1'},
	Message: "Deadlock found when trying to get lock; try restarting transaction"}

// errLockWait is InnoDB's lock wait timeout, which rolls back the statement
// only (innodb_rollback_on_timeout=OFF); the aborter's statement did nothing.
var errLockWait = &mysql.MySQLError{Number: 1205, SQLState: [5]byte{'H', 'Y', '0', '0', '0'},
	Message: "Lock wait timeout exceeded; try restarting transaction"}

func (a *aborter) fail(q string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for m, n := range a.left {
		if n > 0 && strings.Contains(q, m) {
			a.left[m] = n - 1
			return true
		}
	}
	return false
}

func (a *aborter) failure() error {
	if a.err != nil {
		return a.err
	}
	return errCertification
}

// hook takes the commit hook, once.
func (a *aborter) hook() func(do func() error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	h := a.commit
	a.commit = nil
	return h
}

func (a *aborter) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := a.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &abortConn{Conn: c, a: a}, nil
}

// abortConn forwards to the driver's connection (which implements every
// interface below; the store interpolates its parameters, so statements
// arrive whole).
type abortConn struct {
	driver.Conn
	a *aborter
}

func (c *abortConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	if c.a.fail(q) {
		return nil, c.a.failure()
	}
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c *abortConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c *abortConn) BeginTx(ctx context.Context, o driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, o)
	if err != nil {
		return nil, err
	}
	return &abortTx{Tx: tx, a: c.a}, nil
}

func (c *abortConn) CheckNamedValue(v *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(v)
}

func (c *abortConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c *abortConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }

type abortTx struct {
	driver.Tx
	a *aborter
}

func (t *abortTx) Commit() error {
	if h := t.a.hook(); h != nil {
		return h(t.Tx.Commit)
	}
	if t.a.fail("COMMIT") {
		_ = t.Tx.Rollback()
		return t.a.failure()
	}
	return t.Tx.Commit()
}

// abortingStore is a store on dsn whose statements abort as a fails them.
func abortingStore(t *testing.T, dsn string, a *aborter) *mysqlstore.Store {
	t.Helper()
	a.Connector = connector(t, dsn)
	return storeOn(t, a)
}

// Every write of the store that a Galera node can fail at certification
// (error 1213, at the statement or at COMMIT) is run again, on the rows as
// they are then, and counted, as is a lock wait (1205); five aborts in a
// row are an error, and the record is as it was; a lost connection is
// returned after one try. Each case prepares its record through a plain
// store, then runs one operation through a store whose marked statement
// aborts.
func TestCertificationConflictsAreRetried(t *testing.T) {
	dsn := testenv.FreshMySQLDSN(t)
	testenv.MigrateMySQL(t, dsn)
	plain, err := mysqlstore.Open(dsn, mysqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() })
	ctx := context.Background()
	claimed := func(t *testing.T, lease time.Duration) (string, int64) {
		k := idemtest.NewKey()
		res, err := plain.Claim(ctx, idem.ClaimRequest{Key: k, Owner: "first", PayloadHash: "ph", Lease: lease, Try: 0})
		if err != nil || res.Decision != idem.DecisionFirst {
			t.Fatalf("claim: %+v %v", res, err)
		}
		return k, res.Record.Fence
	}
	pending := func(t *testing.T, lease time.Duration) (string, int64) {
		k, f := claimed(t, time.Minute)
		if err := plain.Complete(ctx, k, f, idem.Completion{ResultRef: "ref", FinishLease: lease}); err != nil {
			t.Fatal(err)
		}
		return k, f
	}
	failed := func(t *testing.T) (string, int64) { // FAILED_FINAL: an operator may reset or forget it
		k, f := claimed(t, time.Minute)
		if err := plain.Fail(ctx, k, f, idem.Failure{Final: true, Code: "c"}); err != nil {
			t.Fatal(err)
		}
		return k, f
	}
	complete := func(t *testing.T, s *mysqlstore.Store) (string, error) {
		k, f := claimed(t, time.Minute)
		return k, s.Complete(ctx, k, f, idem.Completion{ResultRef: "ref"})
	}
	completed := func(t *testing.T, r idem.Record) {
		if r.Status != idem.StatusSucceeded || r.ResultRef != "ref" {
			t.Errorf("record %s %q", r.Status, r.ResultRef)
		}
	}
	expired := 20 * time.Millisecond // a lease that has run out by the time the case acts
	cases := []struct {
		name   string
		marker string // the statement that aborts
		run    func(t *testing.T, s *mysqlstore.Store) (key string, err error)
		want   func(t *testing.T, r idem.Record) // nil: run checked what it wrote, key is ""
		err    error                             // the abort (nil: a certification conflict)
	}{
		{"a claim's insert", "INSERT INTO idempotency_record", func(t *testing.T, s *mysqlstore.Store) (string, error) {
			k := idemtest.NewKey()
			res, err := s.Claim(ctx, idem.ClaimRequest{Key: k, Owner: "o", PayloadHash: "ph", Lease: time.Minute})
			if err == nil && res.Decision != idem.DecisionFirst {
				t.Errorf("decision %s", res.Decision)
			}
			return k, err
		}, func(t *testing.T, r idem.Record) {
			if r.Status != idem.StatusRunning || r.Fence != 1 || r.LeaseOwner != "o" {
				t.Errorf("record %s fence %d owner %s", r.Status, r.Fence, r.LeaseOwner)
			}
		}, nil},
		{"a takeover's commit", "COMMIT", func(t *testing.T, s *mysqlstore.Store) (string, error) {
			k, _ := claimed(t, time.Millisecond)
			time.Sleep(expired)
			res, err := s.Claim(ctx, idem.ClaimRequest{Key: k, Owner: "second", PayloadHash: "ph", Lease: time.Minute})
			if err == nil && (res.Decision != idem.DecisionTakeover || res.Record.Fence != 2) {
				t.Errorf("decision %s fence %d", res.Decision, res.Record.Fence)
			}
			return k, err
		}, func(t *testing.T, r idem.Record) {
			if r.Fence != 2 || r.LeaseOwner != "second" {
				t.Errorf("record fence %d owner %s", r.Fence, r.LeaseOwner)
			}
		}, nil},
		{"a completion", "result_ref = ?", complete, completed, nil},
		{"a finish", "finish = 'DONE', lease_until = NULL, updated_at = NOW(3)\n WHERE request_id = ? AND status",
			func(t *testing.T, s *mysqlstore.Store) (string, error) {
				k, f := pending(t, time.Minute)
				return k, s.Finish(ctx, k, "first", 0, f, nil)
			}, func(t *testing.T, r idem.Record) {
				if r.Finish != idem.FinishDone {
					t.Errorf("finish %q", r.Finish)
				}
			}, nil},
		{"a finish claim", "LAST_INSERT_ID", func(t *testing.T, s *mysqlstore.Store) (string, error) {
			k, f := pending(t, time.Millisecond)
			time.Sleep(expired)
			res, err := s.ClaimFinish(ctx, idem.FinishRequest{Key: k, Owner: "finisher", Lease: time.Minute})
			if err == nil && (res.Decision != idem.DecisionTakeover || res.Record.Fence != f+1) {
				t.Errorf("decision %s fence %d", res.Decision, res.Record.Fence)
			}
			return k, err
		}, func(t *testing.T, r idem.Record) {
			if r.LeaseOwner != "finisher" || r.Fence != 2 {
				t.Errorf("owner %s fence %d", r.LeaseOwner, r.Fence)
			}
		}, nil},
		{"finishes marked done", "request_id IN (", func(t *testing.T, s *mysqlstore.Store) (string, error) {
			k, _ := pending(t, time.Minute)
			return k, s.MarkFinished(ctx, []string{k})
		}, func(t *testing.T, r idem.Record) {
			if r.Finish != idem.FinishDone {
				t.Errorf("finish %q", r.Finish)
			}
		}, nil},
		{"an operator's reset", "COMMIT", func(t *testing.T, s *mysqlstore.Store) (string, error) {
			k, _ := failed(t)
			_, _, err := s.Reset(ctx, k, idem.Replay{Reason: "r", Operator: "o", Source: "key"})
			return k, err
		}, func(t *testing.T, r idem.Record) {
			if r.Status != idem.StatusReceived {
				t.Errorf("record %s", r.Status)
			}
		}, nil},
		// The audit row's insert aborts after the record's update: the whole
		// transaction runs again (txRetry), so the fence moves once and one
		// audit row is written.
		{"an operator's forget", "INSERT INTO idempotency_replay", func(t *testing.T, s *mysqlstore.Store) (string, error) {
			k, f := failed(t)
			_, after, err := s.Forget(ctx, k, idem.Replay{Reason: "r", Operator: "o", Source: "key"})
			if err == nil && after.Fence != f+1 {
				t.Errorf("forget answered fence %d, want %d", after.Fence, f+1)
			}
			if rps, err := plain.Replays(ctx, k); err != nil || len(rps) != 1 {
				t.Errorf("audit rows %d %v, want 1", len(rps), err)
			}
			return k, err
		}, func(t *testing.T, r idem.Record) {
			if r.Status != idem.StatusReceived || r.Fence != 2 {
				t.Errorf("record %s fence %d", r.Status, r.Fence)
			}
		}, nil},
		{"the sweeper's deferral", "SET sweep_after = NOW(3) + INTERVAL", func(t *testing.T, s *mysqlstore.Store) (string, error) {
			k, _ := claimed(t, time.Minute)
			rec, err := plain.Get(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			return k, s.Defer(ctx, rec, time.Minute)
		}, func(t *testing.T, r idem.Record) {
			if r.SweepAfter.IsZero() {
				t.Errorf("not deferred")
			}
		}, nil},
		{"a copy's try marked on a live finish", "SET lease_try = GREATEST", func(t *testing.T, s *mysqlstore.Store) (string, error) {
			k, _ := pending(t, time.Minute)
			_, err := s.ClaimFinish(ctx, idem.FinishRequest{Key: k, Owner: "first", Try: 0, Lease: time.Minute})
			return k, err
		}, func(t *testing.T, r idem.Record) {
			if r.LeaseTry != 1 || r.Fence != 1 || r.LeaseOwner != "first" {
				t.Errorf("lease try %d fence %d owner %s, want 1, 1, first", r.LeaseTry, r.Fence, r.LeaseOwner)
			}
		}, nil},
		{"stats", "INSERT INTO idempotency_stats", func(t *testing.T, s *mysqlstore.Store) (string, error) {
			minute := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
			if err := s.AddStats(ctx, []idem.StatRow{{Minute: minute, Name: "cert", Count: 3}}); err != nil {
				return "", err
			}
			if rows, err := plain.Stats(ctx, minute); err != nil || len(rows) != 1 || rows[0].Count != 3 {
				t.Errorf("stats %+v %v, want one row of 3", rows, err)
			}
			return "", nil
		}, nil, nil},
		{"a lock wait on a completion", "result_ref = ?", complete, completed, errLockWait},
		{"the purge of an orphan audit row", "DELETE FROM idempotency_replay WHERE id IN", func(t *testing.T, s *mysqlstore.Store) (string, error) {
			k := idemtest.NewKey() // an audit row past its retention, of a key with no record
			if _, err := plain.DB().ExecContext(ctx, `INSERT INTO idempotency_replay (request_id, reason, operator,
 prior_status, source, created_at) VALUES (?, 'r', 'o', 'FAILED_FINAL', 'key', NOW(3) - INTERVAL 40 DAY)`, k); err != nil {
				t.Fatal(err)
			}
			rep, err := s.Purge(ctx, idem.PurgeRequest{OlderThan: 30 * 24 * time.Hour})
			if rps, rerr := plain.Replays(ctx, k); err == nil && (rep.Replays != 1 || len(rps) != 0 || rerr != nil) {
				t.Errorf("purged %d audit rows, %d left %v; want 1 and none", rep.Replays, len(rps), rerr)
			}
			return "", err
		}, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := &aborter{left: map[string]int{c.marker: 1}, err: c.err}
			s := abortingStore(t, dsn, a)
			key, err := c.run(t, s)
			if err != nil {
				t.Fatalf("one abort (%v): %v", a.failure(), err)
			}
			if a.left[c.marker] != 0 || s.AbortsRetried() != 1 {
				t.Fatalf("aborts injected %d, retried %d, want 1 and 1", 1-a.left[c.marker], s.AbortsRetried())
			}
			if c.want == nil {
				return
			}
			rec, err := plain.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			c.want(t, rec)
		})
	}
	// A lost connection is not an abort: its statement or COMMIT may have
	// landed, so it is returned after one try and never run again (the
	// caller reads the record again).
	for _, c := range []struct{ name, marker string }{{"a completion", "result_ref = ?"}, {"a takeover's commit", "COMMIT"}} {
		t.Run("a lost connection on "+c.name+" is returned", func(t *testing.T) {
			a := &aborter{left: map[string]int{c.marker: 5}, err: mysql.ErrInvalidConn}
			s := abortingStore(t, dsn, a)
			k, f := claimed(t, time.Millisecond)
			var err error
			if c.marker == "COMMIT" {
				time.Sleep(expired)
				_, err = s.Claim(ctx, idem.ClaimRequest{Key: k, Owner: "second", PayloadHash: "ph", Lease: time.Minute})
			} else {
				err = s.Complete(ctx, k, f, idem.Completion{ResultRef: "ref"})
			}
			if !errors.Is(err, mysql.ErrInvalidConn) || a.left[c.marker] != 4 || s.AbortsRetried() != 0 {
				t.Fatalf("%v; tries %d, retried %d; want ErrInvalidConn after one try", err, 5-a.left[c.marker], s.AbortsRetried())
			}
			if rec, err := plain.Get(ctx, k); err != nil || rec.Status != idem.StatusRunning || rec.Fence != f || rec.LeaseOwner != "first" {
				t.Fatalf("record %s fence %d owner %s %v", rec.Status, rec.Fence, rec.LeaseOwner, err)
			}
		})
	}
	t.Run("five in a row are an error and change nothing", func(t *testing.T) {
		a := &aborter{left: map[string]int{"result_ref = ?": 5}}
		s := abortingStore(t, dsn, a)
		k, f := claimed(t, time.Minute)
		err := s.Complete(ctx, k, f, idem.Completion{ResultRef: "ref"})
		if err == nil || !strings.Contains(err.Error(), "1213") || a.left["result_ref = ?"] != 0 || s.AbortsRetried() != 4 {
			t.Fatalf("complete: %v; aborts left %d, retried %d", err, a.left["result_ref = ?"], s.AbortsRetried())
		}
		if rec, err := plain.Get(ctx, k); err != nil || rec.Status != idem.StatusRunning || rec.Fence != f {
			t.Fatalf("record %s fence %d %v", rec.Status, rec.Fence, err)
		}
	})
}
