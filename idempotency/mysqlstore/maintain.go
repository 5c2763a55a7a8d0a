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

// Candidates lists the task records the sweeper should take up (see
// driver.Maintainer): three index ranges, each ordered and limited on
// its own — RUNNING by (status, lease_until), FAILED_RETRYABLE and RECEIVED
// by (status, updated_at), SUCCEEDED with a finish pending by (status,
// lease_until), which only a pending finish sets on a SUCCEEDED row — then
// merged by age. Step records and deferred records are filtered out of each
// range.
func (s *Store) Candidates(ctx context.Context, limit int, grace time.Duration) ([]driver.Record, error) {
	const due = ` AND parent_key = '' AND (sweep_after IS NULL OR sweep_after <= NOW(3))`
	g := grace.Microseconds()
	rows, err := s.db.QueryContext(ctx, `(SELECT `+columns+` FROM idempotency_record
 WHERE status = 'RUNNING' AND lease_until <= NOW(3)`+due+` ORDER BY updated_at LIMIT ?)
 UNION ALL (SELECT `+columns+` FROM idempotency_record
 WHERE status IN ('FAILED_RETRYABLE', 'RECEIVED') AND updated_at <= NOW(3) - INTERVAL ? MICROSECOND`+due+`
 ORDER BY updated_at LIMIT ?)
 UNION ALL (SELECT `+columns+` FROM idempotency_record
 WHERE status = 'SUCCEEDED' AND lease_until <= NOW(3) - INTERVAL ? MICROSECOND AND finish = 'PENDING'`+due+`
 ORDER BY updated_at LIMIT ?)
 ORDER BY updated_at LIMIT ?`, limit, g, limit, g, limit, limit)
	if err != nil {
		return nil, fmt.Errorf("candidates: %w", mapErr(err))
	}
	return collect(rows)
}

// Defer sets the record aside for d if it is still as listed; it does not
// change updated_at, which dates the record's last transition.
func (s *Store) Defer(ctx context.Context, rec driver.Record, d time.Duration) error {
	_, err := s.exec(ctx, `UPDATE idempotency_record SET sweep_after = NOW(3) + INTERVAL ? MICROSECOND
 WHERE request_id = ? AND fence = ? AND status = ? AND updated_at = ?`, d.Microseconds(), rec.Key, rec.Fence,
		string(rec.Status), rec.UpdatedAt.UTC())
	if err != nil {
		return fmt.Errorf("defer: %w", mapErr(err))
	}
	return nil
}

func collect(rows *sql.Rows) ([]driver.Record, error) {
	defer rows.Close()
	var out []driver.Record
	for rows.Next() {
		r, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, mapErr(rows.Err())
}

// Reset performs an audited operator reset (driver.ApplyReset) under
// the row lock; the steps it checkpointed stay. The audit row is written in the same transaction, also when
// there is no record (a dead letter of a delivery that never reached the
// store); a refused reset writes nothing.
func (s *Store) Reset(ctx context.Context, key string, rp driver.Replay) (prior, after driver.Record, err error) {
	err = s.txRetry(ctx, func(tx *txn) error {
		prior, after = driver.Record{}, driver.Record{} // nothing of an aborted run is answered
		rec, now, err := readNow(ctx, tx, lockedSQL, key)
		if err != nil && !errors.Is(err, driver.ErrNotFound) {
			return err
		}
		prior = rec // zero when there is no record: the audit row says so
		if err == nil {
			kind, err := driver.ApplyReset(&rec, rp, now)
			if err != nil {
				return err
			}
			if err := resetWrite(ctx, tx, rec, kind); err != nil {
				return err
			}
		}
		after = rec
		_, err = tx.ExecContext(ctx, `INSERT INTO idempotency_replay (request_id, reason, operator, prior_status, source)
 VALUES (?, ?, ?, ?, ?)`, key, rp.Reason, rp.Operator, string(prior.Status), rp.Source)
		return mapErr(err)
	})
	return prior, after, err
}

func resetWrite(ctx context.Context, tx *txn, rec driver.Record, kind driver.ResetKind) error {
	var err error
	switch kind {
	case driver.ResetFinish:
		_, err = tx.ExecContext(ctx, `UPDATE idempotency_record SET finish = 'PENDING', lease_until = NOW(3),
 last_error_code = '', last_error = '', updated_at = NOW(3) WHERE request_id = ?`, rec.Key)
	case driver.ResetRecord:
		_, err = tx.ExecContext(ctx, `UPDATE idempotency_record SET status = 'RECEIVED', fence = ?, lease_until = NULL,
 sweep_after = NULL, retry_after = NULL, finish = '', updated_at = NOW(3) WHERE request_id = ?`, rec.Fence, rec.Key)
	}
	return mapErr(err)
}

// Replays lists the audit rows of key, oldest first.
func (s *Store) Replays(ctx context.Context, key string) ([]driver.Replay, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT request_id, reason, operator, prior_status, source, created_at
 FROM idempotency_replay WHERE request_id = ? ORDER BY id`, key)
	if err != nil {
		return nil, fmt.Errorf("replays: %w", mapErr(err))
	}
	defer rows.Close()
	var out []driver.Replay
	for rows.Next() {
		var r driver.Replay
		var st string
		if err := rows.Scan(&r.Key, &r.Reason, &r.Operator, &st, &r.Source, &r.CreatedAt); err != nil {
			return nil, mapErr(err)
		}
		r.PriorStatus = driver.Status(st)
		out = append(out, r)
	}
	return out, mapErr(rows.Err())
}

// AddStats adds per-minute counters.
func (s *Store) AddStats(ctx context.Context, rows []driver.StatRow) error {
	if len(rows) == 0 {
		return nil
	}
	var q strings.Builder
	args := make([]any, 0, 3*len(rows))
	q.WriteString(`INSERT INTO idempotency_stats (minute, name, count) VALUES `)
	for i, r := range rows {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?)")
		args = append(args, r.Minute.UTC().Truncate(time.Minute), r.Name, r.Count)
	}
	q.WriteString(` ON DUPLICATE KEY UPDATE count = count + VALUES(count)`)
	_, err := s.exec(ctx, q.String(), args...)
	return mapErr(err)
}

// Stats reads the counters from since on.
func (s *Store) Stats(ctx context.Context, since time.Time) ([]driver.StatRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT minute, name, count FROM idempotency_stats WHERE minute >= ?
 ORDER BY minute, name`, since.UTC())
	if err != nil {
		return nil, fmt.Errorf("stats: %w", mapErr(err))
	}
	defer rows.Close()
	var out []driver.StatRow
	for rows.Next() {
		var r driver.StatRow
		if err := rows.Scan(&r.Minute, &r.Name, &r.Count); err != nil {
			return nil, mapErr(err)
		}
		out = append(out, r)
	}
	return out, mapErr(rows.Err())
}
