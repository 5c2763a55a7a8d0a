package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/idemgate/idemgate/idempotency/driver"
)

// tries bounds the store's own runs of a statement or transaction the
// database aborted.
const tries = 5

// ErrNodeNotReady is MySQL error 1047 from a Galera node that is not part
// of the primary component ("WSREP has not yet prepared node for
// application use": it lost its quorum, or is still joining). Nothing was
// written; the store does not try again itself (its pool may hold only
// that node): the engine answers it retryable (store_unavailable), and the
// delivery is retried later, by when the node is back or the client points
// at another.
var ErrNodeNotReady = errors.New("mysqlstore: the database node is not ready (a Galera node outside the primary component)")

// mapped reports that err already carries the store's sentinel.
func mapped(err error) bool {
	for _, s := range []error{ErrDuplicateKey, errTxAborted, driver.ErrInvalid, ErrNodeNotReady} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// AbortsRetried counts the statements and transactions the database aborted
// that the store ran again: InnoDB deadlocks and lock waits, and on a
// Galera cluster the certification conflicts of writes on another node,
// which reach the client as error 1213 at COMMIT (docs/operations.md).
func (s *Store) AbortsRetried() int64 { return s.aborts.Load() }

// exec runs one autocommit statement, and again when the database aborted
// it (1213, 1205). An abort is a definite rollback of the autocommit
// statement (1205 rolls back the statement, here all of it): it changed
// nothing, so running it again is the same conditional statement on the
// rows as they are now, never a write assumed to have landed. Any other
// error (a lost connection, whose statement may or may not have
// committed) is returned at once, mapped: the caller's next step reads the
// record again.
func (s *Store) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	var r sql.Result
	err := s.retryWhile(ctx, 5*time.Millisecond, func(err error) bool { return errors.Is(err, errTxAborted) },
		func() (err error) {
			r, err = s.db.ExecContext(ctx, q, args...)
			return mapErr(err)
		})
	return r, err
}
