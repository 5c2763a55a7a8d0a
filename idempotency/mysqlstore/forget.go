package mysqlstore

import (
	"context"

	"github.com/idemgate/idemgate/idempotency/driver"
)

var _ driver.Forgetter = (*Store)(nil)

// Forget evicts key's record (driver.ApplyForget) under the row lock, with
// its step records, and writes the audit row in the same transaction.
func (s *Store) Forget(ctx context.Context, key string, rp driver.Replay) (prior, after driver.Record, err error) {
	err = s.txRetry(ctx, func(tx *txn) error {
		prior, after = driver.Record{}, driver.Record{} // nothing of an aborted run is answered
		rec, now, err := readNow(ctx, tx, lockedSQL, key)
		if err != nil {
			return err
		}
		prior = rec
		if err := driver.ApplyForget(&rec, rp, now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE idempotency_record SET status = ?, fence = ?, attempt = 0,
 lease_owner = '', lease_try = 0, lease_until = NULL, sweep_after = NULL, retry_after = NULL, result_ref = '', last_error_code = '',
 last_error = '', finish = '', steps = NULL, updated_at = NOW(3) WHERE request_id = ?`,
			string(rec.Status), rec.Fence, key); err != nil {
			return mapErr(err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM idempotency_record WHERE parent_key = ?`, key); err != nil {
			return mapErr(err)
		}
		after = rec
		_, err = tx.ExecContext(ctx, `INSERT INTO idempotency_replay (request_id, reason, operator, prior_status, source)
 VALUES (?, ?, ?, ?, ?)`, key, rp.Reason, rp.Operator, string(prior.Status), rp.Source)
		return mapErr(err)
	})
	return prior, after, err
}
