package proc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
)

// EnsureDatabase creates the database dsn names if it does not exist.
func EnsureDatabase(ctx context.Context, dsn string) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return errors.New("MySQL DSN: not a go-sql-driver DSN")
	}
	if cfg.DBName == "" {
		return errors.New("MySQL DSN: needs a database name (it is created if missing)")
	}
	return adminExec(ctx, cfg, "CREATE DATABASE IF NOT EXISTS `"+cfg.DBName+"`")
}

// FreshDatabase creates a database named prefix plus a nonce on the server
// of dsn and returns its DSN, its name and a drop function (which works after
// ctx ended, as a Ctrl-C'd run must still clean up).
func FreshDatabase(ctx context.Context, dsn, prefix string) (string, string, func(), error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", "", nil, errors.New("MySQL DSN: not a go-sql-driver DSN")
	}
	cfg.DBName = prefix + Nonce()
	if err := adminExec(ctx, cfg, "CREATE DATABASE `"+cfg.DBName+"`"); err != nil {
		return "", "", nil, err
	}
	drop := func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = adminExec(c, cfg, "DROP DATABASE IF EXISTS `"+cfg.DBName+"`")
	}
	return cfg.FormatDSN(), cfg.DBName, drop, nil
}

// adminExec runs one statement on cfg's server, outside any database.
func adminExec(ctx context.Context, cfg *mysql.Config, stmt string) error {
	admin := *cfg
	admin.DBName = ""
	if admin.Timeout == 0 {
		admin.Timeout = 3 * time.Second
	}
	db, err := sql.Open("mysql", admin.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(c, stmt); err != nil {
		return fmt.Errorf("MariaDB at %s: %s: %w", cfg.Addr, stmt, err)
	}
	return nil
}
