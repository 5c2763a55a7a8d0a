package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// New is a store on a pool the caller opened and keeps (its own DSN, pool
// sizes and lifetime: Close leaves it open). The pool must have the
// settings Open forces, which New checks on one connection before it
// returns: parseTime=true and loc=UTC (times read and written as UTC),
// time_zone='+00:00' (NOW(3) and stored times agree) and
// clientFoundRows=true (an UPDATE that matched its row counts as affected
// even when nothing changed, or a fenced write would read as lease lost).
// o's pool sizes are not used; its table names are checked first, and a bad
// one is ErrTableName with nothing sent to the database.
func New(db *sql.DB, o Options) (*Store, error) {
	tables, err := o.Tables.resolve()
	if err != nil {
		return nil, err
	}
	if db == nil {
		return nil, errors.New("mysqlstore: New needs a *sql.DB")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := checkSettings(ctx, db); err != nil {
		return nil, err
	}
	return &Store{db: pool{db: db, r: tables.replacer()}, tables: tables, borrowed: true}, nil
}

// ErrSettings: the pool given to New lacks a setting the store relies on.
var ErrSettings = errors.New("mysqlstore: the *sql.DB lacks a setting the store needs")

// checkSettings reads the settings New requires on one connection of db.
func checkSettings(ctx context.Context, db *sql.DB) error {
	c, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("mysqlstore: %w", mapErr(err))
	}
	defer c.Close()
	var tz string
	var now any // time.Time with parseTime, bytes without
	var skew int
	err = c.QueryRowContext(ctx, `SELECT @@session.time_zone, NOW(3), TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), NOW())`).Scan(&tz, &now, &skew)
	if err != nil {
		return fmt.Errorf("mysqlstore: %w", mapErr(err))
	}
	t, ok := now.(time.Time)
	switch {
	case !ok:
		return fmt.Errorf("%w: open it with parseTime=true", ErrSettings)
	case t.Location() != time.UTC:
		return fmt.Errorf("%w: open it with loc=UTC (it reads times in %s)", ErrSettings, t.Location())
	case skew != 0:
		return fmt.Errorf("%w: the session time_zone is %q; set time_zone='+00:00' in the DSN", ErrSettings, tz)
	}
	// clientFoundRows, on a table of the session's own.
	if _, err := c.ExecContext(ctx, `CREATE TEMPORARY TABLE idemgate_found_rows (x INT)`); err != nil {
		return fmt.Errorf("mysqlstore: checking clientFoundRows needs CREATE TEMPORARY TABLES: %w", mapErr(err))
	}
	defer c.ExecContext(context.WithoutCancel(ctx), `DROP TEMPORARY TABLE IF EXISTS idemgate_found_rows`) //nolint:errcheck // the session's own
	if _, err := c.ExecContext(ctx, `INSERT INTO idemgate_found_rows VALUES (1)`); err != nil {
		return fmt.Errorf("mysqlstore: %w", mapErr(err))
	}
	r, err := c.ExecContext(ctx, `UPDATE idemgate_found_rows SET x = 1`)
	if err != nil {
		return fmt.Errorf("mysqlstore: %w", mapErr(err))
	}
	if n, err := r.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("%w: open it with clientFoundRows=true", ErrSettings)
	}
	return nil
}
