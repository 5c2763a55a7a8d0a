package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemgate/idemgate/idempotency"
)

// Candidates lists up to limit task records (not per-operation ones) that the
// sweeper should re-drive: RUNNING with an expired lease; FAILED_RETRYABLE and
// RECEIVED untouched for grace (FC's own retry goes first); and SUCCEEDED
// records of the last day, untouched for grace, whose publish step has not
// succeeded or whose notify step was started and has not (a crash fell between
// complete and those). Steps that failed FINAL need an operator's replay and
// are not listed, so they cannot hold the head of the queue.
func (s *Store) Candidates(ctx context.Context, limit int, grace time.Duration) ([]idempotency.Record, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+columns+` FROM idempotency_record
 WHERE parent_key = '' AND ((status = 'RUNNING' AND lease_until < NOW(3))
   OR (status IN ('FAILED_RETRYABLE', 'RECEIVED') AND updated_at < NOW(3) - INTERVAL ? MICROSECOND))
 ORDER BY updated_at LIMIT ?`, grace.Microseconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("candidates: %w", mapErr(err))
	}
	out, err := collect(rows)
	if err != nil || len(out) >= limit {
		return out, err
	}
	r := "r." + strings.ReplaceAll(strings.Join(strings.Fields(columns), " "), ", ", ", r.")
	rows, err = s.db.QueryContext(ctx, `SELECT `+r+` FROM idempotency_record r
 LEFT JOIN idempotency_record p ON p.request_id = SHA2(CONCAT(r.request_id, ':publish'), 256)
 LEFT JOIN idempotency_record n ON n.request_id = SHA2(CONCAT(r.request_id, ':notify'), 256)
 WHERE r.status = 'SUCCEEDED' AND r.parent_key = '' AND r.updated_at > NOW(3) - INTERVAL 1 DAY
   AND r.updated_at < NOW(3) - INTERVAL ? MICROSECOND
   AND ((p.status IS NULL OR p.status NOT IN ('SUCCEEDED', 'FAILED_FINAL'))
     OR (n.status IS NOT NULL AND n.status NOT IN ('SUCCEEDED', 'FAILED_FINAL')))
 ORDER BY r.updated_at LIMIT ?`, grace.Microseconds(), limit-len(out))
	if err != nil {
		return nil, fmt.Errorf("candidates: %w", mapErr(err))
	}
	more, err := collect(rows)
	return append(out, more...), err
}

func collect(rows *sql.Rows) ([]idempotency.Record, error) {
	defer rows.Close()
	var out []idempotency.Record
	for rows.Next() {
		r, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, mapErr(rows.Err())
}

// Reset prepares an audited replay: a failed or abandoned record (and its
// failed steps) goes back to RECEIVED, so the next claim takes it over with a
// new fence and one more attempt; a SUCCEEDED one is left as it is. The audit
// row is written in the same transaction, also when there is no record yet
// (a dead letter of a delivery that never reached the store). It returns the
// record as it was (zero Status when there was none).
func (s *Store) Reset(ctx context.Context, key string, rp idempotency.Replay) (idempotency.Record, error) {
	var prior idempotency.Record
	_, err := s.inTx(ctx, func(tx *sql.Tx) (idempotency.ClaimResult, error) {
		var now time.Time
		rec, err := scan(tx.QueryRowContext(ctx, `SELECT `+columns+`, NOW(3) FROM idempotency_record
 WHERE request_id = ? FOR UPDATE`, key), &now)
		if err != nil && !errors.Is(err, idempotency.ErrNotFound) {
			return idempotency.ClaimResult{}, err
		}
		prior = rec // zero when there is no record: the audit row says so
		reset := false
		if err == nil {
			if reset, err = idempotency.Resettable(rec, now); err != nil {
				return idempotency.ClaimResult{}, err
			}
		}
		if rec.Status == idempotency.StatusSucceeded {
			// The result stands; steps that failed after it (publish, notify)
			// may run again.
			if _, err := tx.ExecContext(ctx, `UPDATE idempotency_record SET status = 'RECEIVED', lease_until = NULL,
 updated_at = NOW(3) WHERE parent_key = ? AND status IN ('FAILED_FINAL', 'FAILED_RETRYABLE')`, key); err != nil {
				return idempotency.ClaimResult{}, mapErr(err)
			}
		}
		if reset {
			if _, err := tx.ExecContext(ctx, `UPDATE idempotency_record SET status = 'RECEIVED', lease_until = NULL,
 updated_at = NOW(3) WHERE request_id = ? OR (parent_key = ? AND status IN ('FAILED_FINAL', 'FAILED_RETRYABLE'))`, key, key); err != nil {
				return idempotency.ClaimResult{}, mapErr(err)
			}
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO idempotency_replay (request_id, reason, operator, prior_status, source)
 VALUES (?, ?, ?, ?, ?)`, key, rp.Reason, rp.Operator, string(rec.Status), rp.Source)
		return idempotency.ClaimResult{}, mapErr(err)
	})
	return prior, err
}

// Replays lists the audit rows of key, oldest first.
func (s *Store) Replays(ctx context.Context, key string) ([]idempotency.Replay, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT request_id, reason, operator, prior_status, source, created_at
 FROM idempotency_replay WHERE request_id = ? ORDER BY id`, key)
	if err != nil {
		return nil, fmt.Errorf("replays: %w", mapErr(err))
	}
	defer rows.Close()
	var out []idempotency.Replay
	for rows.Next() {
		var r idempotency.Replay
		var st string
		if err := rows.Scan(&r.Key, &r.Reason, &r.Operator, &st, &r.Source, &r.CreatedAt); err != nil {
			return nil, mapErr(err)
		}
		r.PriorStatus = idempotency.Status(st)
		out = append(out, r)
	}
	return out, mapErr(rows.Err())
}

// AddStats adds per-minute counters.
func (s *Store) AddStats(ctx context.Context, rows []idempotency.StatRow) error {
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
	_, err := s.db.ExecContext(ctx, q.String(), args...)
	return mapErr(err)
}

// Stats reads the counters from since on.
func (s *Store) Stats(ctx context.Context, since time.Time) ([]idempotency.StatRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT minute, name, count FROM idempotency_stats WHERE minute >= ?
 ORDER BY minute, name`, since.UTC())
	if err != nil {
		return nil, fmt.Errorf("stats: %w", mapErr(err))
	}
	defer rows.Close()
	var out []idempotency.StatRow
	for rows.Next() {
		var r idempotency.StatRow
		if err := rows.Scan(&r.Minute, &r.Name, &r.Count); err != nil {
			return nil, mapErr(err)
		}
		out = append(out, r)
	}
	return out, mapErr(rows.Err())
}
