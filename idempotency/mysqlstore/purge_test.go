package mysqlstore_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/idemtest"
	"github.com/idemgate/idemgate/idempotency/mysqlstore"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// seeded is one kind of record seedRecords writes.
type seeded struct {
	status, finish string
	ageDays        int
	steps          int  // old step records under it
	audit          bool // one old audit row
}

// seedRecords inserts n records of kind k in one statement per 200 and
// returns their keys; their times are backdated by k.ageDays.
func seedRecords(t *testing.T, db *sql.DB, n int, k seeded) []string {
	t.Helper()
	var out []string
	for start := 0; start < n; start += 200 {
		var recs, steps, audits []string
		for range min(200, n-start) {
			key := idemtest.NewKey()
			out = append(out, key)
			at := fmt.Sprintf("NOW(3) - INTERVAL %d DAY", k.ageDays)
			lease := "NULL"
			if k.status == "RUNNING" || k.finish == "PENDING" {
				lease = at // expired long ago
			}
			recs = append(recs, fmt.Sprintf("('%s', '', '', '%s', '%s', 1, 1, 'ph', %s, %s, %s)", key, k.status, k.finish, lease, at, at))
			for i := range k.steps {
				op := fmt.Sprintf("s%d", i)
				steps = append(steps, fmt.Sprintf("('%s', '%s', '%s', 'SUCCEEDED', '', 1, 1, '', NULL, %s, %s)",
					legacyStepKey(key, op), key, op, at, at))
			}
			if k.audit {
				audits = append(audits, fmt.Sprintf("('%s', 'seed', 'op', 'FAILED_FINAL', 'key', %s)", key, at))
			}
		}
		const cols = `INSERT INTO idempotency_record (request_id, parent_key, op, status, finish, attempt, fence,
 payload_hash, lease_until, created_at, updated_at) VALUES `
		for _, q := range []string{cols + strings.Join(recs, ", "), cols + strings.Join(steps, ", "),
			`INSERT INTO idempotency_replay (request_id, reason, operator, prior_status, source, created_at) VALUES ` +
				strings.Join(audits, ", ")} {
			if strings.HasSuffix(q, "VALUES ") {
				continue
			}
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// TestPurgeStatementsUseTheirIndexes explains every statement of the purge
// on a table of a few thousand rows and checks that each table is read by
// the index named for it (purge.go), never by a scan.
func TestPurgeStatementsUseTheirIndexes(t *testing.T) {
	s := testenv.FreshMySQLStore(t)
	db := s.DB()
	old := seedRecords(t, db, 1500, seeded{status: "SUCCEEDED", ageDays: 40, steps: 2, audit: true})
	seedRecords(t, db, 1500, seeded{status: "SUCCEEDED", finish: "DONE", ageDays: 1, steps: 1})
	seedRecords(t, db, 300, seeded{status: "FAILED_FINAL", ageDays: 40, audit: true})
	seedRecords(t, db, 300, seeded{status: "RUNNING", ageDays: 0, steps: 1})
	seedRecords(t, db, 300, seeded{status: "TOMB_SUCCEEDED", ageDays: 40})
	if _, err := db.Exec(`INSERT INTO idempotency_stats (minute, name, count)
 SELECT DATE_SUB(UTC_TIMESTAMP(), INTERVAL seq MINUTE) - INTERVAL SECOND(UTC_TIMESTAMP()) SECOND, 'first', 1
 FROM (SELECT a.n * 100 + b.n * 10 + c.n AS seq FROM
 (SELECT 0 n UNION SELECT 1 UNION SELECT 2 UNION SELECT 3 UNION SELECT 4 UNION SELECT 5 UNION SELECT 6 UNION SELECT 7 UNION SELECT 8 UNION SELECT 9) a,
 (SELECT 0 n UNION SELECT 1 UNION SELECT 2 UNION SELECT 3 UNION SELECT 4 UNION SELECT 5 UNION SELECT 6 UNION SELECT 7 UNION SELECT 8 UNION SELECT 9) b,
 (SELECT 0 n UNION SELECT 1 UNION SELECT 2 UNION SELECT 3 UNION SELECT 4 UNION SELECT 5 UNION SELECT 6 UNION SELECT 7 UNION SELECT 8 UNION SELECT 9) c) seqs`); err != nil {
		t.Fatal(err)
	}
	for _, tbl := range []string{"idempotency_record", "idempotency_replay", "idempotency_stats"} {
		if _, err := db.Exec("ANALYZE TABLE " + tbl); err != nil {
			t.Fatal(err)
		}
	}
	ids, keys := []any{}, []any{}
	for _, k := range old[:20] {
		var id uint64
		if err := db.QueryRow(`SELECT id FROM idempotency_record WHERE request_id = ?`, k).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids, keys = append(ids, id), append(keys, k)
	}
	for _, st := range mysqlstore.PurgeStatements(ids, keys) {
		t.Run(st.Name, func(t *testing.T) {
			plan := explain(t, db, st.SQL, st.Args)
			seen := map[string]bool{}
			for _, row := range plan {
				table := row["table"]
				if strings.HasPrefix(table, "<") { // a UNION's or subquery's result, not a table
					continue
				}
				want, ok := st.Index[table]
				if !ok {
					t.Errorf("reads table %q, which the statement's comment does not name: %v", table, row)
					continue
				}
				seen[table] = true
				if row["key"] != want || row["type"] == "ALL" || row["type"] == "index" {
					t.Errorf("table %s: key %q, type %q; want %s without a scan (%v)", table, row["key"], row["type"], want, row)
				}
			}
			for table := range st.Index {
				if !seen[table] {
					t.Errorf("the plan does not read %s: %v", table, plan)
				}
			}
		})
	}
}

// explain returns EXPLAIN's rows as column → value.
func explain(t *testing.T, db *sql.DB, q string, args []any) []map[string]string {
	t.Helper()
	rows, err := db.Query("EXPLAIN "+q, args...)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []map[string]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := map[string]string{}
		for i, c := range cols {
			row[strings.ToLower(c)] = vals[i].String
		}
		out = append(out, row)
	}
	return out
}

// TestPurgeBesideTrafficAndAnotherPurge runs two purges at once while
// duplicates of the purged keys arrive, replays reset some of them and new
// keys are claimed: every purgeable record is retired exactly once (the two
// purges' counts add up to what was due), a duplicate is never claimed FIRST (the
// tombstone answers it), a record a replay reset first stays,
// and so does every record
// that was never purgeable.
func TestPurgeBesideTrafficAndAnotherPurge(t *testing.T) {
	s := testenv.FreshMySQLStore(t)
	db := s.DB()
	const retention = 30 * 24 * time.Hour
	done := seedRecords(t, db, 400, seeded{status: "SUCCEEDED", finish: "DONE", ageDays: 40, steps: 2, audit: true})
	failed := seedRecords(t, db, 200, seeded{status: "FAILED_FINAL", ageDays: 40, steps: 1, audit: true})
	stepsOf := map[string]int64{}
	for _, k := range done {
		stepsOf[k] = 2
	}
	for _, k := range failed {
		stepsOf[k] = 1
	}
	var stay []string
	for _, k := range []seeded{{status: "RUNNING", ageDays: 40}, {status: "FAILED_RETRYABLE", ageDays: 40},
		{status: "RECEIVED", ageDays: 40}, {status: "SUCCEEDED", finish: "PENDING", ageDays: 40},
		{status: "SUCCEEDED", ageDays: 29}, {status: "FAILED_FINAL", ageDays: 0}} {
		stay = append(stay, seedRecords(t, db, 50, k)...)
	}
	youngStep := seedRecords(t, db, 20, seeded{status: "SUCCEEDED", ageDays: 40})
	for _, k := range youngStep {
		if _, err := db.Exec(`INSERT INTO idempotency_record (request_id, parent_key, op, status) VALUES (?, ?, 'late', 'SUCCEEDED')`,
			legacyStepKey(k, "late"), k); err != nil {
			t.Fatal(err)
		}
	}
	stay = append(stay, youngStep...)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	reports := make([]driver.PurgeReport, 2)
	var purgers, traffic sync.WaitGroup
	for i := range reports {
		purgers.Go(func() {
			for {
				rep, err := s.Purge(ctx, driver.PurgeRequest{OlderThan: retention, Limit: 25, TombstonesOlderThan: 2 * retention})
				if err != nil {
					fail(fmt.Errorf("purge %d: %w", i, err))
					return
				}
				reports[i].Add(rep)
				if !rep.More {
					return
				}
			}
		})
	}
	stop := make(chan struct{})
	var rescued sync.Map
	var n, slowest atomic.Int64
	claimReq := func(k, owner string) idempotency.ClaimRequest {
		return idempotency.ClaimRequest{Key: k, PayloadHash: "ph", Owner: owner, Try: -1, Lease: time.Minute, MaxAttempts: 3}
	}
	for g := range 4 {
		traffic.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n.Add(1)
				switch g {
				case 0, 1: // a duplicate of a purgeable key: answered, by its record or, once purged, its tombstone
					k := append(done, failed...)[(i*7+g*13)%(len(done)+len(failed))]
					res, err := s.Claim(ctx, claimReq(k, fmt.Sprintf("dup-%d-%d", g, i)))
					if err != nil {
						fail(fmt.Errorf("duplicate: %w", err))
						continue
					}
					if res.Decision == idempotency.DecisionFirst { // a TAKEOVER follows a replay's reset
						fail(errors.New("a duplicate of a finished key, purged or not, was claimed FIRST"))
					}
				case 2: // a replay resets a failed key, unless it is gone or running again
					k := failed[i%len(failed)]
					prior, _, err := s.Reset(ctx, k, driver.Replay{Reason: "test", Operator: "op", Source: "key"})
					switch {
					case errors.Is(err, driver.ErrNotReplayable), errors.Is(err, driver.ErrPurged):
					case err != nil:
						fail(fmt.Errorf("reset: %w", err))
					case prior.Status == driver.StatusFailedFinal:
						rescued.Store(k, true)
					}
				case 3: // new work
					k := idemtest.NewKey()
					start := time.Now()
					res, err := s.Claim(ctx, claimReq(k, "new"))
					if d := time.Since(start); d > time.Duration(slowest.Load()) {
						slowest.Store(int64(d))
					}
					if err == nil {
						err = s.Complete(ctx, k, res.Record.Fence, driver.Completion{ResultRef: "new"})
					}
					if err != nil {
						fail(fmt.Errorf("new work: %w", err))
					}
				}
			}
		})
	}
	purgers.Wait()
	close(stop)
	traffic.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d errors, first: %v", len(errs), errs[0])
	}

	var want driver.PurgeReport
	for _, k := range append(done, failed...) {
		_, kept := rescued.Load(k)
		rec, err := s.Get(ctx, k)
		switch {
		case kept && (err != nil || rec.Tombstone):
			t.Errorf("%s… was reset by a replay before the purge, then purged: %+v %v", k[:8], rec, err)
		case kept:
		case err != nil || !rec.Tombstone:
			t.Errorf("%s… was due and is not a tombstone: %+v %v", k[:8], rec, err)
		default:
			want.Records++
			want.Steps += stepsOf[k]
			want.Replays++
		}
	}
	var got driver.PurgeReport
	got.Add(reports[0])
	got.Add(reports[1])
	if got != want {
		t.Errorf("the two purges deleted %+v and %+v, together %+v; want %+v", reports[0], reports[1], got, want)
	}
	for _, k := range stay {
		if _, err := s.Get(ctx, k); err != nil {
			t.Errorf("%s… was never due and is gone: %v", k[:8], err)
		}
	}
	t.Logf("the purges deleted %+v and %+v beside %d traffic operations; the slowest new claim took %s",
		reports[0], reports[1], n.Load(), time.Duration(slowest.Load()))
}

// legacyStepKey is the key of a step record of earlier versions,
// hex(sha256("K:<op>")): the purge still deletes such records.
func legacyStepKey(k, op string) string {
	h := sha256.Sum256([]byte(k + ":" + op))
	return hex.EncodeToString(h[:])
}
