// Package testenv connects tests to the real MariaDB and Redis. Outside CI a
// missing service skips the test; with CI=true (or IDEMGATE_INTEGRATION=1) it
// fails it, so that a green run always means the integration tests ran.
package testenv

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/internal/dev/proc"
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

// MySQLDSN returns the DSN of a database of the test's own on the server
// IDEMGATE_TEST_MYSQL_DSN names (default root@tcp(127.0.0.1:3306)/idemgate_test),
// named after its database with a per-run suffix, so that two `go test ./...`
// at once on one server never share tables; it is dropped when the test
// ends. (It was one database per test process, which no hook could drop
// when the process ended: 7 of them stayed on the server for 2 hours.)
func MySQLDSN(t testing.TB) string {
	t.Helper()
	return FreshMySQLDSN(t)
}

// runPrefix is what every test database name starts with, after the base
// name: "<base>_r<unix seconds>_f<random>".
const runPrefix = "_r"

// reapAfter: only a killed run leaves a database behind (t.Cleanup never
// ran); the next run drops those this old, which no live test still uses.
const reapAfter = 2 * time.Hour

func baseDSN() (*mysql.Config, error) {
	dsn := os.Getenv("IDEMGATE_TEST_MYSQL_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/idemgate_test"
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("IDEMGATE_TEST_MYSQL_DSN: %w", err)
	}
	if cfg.DBName == "" {
		cfg.DBName = "idemgate_test"
	}
	return cfg, nil
}

// server is the test server, checked once per process: it answers, and
// the databases killed runs left are reaped.
var server struct {
	once sync.Once
	cfg  *mysql.Config
	err  error
}

var errUnreachable = errors.New("unreachable")

func checkServer() (*mysql.Config, error) {
	server.once.Do(func() {
		cfg, err := baseDSN()
		if err != nil {
			server.err = err
			return
		}
		admin := *cfg
		admin.DBName = ""
		admin.Timeout = 2 * time.Second
		db, err := sql.Open("mysql", admin.FormatDSN())
		if err != nil {
			server.err = fmt.Errorf("mysql: %w", err)
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := db.PingContext(ctx); err != nil {
			server.err = fmt.Errorf("%w: %s: %w", errUnreachable, cfg.Addr, err)
			return
		}
		reapRunDBs(ctx, db, cfg.DBName, time.Now().Add(-reapAfter))
		server.cfg = cfg
	})
	return server.cfg, server.err
}

// reapRunDBs drops the per-run databases of base created before cutoff.
func reapRunDBs(ctx context.Context, db *sql.DB, base string, cutoff time.Time) {
	rows, err := db.QueryContext(ctx, "SHOW DATABASES")
	if err != nil {
		return
	}
	var old []string
	for rows.Next() {
		var n string
		if rows.Scan(&n) != nil {
			continue
		}
		rest, ok := strings.CutPrefix(n, base+runPrefix)
		if !ok {
			continue
		}
		secs, _, _ := strings.Cut(rest, "_")
		if ts, err := strconv.ParseInt(secs, 10, 64); err == nil && time.Unix(ts, 0).Before(cutoff) {
			old = append(old, n)
		}
	}
	rows.Close()
	for _, n := range old {
		_, _ = db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+n+"`")
	}
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
// end): MySQLDSN, under the name tests that scan whole tables use.
func FreshMySQLDSN(t testing.TB) string {
	t.Helper()
	dsn, name, db := absentDB(t)
	if _, err := db.Exec("CREATE DATABASE `" + name + "`"); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// AbsentMySQLDSN returns the DSN of a database that does not exist yet, for
// tests of what creates it; whatever creates it, it is dropped at the end.
// db is a connection to the server (no database selected), closed at the end.
func AbsentMySQLDSN(t testing.TB) (dsn string, db *sql.DB) {
	t.Helper()
	dsn, _, db = absentDB(t)
	return dsn, db
}

// absentDB names a database that does not exist yet and returns its DSN,
// its name and a connection to the server, which drops it at the end.
func absentDB(t testing.TB) (dsn, name string, db *sql.DB) {
	t.Helper()
	base, err := checkServer()
	if errors.Is(err, errUnreachable) {
		unavailable(t, "MariaDB/MySQL", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg := *base
	cfg.DBName = fmt.Sprintf("%s%s%d_f%s", base.DBName, runPrefix, time.Now().Unix(), proc.Nonce()[:12])
	admin := cfg
	admin.DBName = ""
	db, err = sql.Open("mysql", admin.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	name = cfg.DBName
	t.Cleanup(func() {
		_, _ = db.Exec("DROP DATABASE IF EXISTS `" + name + "`")
		db.Close()
	})
	return cfg.FormatDSN(), name, db
}
