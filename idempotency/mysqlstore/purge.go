package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemgate/idemgate/idempotency/driver"
)

// The purge's statements and the index each one uses (purge_test.go checks
// them with EXPLAIN on a seeded table). Rows are found by an index, never a
// scan, and retired or deleted by primary key (tombstones by their range of
// idx_status_updated), in one short transaction per batch that
// locks the records it deletes the way claims and replays lock them: by
// uniq_request_id, then the row, so that neither waits on the other in the
// opposite order. No locking statement has a subquery (InnoDB would lock its
// rows too).

// purgeableFinish is the finish a SUCCEEDED record a purge may retire has
// (driver.Purgeable): none pending (work to do), none failed (an operator
// must see it first).
const purgeableFinish = `finish NOT IN ('PENDING', 'FAILED')`

// The statements (see above).
const (
	// purgeCandidatesSQL lists the oldest purgeable records, a snapshot read:
	// one range of idx_status_updated (status, updated_at) per terminal
	// status, each in index order and cut at the limit, so nothing is sorted
	// but the at most twice the limit rows of the outer ORDER BY.
	purgeCandidatesSQL = `(SELECT request_id, updated_at FROM idempotency_record FORCE INDEX (idx_status_updated)
 WHERE status = 'SUCCEEDED' AND updated_at < NOW(3) - INTERVAL ? MICROSECOND AND ` + purgeableFinish + `
 AND parent_key = '' ORDER BY updated_at LIMIT ?)
 UNION ALL (SELECT request_id, updated_at FROM idempotency_record FORCE INDEX (idx_status_updated)
 WHERE status = 'FAILED_FINAL' AND updated_at < NOW(3) - INTERVAL ? MICROSECOND AND parent_key = ''
 ORDER BY updated_at LIMIT ?)
 ORDER BY updated_at LIMIT ?`

	// purgeLockSQL re-checks the candidates by uniq_request_id, in key order,
	// and locks those that are still purgeable (driver.Purgeable, and
	// old): a record that changed since it was listed (a replay reset it,
	// another purge deleted it) drops out here. A key deleted meanwhile
	// leaves a gap lock on uniq_request_id until the batch commits.
	purgeLockSQL = `SELECT id, request_id FROM idempotency_record FORCE INDEX (uniq_request_id) WHERE request_id IN (%s)
 AND parent_key = '' AND updated_at < NOW(3) - INTERVAL ? MICROSECOND
 AND (status = 'FAILED_FINAL' OR (status = 'SUCCEEDED' AND ` + purgeableFinish + `))
 ORDER BY request_id FOR UPDATE`

	// purgeStepsSQL reads the locked records' steps by idx_parent_key, and
	// whether each is younger than the retention (its parent then stays).
	purgeStepsSQL = `SELECT id, parent_key, updated_at >= NOW(3) - INTERVAL ? MICROSECOND FROM idempotency_record
 FORCE INDEX (idx_parent_key) WHERE parent_key IN (%s)`

	// purgeAuditSQL reads the audit rows of the records that go, by
	// idx_replay_request_id, as old as the retention; younger ones outlive
	// their record (purgeOrphansSQL takes them later).
	purgeAuditSQL = `SELECT id FROM idempotency_replay FORCE INDEX (idx_replay_request_id)
 WHERE request_id IN (%s) AND created_at < NOW(3) - INTERVAL ? MICROSECOND`

	// purgeRetireSQL turns the locked records into their tombstones
	// (driver.Retire) by PRIMARY, keeping updated_at: a tombstone's age
	// counts from the record's last change.
	purgeRetireSQL = `UPDATE idempotency_record SET status = CONCAT('` + tombPrefix + `', IF(status = 'SUCCEEDED', 'SUCCEEDED', 'FAILED')),
 steps = NULL, last_error = '', lease_owner = '', lease_until = NULL, sweep_after = NULL, traceparent = '',
 origin_request_id = '', event_source = '', event_id = '', updated_at = updated_at WHERE id IN (%s)`

	// purgeTombsSQL deletes the oldest tombstones of one status whose
	// objects' lifetime is over, by a range of idx_status_updated. Nothing
	// acts on a tombstone but a claim's read, so it needs no lock first. A
	// malformed one (driver.CheckTombstone: a step record, a finish pending)
	// is left alone, as on every store.
	purgeTombsSQL = `DELETE FROM idempotency_record WHERE status = ? AND updated_at < NOW(3) - INTERVAL ? MICROSECOND
 AND parent_key = '' AND finish <> 'PENDING' ORDER BY updated_at LIMIT ?`

	// purgeDeleteSQL and purgeDeleteAuditSQL delete by PRIMARY.
	purgeDeleteSQL      = `DELETE FROM idempotency_record WHERE id IN (%s)`
	purgeDeleteAuditSQL = `DELETE FROM idempotency_replay WHERE id IN (%s)`

	// purgeOrphansSQL lists old audit rows whose key has no record, by
	// idx_replay_created (migration 006), each key looked up in
	// uniq_request_id; they are deleted by purgeDeleteAuditSQL. A LEFT JOIN,
	// not NOT EXISTS, which MariaDB may run as a scan of every key.
	purgeOrphansSQL = `SELECT rp.id FROM idempotency_replay rp FORCE INDEX (idx_replay_created)
 LEFT JOIN idempotency_record r ON r.request_id = rp.request_id
 WHERE rp.created_at < NOW(3) - INTERVAL ? MICROSECOND AND r.id IS NULL
 ORDER BY rp.created_at LIMIT ?`

	// purgeStatsSQL deletes the oldest stats rows by PRIMARY (minute, name);
	// the minutes the function still adds to lie a retention away.
	purgeStatsSQL = `DELETE FROM idempotency_stats WHERE minute < NOW() - INTERVAL ? MICROSECOND ORDER BY minute LIMIT ?`
)

// Purge deletes one bounded batch of what outlived its retention (see
// driver.Maintainer).
func (s *Store) Purge(ctx context.Context, r driver.PurgeRequest) (driver.PurgeReport, error) {
	var rep driver.PurgeReport
	r, err := r.Check()
	if err != nil {
		return rep, err
	}
	age := r.OlderThan.Microseconds()
	full, moved := false, false
	keys, err := s.purgeCandidates(ctx, age, r.Limit)
	if err != nil {
		return rep, fmt.Errorf("purge: %w", err)
	}
	if len(keys) > 0 {
		if moved, err = s.purgeRecords(ctx, keys, age, r.DryRun, &rep); err != nil {
			return rep, fmt.Errorf("purge: %w", err)
		}
		// A full list of which none went and none changed (each has a step
		// younger than the retention) would be listed again: no reason to
		// come back at once.
		full = len(keys) == r.Limit && (rep.Records > 0 || moved)
	}
	for _, st := range []string{tombPrefix + "SUCCEEDED", tombPrefix + "FAILED"} {
		n, err := s.deleteCounted(ctx, r.DryRun, purgeTombsSQL, st, r.TombstonesOlderThan.Microseconds(), r.Limit)
		if err != nil {
			return rep, fmt.Errorf("purge tombstones: %w", mapErr(err))
		}
		rep.Tombstones += n
		full = full || n == int64(r.Limit)
	}
	n, err := s.purgeOrphans(ctx, age, r.Limit, r.DryRun)
	if err != nil {
		return rep, fmt.Errorf("purge audit rows: %w", err)
	}
	rep.Replays += n
	full = full || n == int64(r.Limit)
	if r.StatsOlderThan > 0 {
		rep.Stats, err = s.deleteCounted(ctx, r.DryRun, purgeStatsSQL, r.StatsOlderThan.Microseconds(), r.Limit)
		if err != nil {
			return rep, fmt.Errorf("purge stats: %w", mapErr(err))
		}
		full = full || rep.Stats == int64(r.Limit)
	}
	rep.More = full
	return rep, nil
}

func (s *Store) purgeCandidates(ctx context.Context, age int64, limit int) ([]any, error) {
	rows, err := s.db.QueryContext(ctx, purgeCandidatesSQL, age, limit, age, limit, limit)
	if err != nil {
		return nil, mapErr(err)
	}
	var keys []any
	err = scanRows(rows, func() error {
		var key string
		var at time.Time
		err := rows.Scan(&key, &at)
		keys = append(keys, key)
		return err
	})
	return keys, mapErr(err)
}

// purgeRecords deletes, in one transaction, the candidates that are still
// purgeable and whose steps are all as old, with those steps and their
// audit rows as old; moved says some candidates changed or went meanwhile.
// InnoDB may pick it as a deadlock victim against a claim, a replay or
// another purge; it changed nothing then, and runs again.
func (s *Store) purgeRecords(ctx context.Context, candidates []any, age int64, dryRun bool, rep *driver.PurgeReport) (moved bool, err error) {
	var n driver.PurgeReport
	err = s.txRetry(ctx, func(tx *txn) error {
		n = driver.PurgeReport{}
		parents := map[string]uint64{}
		rows, err := tx.QueryContext(ctx, fmt.Sprintf(purgeLockSQL, marks(len(candidates))),
			append(append([]any{}, candidates...), age)...)
		if err != nil {
			return err
		}
		if err := scanRows(rows, func() error {
			var id uint64
			var key string
			err := rows.Scan(&id, &key)
			parents[key] = id
			return err
		}); err != nil {
			return err
		}
		moved = len(parents) < len(candidates)
		if len(parents) == 0 {
			return nil
		}
		steps, err := purgeSteps(ctx, tx, parents, age)
		if err != nil || len(parents) == 0 {
			return err
		}
		var gone, keys []any
		for k, id := range parents {
			gone, keys = append(gone, id), append(keys, k)
		}
		audit, err := selectIDs(ctx, tx, fmt.Sprintf(purgeAuditSQL, marks(len(keys))), append(keys, age)...)
		if err != nil {
			return err
		}
		if n.Replays, err = deleteIDs(ctx, tx, purgeDeleteAuditSQL, audit); err != nil {
			return err
		}
		if n.Steps, err = deleteIDs(ctx, tx, purgeDeleteSQL, steps); err != nil {
			return err
		}
		n.Records, err = deleteIDs(ctx, tx, purgeRetireSQL, gone)
		if err == nil && dryRun {
			return errDryRun // rolls back: the counts stand, nothing went
		}
		return err
	})
	if errors.Is(err, errDryRun) {
		err = nil
	}
	if err == nil {
		rep.Add(n)
	}
	return moved, err
}

// purgeSteps returns the ids of the steps of parents, and takes out of
// parents those with a step younger than the retention.
func purgeSteps(ctx context.Context, tx *txn, parents map[string]uint64, age int64) ([]any, error) {
	keys := make([]any, 0, len(parents))
	for k := range parents {
		keys = append(keys, k)
	}
	rows, err := tx.QueryContext(ctx, fmt.Sprintf(purgeStepsSQL, marks(len(keys))), append([]any{age}, keys...)...)
	if err != nil {
		return nil, err
	}
	byParent := map[string][]any{}
	young := map[string]bool{}
	if err := scanRows(rows, func() error {
		var id uint64
		var parent string
		var isYoung bool
		err := rows.Scan(&id, &parent, &isYoung)
		byParent[parent] = append(byParent[parent], id)
		young[parent] = young[parent] || isYoung
		return err
	}); err != nil {
		return nil, err
	}
	var ids []any
	for k := range parents {
		if young[k] {
			delete(parents, k)
			continue
		}
		ids = append(ids, byParent[k]...)
	}
	return ids, nil
}

func (s *Store) purgeOrphans(ctx context.Context, age int64, limit int, dryRun bool) (int64, error) {
	ids, err := selectIDs(ctx, s.db, purgeOrphansSQL, age, limit)
	if err != nil || dryRun {
		return int64(len(ids)), mapErr(err)
	}
	// The rows are named by id: a DELETE the database aborted deleted
	// nothing, and run again (s.exec) deletes those still there.
	n, err := deleteIDs(ctx, execFunc(s.exec), purgeDeleteAuditSQL, ids)
	return n, mapErr(err)
}

// execFunc is an execer of a function (Store.exec: retried).
type execFunc func(ctx context.Context, q string, args ...any) (sql.Result, error)

func (f execFunc) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return f(ctx, q, args...)
}

// deleteCounted runs one bounded DELETE and returns how many rows it
// deleted; dry, inside a transaction it rolls back, so that the count
// stands and nothing goes (its row locks last the statement's milliseconds).
func (s *Store) deleteCounted(ctx context.Context, dry bool, q string, args ...any) (int64, error) {
	var n int64
	exec := func(db execer) error {
		res, err := db.ExecContext(ctx, q, args...)
		if err == nil {
			n, err = res.RowsAffected()
		}
		return err
	}
	// Two purges deleting neighbouring tombstones may deadlock on the
	// index range; InnoDB rolled the victim back, so it is run again.
	err := s.txRetry(ctx, func(tx *txn) error {
		if err := exec(tx); err != nil || !dry {
			return err
		}
		return errDryRun
	})
	if errors.Is(err, errDryRun) {
		err = nil
	}
	return n, err
}

// errDryRun ends a dry run's transaction without committing it.
var errDryRun = errors.New("mysqlstore: purge dry run")

type querier interface {
	execer
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// selectIDs runs a query of one id column.
func selectIDs(ctx context.Context, db querier, q string, args ...any) ([]any, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	var ids []any
	err = scanRows(rows, func() error {
		var id uint64
		err := rows.Scan(&id)
		ids = append(ids, id)
		return err
	})
	return ids, err
}

// deleteIDs deletes the rows ids names with q (a DELETE … WHERE id IN).
func deleteIDs(ctx context.Context, db execer, q string, ids []any) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	res, err := db.ExecContext(ctx, fmt.Sprintf(q, marks(len(ids))), ids...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// scanRows calls scan for each row and closes rows.
func scanRows(rows *sql.Rows, scan func() error) error {
	defer rows.Close()
	for rows.Next() {
		if err := scan(); err != nil {
			return err
		}
	}
	return rows.Err()
}

// txRetry runs fn in a transaction, again when InnoDB aborted it.
func (s *Store) txRetry(ctx context.Context, fn func(*txn) error) error {
	return s.retryWhile(ctx, 10*time.Millisecond, func(err error) bool { return errors.Is(err, errTxAborted) },
		func() error { return s.inTx(ctx, func(tx *txn) error { return mapErr(fn(tx)) }) })
}

// marks is n comma-separated placeholders.
func marks(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
