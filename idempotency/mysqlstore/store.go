// Package mysqlstore is the durable arbiter of idempotency on MySQL (RDS,
// PolarDB, MariaDB): a row per key under UNIQUE KEY uniq_request_id, claims by
// insert-if-absent or a takeover under a row lock, and every later transition
// a conditional UPDATE on the fence. Leases are on the database clock.
package mysqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgate/idemgate/idempotency/driver"
)

// ErrDuplicateKey is MySQL error 1062 on uniq_request_id, mapped so that the
// claim logic tests a sentinel of its own rather than a driver number.
var ErrDuplicateKey = errors.New("mysqlstore: duplicate key")

// Options size the connection pool (Open only: a pool given to New is
// the caller's) and name the tables. FC runs up to instanceConcurrency
// invocations per instance, each holding at most one connection at a time.
type Options struct {
	MaxOpenConns int           // default 16
	ConnMaxIdle  time.Duration // default 5 min: FC freezes idle instances, RDS closes idle links
	// Tables names the tables (zero: DefaultTables); Migrate creates them
	// under these names.
	Tables Tables
}

// Store implements driver.Store on MySQL.
type Store struct {
	db       pool
	tables   Tables
	borrowed bool // the pool is the caller's (New): Close leaves it open
	aborts   atomic.Int64
}

var (
	_ driver.Store     = (*Store)(nil)
	_ driver.NowReader = (*Store)(nil)
)

// Open connects with dsn (go-sql-driver format). It forces the settings the
// store's correctness relies on: parseTime, UTC, session time_zone +00:00 so
// that NOW(3) and stored times agree, and clientFoundRows so that an UPDATE
// that matched its row counts as affected even when no value changed; and
// interpolateParams for speed.
func Open(dsn string, o Options) (*Store, error) {
	tables, err := o.Tables.resolve()
	if err != nil {
		return nil, err
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		// The driver's message can quote the DSN; never echo the password.
		return nil, errors.New("mysqlstore: MYSQL_DSN is not a valid go-sql-driver DSN")
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.ClientFoundRows = true
	// One round trip per statement instead of prepare, execute and close:
	// the store sends only numbers and strings, in utf8mb4.
	cfg.InterpolateParams = true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	if cfg.Timeout == 0 {
		cfg.Timeout = 3 * time.Second
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 10 * time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: connector: %w", err)
	}
	db := sql.OpenDB(conn)
	if o.MaxOpenConns <= 0 {
		o.MaxOpenConns = 16
	}
	if o.ConnMaxIdle <= 0 {
		o.ConnMaxIdle = 5 * time.Minute
	}
	db.SetMaxOpenConns(o.MaxOpenConns)
	db.SetMaxIdleConns(o.MaxOpenConns)
	db.SetConnMaxIdleTime(o.ConnMaxIdle)
	return &Store{db: pool{db: db, r: tables.replacer()}, tables: tables}, nil
}

// DB exposes the pool (operators' tools, tests).
func (s *Store) DB() *sql.DB { return s.db.db }

// Tables are the names the store uses.
func (s *Store) Tables() Tables { return s.tables }

// Close closes the pool Open opened (not one given to New).
func (s *Store) Close() error {
	if s.borrowed {
		return nil
	}
	return s.db.Close()
}

// Ping checks the database answers.
func (s *Store) Ping(ctx context.Context) error { return mapErr(s.db.PingContext(ctx)) }

const columns = `request_id, tenant_id, task_type, operation, input_version, origin_request_id, event_source,
 event_id, parent_key, op, status, attempt, fence, lease_owner, lease_try, lease_until, result_ref, input_ref, payload_hash,
 last_error_code, last_error, finish, steps, sweep_after, traceparent, created_at, updated_at, retry_after,
 mark_owner, mark_try`

func scan(row interface{ Scan(...any) error }, extra ...any) (driver.Record, error) {
	var r driver.Record
	var st, finish string
	var steps sql.NullString
	var lease, sweep, retry sql.NullTime
	dest := []any{&r.Key, &r.TenantID, &r.TaskType, &r.Operation, &r.InputVersion, &r.OriginRequestID,
		&r.EventSource, &r.EventID, &r.ParentKey, &r.Op, &st, &r.Attempt, &r.Fence, &r.LeaseOwner, &r.LeaseTry, &lease,
		&r.ResultRef, &r.InputRef, &r.PayloadHash, &r.LastErrorCode, &r.LastError, &finish, &steps, &sweep,
		&r.TraceParent, &r.CreatedAt, &r.UpdatedAt, &retry, &r.MarkOwner, &r.MarkTry}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return r, driver.ErrNotFound
		}
		return r, mapErr(err)
	}
	r.Status, r.Finish = driver.Status(st), driver.FinishState(finish)
	if rest, ok := strings.CutPrefix(st, tombPrefix); ok {
		r.Tombstone, r.Status = true, driver.Status(rest)
		if rest == "FAILED" {
			r.Status = driver.StatusFailedFinal
		}
	}
	if lease.Valid {
		r.LeaseUntil = lease.Time
	}
	if sweep.Valid {
		r.SweepAfter = sweep.Time
	}
	if retry.Valid {
		r.RetryAfter = retry.Time
	}
	if steps.Valid && steps.String != "" {
		if err := json.Unmarshal([]byte(steps.String), &r.Steps); err != nil {
			return r, fmt.Errorf("mysqlstore: steps of %s: %w", r.Key, err)
		}
	}
	return r, driver.CheckTombstone(r)
}

// tombPrefix marks a tombstone's status (TOMB_SUCCEEDED, TOMB_FAILED: the
// VARCHAR(16) holds them): no statement that acts on a SUCCEEDED or
// FAILED_FINAL record matches a tombstone, the purge finds records to retire
// and tombstones to delete by the same idx_status_updated, and no migration
// is needed (docs/design.md §6).
const tombPrefix = "TOMB_"

// Get reads one record.
func (s *Store) Get(ctx context.Context, key string) (driver.Record, error) {
	return scan(s.db.QueryRowContext(ctx, `SELECT `+columns+` FROM idempotency_record WHERE request_id = ?`, key))
}

// GetNow reads one record and the database's now (driver.NowReader).
func (s *Store) GetNow(ctx context.Context, key string) (driver.Record, time.Time, error) {
	return readNow(ctx, s.db, readNowSQL, key)
}

// Reads of a record with the database's clock, to decide on; lockedSQL
// takes the row lock (inside a transaction).
const (
	readNowSQL = `SELECT ` + columns + `, NOW(3) FROM idempotency_record WHERE request_id = ?`
	lockedSQL  = readNowSQL + ` FOR UPDATE`
)

// readNow reads key's record with q (readNowSQL or lockedSQL) and the
// database's now.
func readNow(ctx context.Context, db interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, q, key string) (driver.Record, time.Time, error) {
	var now time.Time
	rec, err := scan(db.QueryRowContext(ctx, q, key), &now)
	return rec, now, err
}

const insertSQL = `INSERT INTO idempotency_record (request_id, tenant_id, task_type, operation, input_version,
 origin_request_id, event_source, event_id, status, attempt, fence, lease_owner, lease_try, lease_until,
 input_ref, payload_hash, traceparent, created_at, updated_at)
 VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'RUNNING', 1, 1, ?, ?, NOW(3) + INTERVAL ? MICROSECOND, ?, ?, ?, NOW(3), NOW(3))`

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func insert(ctx context.Context, db execer, req driver.ClaimRequest) error {
	m := req.Meta
	_, err := db.ExecContext(ctx, insertSQL, req.Key, m.TenantID, m.TaskType, m.Operation, m.InputVersion,
		m.OriginRequestID, m.EventSource, m.EventID, req.Owner, req.Try, req.Lease.Microseconds(),
		m.InputRef, req.PayloadHash, m.TraceParent)
	return mapErr(err)
}

func first(req driver.ClaimRequest) driver.ClaimResult {
	// The row's times are the database's; this copy approximates them locally.
	return driver.ClaimResult{Decision: driver.DecisionFirst, Record: driver.NewRecord(req, time.Now()),
		LeaseLeft: req.Lease, Source: "mysql"}
}

// Claim inserts the record, or, when the key exists, decides under a row lock
// (SELECT … FOR UPDATE) whether the caller may take it over. The unique key
// arbitrates concurrent inserts; the row lock serialises takeovers; nothing is
// decided on a read that another writer could invalidate.
func (s *Store) Claim(ctx context.Context, req driver.ClaimRequest) (driver.ClaimResult, error) {
	return s.retry(ctx, func() (driver.ClaimResult, error) {
		err := insert(ctx, s.db, req)
		if err == nil {
			return first(req), nil
		}
		if !errors.Is(err, ErrDuplicateKey) {
			return driver.ClaimResult{}, err
		}
		// Most duplicates are answered from a plain read: a terminal record,
		// another payload, another owner's live lease (committed states, so
		// the answer holds as of the read). Only a takeover needs the row
		// lock, and decides again under it.
		if res, ok, err := s.peek(ctx, req); err != nil || ok {
			return res, err
		}
		var res driver.ClaimResult
		err = s.inTx(ctx, func(tx *txn) (err error) {
			res, err = takeover(ctx, tx, req)
			return err
		})
		return res, err
	})
}

// peek decides a duplicate's claim on the committed record without a lock;
// ok is false when the decision is a takeover.
func (s *Store) peek(ctx context.Context, req driver.ClaimRequest) (driver.ClaimResult, bool, error) {
	rec, now, err := readNow(ctx, s.db, readNowSQL, req.Key)
	if err != nil {
		return driver.ClaimResult{}, false, err
	}
	d, act := driver.Decide(rec, req, now)
	if act != driver.ActNone {
		return driver.ClaimResult{}, false, nil
	}
	return answer(d, act, rec, now), true, nil
}

func answer(d driver.Decision, act driver.Action, rec driver.Record, now time.Time) driver.ClaimResult {
	res := driver.ClaimResult{Decision: d, Record: rec, Source: "mysql", Salvage: act == driver.ActSalvage}
	if rec.Status == driver.StatusRunning && rec.LeaseUntil.After(now) {
		res.LeaseLeft = rec.LeaseUntil.Sub(now)
	}
	return res
}

// takeover decides on the locked row with the shared state machine and writes
// the result back; the database clock is the one the decision used.
func takeover(ctx context.Context, tx *txn, req driver.ClaimRequest) (driver.ClaimResult, error) {
	rec, now, err := readNow(ctx, tx, lockedSQL, req.Key)
	if err != nil {
		return driver.ClaimResult{}, err
	}
	d, act := driver.Decide(rec, req, now)
	if act != driver.ActNone {
		driver.Apply(&rec, act, req, now)
		var lease any
		if !rec.LeaseUntil.IsZero() {
			lease = rec.LeaseUntil
		}
		_, err = tx.ExecContext(ctx, `UPDATE idempotency_record SET status = ?, fence = ?, attempt = ?,
 lease_owner = ?, lease_try = ?, lease_until = ?, sweep_after = NULL, retry_after = NULL, mark_owner = ?, mark_try = ?,
 updated_at = NOW(3) WHERE request_id = ?`,
			string(rec.Status), rec.Fence, rec.Attempt, rec.LeaseOwner, rec.LeaseTry, lease, rec.MarkOwner, rec.MarkTry,
			rec.Key)
		if err != nil {
			return driver.ClaimResult{}, mapErr(err)
		}
	}
	return answer(d, act, rec, now), nil
}

// inTx runs fn in a transaction: committed when fn succeeds, else rolled
// back with fn's error (the rollback's own is not returned). A transaction
// whose COMMIT or ROLLBACK failed is not known to have ended, and its
// connection is closed, never pooled (txn.end).
func (s *Store) inTx(ctx context.Context, fn func(*txn) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return mapErr(err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return mapErr(tx.Commit())
}

// retry repeats a claim that the database aborted (deadlock 1213, lock wait
// 1205; on Galera a certification conflict with a write on another node,
// 1213 at the statement or at COMMIT) or whose row vanished between the
// insert and the lock (an operator purge). The claim starts over: insert,
// read, decide under the lock; nothing of the aborted run is assumed.
func (s *Store) retry(ctx context.Context, fn func() (driver.ClaimResult, error)) (driver.ClaimResult, error) {
	var res driver.ClaimResult
	err := s.retryWhile(ctx, 5*time.Millisecond, func(err error) bool {
		return errors.Is(err, errTxAborted) || errors.Is(err, driver.ErrNotFound)
	}, func() (err error) {
		res, err = fn()
		return err
	})
	return res, err
}

// retryWhile runs fn up to five times while its error is one again accepts,
// pausing step, then 2·step, … between tries; it gives up when ctx ends.
// An abort it runs again is counted (AbortsRetried).
func (s *Store) retryWhile(ctx context.Context, step time.Duration, again func(error) bool, fn func() error) error {
	var err error
	for i := range tries {
		if err = fn(); err == nil || i == tries-1 || !again(err) {
			return err
		}
		if errors.Is(err, errTxAborted) {
			s.aborts.Add(1)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(i+1) * step):
		}
	}
	return err
}

// guarded runs a fenced transition; it ends any deferral, which was made
// for the record as the sweeper listed it (the holder is alive). InnoDB may pick the single-row UPDATE
// as a deadlock victim against a concurrent claim; it is retried, since it
// changed nothing.
func (s *Store) guarded(ctx context.Context, op, set string, args ...any) error {
	return s.fenced(ctx, op, set, `status = 'RUNNING'`, args...)
}

// fenced is guarded with the status condition held given.
func (s *Store) fenced(ctx context.Context, op, set, held string, args ...any) error {
	r, err := s.exec(ctx, `UPDATE idempotency_record SET `+set+`, sweep_after = NULL, updated_at = NOW(3)
 WHERE request_id = ? AND fence = ? AND `+held, args...)
	var n int64
	if err == nil {
		n, err = r.RowsAffected()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, mapErr(err))
	}
	if n == 0 {
		return driver.ErrLeaseLost
	}
	return nil
}

// Checkpoint records the step results under the fence.
func (s *Store) Checkpoint(ctx context.Context, key string, fence int64, steps map[string]string) error {
	b, err := json.Marshal(steps)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return s.guarded(ctx, "checkpoint", `steps = ?`, string(b), key, fence)
}

// MarkFinished records the pending finishes of keys done in one statement
// (the unique key finds each row).
func (s *Store) MarkFinished(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	args := make([]any, len(keys))
	for i, k := range keys {
		args[i] = k
	}
	_, err := s.exec(ctx, `UPDATE idempotency_record SET finish = 'DONE', lease_until = NULL, updated_at = NOW(3)
 WHERE request_id IN (`+marks(len(keys))+`) AND status = 'SUCCEEDED' AND finish = 'PENDING'`, args...)
	if err != nil {
		return fmt.Errorf("mark finished: %w", mapErr(err))
	}
	return nil
}

// Renew extends the lease held at fence (a task's or a pending finish's,
// driver.Leased) by d from the database's now.
func (s *Store) Renew(ctx context.Context, key string, fence int64, d time.Duration) error {
	return s.fenced(ctx, "renew", `lease_until = NOW(3) + INTERVAL ? MICROSECOND`,
		`(status = 'RUNNING' OR (status = 'SUCCEEDED' AND finish = 'PENDING'))`, d.Microseconds(), key, fence)
}

// Complete records SUCCEEDED with the result reference, and, when c asks
// for one, a finish pending under the completing owner in the same
// statement.
func (s *Store) Complete(ctx context.Context, key string, fence int64, c driver.Completion) error {
	if c.FinishLease > 0 {
		return s.guarded(ctx, "complete", `status = 'SUCCEEDED', result_ref = ?, finish = 'PENDING',
 lease_until = NOW(3) + INTERVAL ? MICROSECOND, lease_try = GREATEST(lease_try, ?), last_error_code = '', last_error = ''`,
			c.ResultRef, c.FinishLease.Microseconds(), c.Try, key, fence)
	}
	return s.guarded(ctx, "complete", `status = 'SUCCEEDED', result_ref = ?, finish = '', lease_until = NULL,
 last_error_code = '', last_error = ''`, c.ResultRef, key, fence)
}

// ClaimFinish takes over a pending finish in one conditional statement
// (driver.ApplyFinish in SQL); only when it matched nothing is the
// record read, to tell in progress from nothing pending.
func (s *Store) ClaimFinish(ctx context.Context, req driver.FinishRequest) (driver.ClaimResult, error) {
	// The new fence comes back as the statement's LAST_INSERT_ID, twice
	// over plus one bit: whether the previous holder was the caller
	// (driver.DecideFinish's REPEAT_SAME, which a match implies: its later
	// try, or its own lease ended; anyone else matched past the lease:
	// TAKEOVER). The fence and lease_try (driver.TakeoverTry: the previous
	// holder's try when it was the caller, the caller's mark) read the
	// previous owner: they come before lease_owner, for SET assigns left to
	// right on MySQL and by default on MariaDB (and at once under
	// SIMULTANEOUS_ASSIGNMENT).
	r, err := s.exec(ctx, `UPDATE idempotency_record SET
 fence = LAST_INSERT_ID((fence + 1) * 2 + IF(? <> '' AND lease_owner = ?, 1, 0)) DIV 2,
 lease_try = IF(? = '', ?, GREATEST(?, IF(lease_owner = ?, lease_try, ?), IF(mark_owner = ?, mark_try, ?))),
 lease_owner = ?, lease_until = NOW(3) + INTERVAL ? MICROSECOND
 WHERE request_id = ? AND status = 'SUCCEEDED' AND finish = 'PENDING'
 AND (lease_until <= NOW(3) OR (? <> '' AND lease_owner = ? AND ? >= 0 AND ? > lease_try))`,
		req.Owner, req.Owner, req.Owner, req.Try, req.Try, req.Owner, req.Try, req.Owner, req.Try,
		req.Owner, req.Lease.Microseconds(), req.Key,
		req.Owner, req.Owner, req.Try, req.Try)
	if err != nil {
		return driver.ClaimResult{}, mapErr(err)
	}
	if n, err := r.RowsAffected(); err != nil {
		return driver.ClaimResult{}, mapErr(err)
	} else if n == 1 {
		id, err := r.LastInsertId()
		if err != nil {
			return driver.ClaimResult{}, mapErr(err)
		}
		d := driver.DecisionTakeover
		if id%2 == 1 {
			d = driver.DecisionRepeatSame
		}
		// What the task recorded (its origin request id, which the holder's
		// notification names, its attempt and result) is read back: a
		// holder's rare path (a dead holder's retry, the sweeper, a replay).
		// LeaseTry is the request's: the row may hold a copy's mark above it
		// (driver.TakeoverTry), which nothing reads back from the answer.
		rec, _, err := readNow(ctx, s.db, readNowSQL, req.Key)
		if err != nil {
			return driver.ClaimResult{}, fmt.Errorf("read the finish claimed: %w", err)
		}
		rec.Status, rec.Finish, rec.Fence, rec.LeaseOwner, rec.LeaseTry = driver.StatusSucceeded, driver.FinishPending,
			id/2, req.Owner, req.Try
		return driver.ClaimResult{Decision: d, LeaseLeft: req.Lease, Source: "mysql", Record: rec}, nil
	}
	rec, now, err := readNow(ctx, s.db, readNowSQL, req.Key)
	if err != nil {
		return driver.ClaimResult{}, err
	}
	res := driver.ClaimResult{Decision: driver.DecideFinish(rec, req, now), Record: rec, Source: "mysql"}
	if res.Decision.Owned() { // the lease ran out between the two statements: report it held, the caller retries
		res.Decision = driver.DecisionRepeatOther
	}
	if driver.CopyOfFinish(rec, req, now) {
		if err := s.markFinishTry(ctx, req, rec.Fence); err != nil {
			return driver.ClaimResult{}, err
		}
	}
	if rec.Finish == driver.FinishPending && rec.LeaseUntil.After(now) {
		res.LeaseLeft = rec.LeaseUntil.Sub(now)
	}
	return res, nil
}

// markFinishTry marks a copy's try past on the live finish it met
// (driver.CopyOfFinish, the record's mark as driver's mark sets it); the
// fence stays, so the holder's writes still land. mark_try reads the
// previous mark_owner: it comes first (see ClaimFinish).
func (s *Store) markFinishTry(ctx context.Context, req driver.FinishRequest, fence int64) error {
	_, err := s.exec(ctx, `UPDATE idempotency_record SET lease_try = GREATEST(lease_try, ?),
 mark_try = IF(mark_owner = ?, GREATEST(mark_try, ?), ?), mark_owner = ?
 WHERE request_id = ? AND status = 'SUCCEEDED' AND finish = 'PENDING' AND fence = ? AND lease_owner = ?`,
		req.Try+1, req.Owner, req.Try+1, req.Try+1, req.Owner, req.Key, fence, req.Owner)
	if err != nil {
		return fmt.Errorf("mark a copy's try: %w", mapErr(err))
	}
	return nil
}

// Finish ends the pending finish held by owner under fence (every finish
// claim moves the fence; try may have been marked past by a copy).
func (s *Store) Finish(ctx context.Context, key, owner string, _ int, fence int64, f *driver.Failure) error {
	set, args := `finish = 'DONE', lease_until = NULL, updated_at = NOW(3)`, []any{}
	switch {
	case f != nil && f.Final:
		set, args = `finish = 'FAILED', lease_until = NULL, last_error_code = ?, last_error = ?, updated_at = NOW(3)`,
			[]any{f.Code, f.Message}
	case f != nil: // released: still pending, claimable at once, and behind the sweeper's other work
		set = `lease_until = NOW(3), updated_at = NOW(3)`
	}
	r, err := s.exec(ctx, `UPDATE idempotency_record SET `+set+`
 WHERE request_id = ? AND status = 'SUCCEEDED' AND finish = 'PENDING' AND lease_owner = ? AND fence = ?`,
		append(args, key, owner, fence)...)
	if err != nil {
		return fmt.Errorf("finish: %w", mapErr(err))
	}
	if n, err := r.RowsAffected(); err != nil {
		return fmt.Errorf("finish: %w", mapErr(err))
	} else if n == 0 {
		return driver.ErrLeaseLost
	}
	return nil
}

// Fail records a classified failure.
func (s *Store) Fail(ctx context.Context, key string, fence int64, f driver.Failure) error {
	if f.Final {
		return s.guarded(ctx, "fail", `status = 'FAILED_FINAL', last_error_code = ?, last_error = ?, lease_until = NULL,
 retry_after = NULL`, f.Code, f.Message, key, fence)
	}
	// The back-off ends on the database's clock, like leases.
	return s.guarded(ctx, "fail", `status = 'FAILED_RETRYABLE', last_error_code = ?, last_error = ?, lease_until = NULL,
 retry_after = IF(? > 0, NOW(3) + INTERVAL ? MICROSECOND, NULL)`,
		f.Code, f.Message, f.RetryAfter.Microseconds(), f.RetryAfter.Microseconds(), key, fence)
}

// errTxAborted marks a statement or transaction the database aborted,
// which the store runs again. 1213 (a deadlock, a Galera certification
// conflict) rolls the whole transaction back; 1205 (a lock wait) only the
// statement (innodb_rollback_on_timeout is off by default): an autocommit
// statement is then undone, a transaction only once inTx's own ROLLBACK
// has run, which it always does before txRetry runs it again.
var errTxAborted = errors.New("mysqlstore: transaction aborted by the database (deadlock, lock wait, Galera certification conflict)")

// MapErr turns driver errors the store reacts to into sentinels: 1062 into
// ErrDuplicateKey, deadlocks, lock waits and Galera certification conflicts
// into a retried abort, 1406 into a FINAL invalid_request, 1047 into
// ErrNodeNotReady.
func MapErr(err error) error { return mapErr(err) }

func mapErr(err error) error {
	if err == nil { // every statement passes here: no errors.As target to allocate
		return nil
	}
	me, ok := errors.AsType[*mysql.MySQLError](err)
	if !ok || mapped(err) {
		return err
	}
	switch me.Number {
	case 1047:
		return fmt.Errorf("%w: %w", ErrNodeNotReady, err)
	case 1062:
		return fmt.Errorf("%w: %w", ErrDuplicateKey, err)
	case 1213, 1205:
		return fmt.Errorf("%w: %w", errTxAborted, err)
	case 1406:
		return fmt.Errorf("%w: a field is longer than its column: %w", driver.ErrInvalid, err)
	}
	return err
}
