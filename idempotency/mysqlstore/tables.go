package mysqlstore

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Tables names the store's tables; an empty field keeps its default. The
// statements and the migrations are written with the defaults and rewritten
// once per statement text when a name differs (pool).
type Tables struct {
	Record     string // idempotency_record
	Replay     string // idempotency_replay
	Stats      string // idempotency_stats
	Migrations string // idempotency_schema_migrations
}

// DefaultTables are the names the migrations are written with.
var DefaultTables = Tables{Record: "idempotency_record", Replay: "idempotency_replay",
	Stats: "idempotency_stats", Migrations: "idempotency_schema_migrations"}

// ErrTableName: a table name in Options is not one the store accepts.
var ErrTableName = errors.New("mysqlstore: bad table name")

// tableName is an unquoted MySQL identifier of the safe subset: it is
// spliced into statements, so nothing else may pass.
var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

func (t Tables) pairs() [][2]string {
	return [][2]string{{"Record", t.Record}, {"Replay", t.Replay}, {"Stats", t.Stats}, {"Migrations", t.Migrations}}
}

// resolve fills the defaults and checks every name: a safe identifier,
// and no two alike.
func (t Tables) resolve() (Tables, error) {
	d := DefaultTables.pairs()
	out := make([]string, 4)
	seen := map[string]string{}
	for i, p := range t.pairs() {
		name := p[1]
		if name == "" {
			name = d[i][1]
		}
		if !tableName.MatchString(name) {
			return Tables{}, fmt.Errorf("%w: Tables.%s %q: want letters, digits and _ (not first a digit), at most 64",
				ErrTableName, p[0], name)
		}
		if other, dup := seen[strings.ToLower(name)]; dup {
			return Tables{}, fmt.Errorf("%w: Tables.%s and Tables.%s are both %q", ErrTableName, other, p[0], name)
		}
		seen[strings.ToLower(name)] = p[0]
		out[i] = name
	}
	return Tables{Record: out[0], Replay: out[1], Stats: out[2], Migrations: out[3]}, nil
}

// replacer rewrites the default names into t's; nil when t is the default.
func (t Tables) replacer() *strings.Replacer {
	if t == DefaultTables {
		return nil
	}
	var args []string
	for i, p := range DefaultTables.pairs() {
		args = append(args, p[1], t.pairs()[i][1])
	}
	return strings.NewReplacer(args...)
}

// pool is the pool as the store uses it: every statement's table names
// rewritten. Only these methods exist, so no statement can bypass it.
type pool struct {
	db *sql.DB
	r  *strings.Replacer
}

func (c pool) sql(q string) string {
	if c.r == nil {
		return q
	}
	return c.r.Replace(q)
}

func (c pool) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return c.db.ExecContext(ctx, c.sql(q), args...)
}

func (c pool) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return c.db.QueryContext(ctx, c.sql(q), args...)
}

func (c pool) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return c.db.QueryRowContext(ctx, c.sql(q), args...)
}

// BeginTx starts a transaction on a connection of its own, which the
// transaction's end returns to the pool, or closes (txn.end).
func (c pool) BeginTx(ctx context.Context, o *sql.TxOptions) (*txn, error) {
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := conn.BeginTx(ctx, o)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return &txn{tx: tx, conn: conn, sql: c.sql}, nil
}

// Session is one connection of the pool (GET_LOCK belongs to a session).
func (c pool) Session(ctx context.Context) (*session, error) {
	sc, err := c.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &session{c: sc, sql: c.sql}, nil
}

func (c pool) PingContext(ctx context.Context) error { return c.db.PingContext(ctx) }
func (c pool) Close() error                          { return c.db.Close() }

// txn is a transaction of pool, on its own connection.
type txn struct {
	tx   *sql.Tx
	conn *sql.Conn
	sql  func(string) string
}

func (t *txn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, t.sql(q), args...)
}

func (t *txn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, t.sql(q), args...)
}

func (t *txn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.sql(q), args...)
}

func (t *txn) Commit() error   { return t.end(t.tx.Commit()) }
func (t *txn) Rollback() error { return t.end(t.tx.Rollback()) }

// end releases the transaction's connection after its COMMIT or ROLLBACK
// answered err. A failed end is not known to have ended the transaction:
// a COMMIT a Galera node refuses with 1047 (outside the primary component,
// or wsrep_reject_queries) leaves it open, and database/sql would pool the
// connection with it, so that later autocommit statements run inside it,
// answered as successes, then committed by the connection's next
// transaction or lost with the connection. Such a connection is closed
// instead (database/sql closes one whose use returns driver.ErrBadConn),
// which makes the server roll the transaction back.
func (t *txn) end(err error) error {
	if err != nil {
		_ = t.conn.Raw(func(any) error { return sqldriver.ErrBadConn })
	}
	_ = t.conn.Close()
	return err
}

// session is one connection of pool.
type session struct {
	c   *sql.Conn
	sql func(string) string
}

func (s *session) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return s.c.ExecContext(ctx, s.sql(q), args...)
}

func (s *session) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return s.c.QueryRowContext(ctx, s.sql(q), args...)
}

func (s *session) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return s.c.QueryContext(ctx, s.sql(q), args...)
}

func (s *session) Close() error { return s.c.Close() }
