// Package testenv connects tests to the real MariaDB and Redis. Outside CI a
// missing service skips the test; with CI=true (or IDEMGATE_INTEGRATION=1) it
// fails it, so that a green run always means the integration tests ran.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

// Required reports whether a missing service must fail the test.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("IDEMGATE_INTEGRATION") == "1"
}

func unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if Required() {
		t.Fatalf("%s is required (CI=true) but unavailable: %v", what, err)
	}
	t.Skipf("%s unavailable (set CI=true to make this a failure): %v", what, err)
}

// MySQLDSN returns the DSN of the test database, creating the database if
// needed. IDEMGATE_TEST_MYSQL_DSN overrides the default
// root@tcp(127.0.0.1:3306)/idemgate_test.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("IDEMGATE_TEST_MYSQL_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/idemgate_test"
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("IDEMGATE_TEST_MYSQL_DSN: %v", err)
	}
	name := cfg.DBName
	cfg.DBName = ""
	cfg.Timeout = 2 * time.Second
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("mysql: %v", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		unavailable(t, "MariaDB/MySQL at "+cfg.Addr, err)
	}
	if _, err := db.ExecContext(ctx, fmt.Sprintf("CREATE DATABASE IF NOT EXISTS `%s`", strings.ReplaceAll(name, "`", ""))); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	return dsn
}

// RedisURL returns the test Redis URL after checking it answers.
// IDEMGATE_TEST_REDIS_URL overrides the default redis://127.0.0.1:6379/15.
func RedisURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("IDEMGATE_TEST_REDIS_URL")
	if u == "" {
		u = "redis://127.0.0.1:6379/15"
	}
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("IDEMGATE_TEST_REDIS_URL: %v", err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		unavailable(t, "Redis at "+opt.Addr, err)
	}
	return u
}

// FreshMySQLDSN creates a database of its own for the test (dropped at the
// end), for tests that scan whole tables, such as the sweeper's.
func FreshMySQLDSN(t testing.TB) string {
	t.Helper()
	dsn := MySQLDSN(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	cfg.DBName = "idemgate_t_" + hex.EncodeToString(b)
	admin := *cfg
	admin.DBName = ""
	db, err := sql.Open("mysql", admin.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE DATABASE `" + cfg.DBName + "`"); err != nil {
		db.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.Exec("DROP DATABASE IF EXISTS `" + cfg.DBName + "`")
		db.Close()
	})
	return cfg.FormatDSN()
}
