package cli

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgate/idemgate/idempotency"
)

// createDatabase creates the database dsn names unless it exists, and
// reports whether it created it (`main migrate --create-database`).
func createDatabase(ctx context.Context, dsn string) (bool, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return false, errors.New("create database: MYSQL_DSN is not a valid go-sql-driver DSN") // the driver's message may quote the password
	}
	name := cfg.DBName
	if name == "" {
		return false, errors.New("create database: MYSQL_DSN names no database (…/DBNAME)")
	}
	cfg.DBName = "" // connect to the server, not to the database that may be missing
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return false, fmt.Errorf("create database %s: %w", name, err)
	}
	defer db.Close()
	res, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+quoteIdent(name))
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me): // the server answered: a refusal, not an outage
		return false, fmt.Errorf("create database %s: %w", name, err)
	case err != nil:
		return false, fmt.Errorf("create database %s: %w: %w", name, idempotency.ErrStoreUnavailable, err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// quoteIdent quotes a MySQL identifier: backticks, doubled inside.
func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
