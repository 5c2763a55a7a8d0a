package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgate/idemgate/idempotency/idemtest"
	"github.com/idemgate/idemgate/idempotency/mysqlstore"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// custom are table names unlike the defaults, for the cases that run
// under both.
var custom = mysqlstore.Tables{Record: "acme_idem_record", Replay: "acme_idem_audit", Stats: "acme_idem_stats",
	Migrations: "acme_idem_versions"}

// schema is the database's tables, columns (in order, with their types) and
// indexes, to compare one migrated database with another.
func schema(t *testing.T, db *sql.DB) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT table_name, column_name, column_type, is_nullable, COALESCE(column_default, 'NULL') FROM information_schema.columns
 WHERE table_schema = DATABASE() ORDER BY table_name, ordinal_position`,
		`SELECT table_name, index_name, seq_in_index, column_name, non_unique FROM information_schema.statistics
 WHERE table_schema = DATABASE() ORDER BY table_name, index_name, seq_in_index`,
	} {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var a, c, d, e, f string
			if err := rows.Scan(&a, &c, &d, &e, &f); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(&b, a, c, d, e, f)
		}
		rows.Close()
	}
	return b.String()
}

func freshStore(t *testing.T, tables mysqlstore.Tables, params ...string) (*mysqlstore.Store, *sql.DB) {
	t.Helper()
	dsn := testenv.FreshMySQLDSN(t)
	for _, p := range params {
		k, v, _ := strings.Cut(p, "=")
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params[k] = v
		dsn = cfg.FormatDSN()
	}
	s, err := mysqlstore.Open(dsn, mysqlstore.Options{Tables: tables})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, s.DB()
}

// reference is the schema of a database migrated in one clean run.
func reference(t *testing.T, tables mysqlstore.Tables) string {
	t.Helper()
	s, db := freshStore(t, tables)
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return schema(t, db)
}

// Every migration, cut after each of its statements (applied by hand, as a
// failed run leaves it, its version unrecorded), then migrated: the run
// finishes clean and the schema is the clean run's (issue 20 case 9).
func TestMigrateAfterAPartialRun(t *testing.T) {
	ms, err := mysqlstore.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, tables := range []mysqlstore.Tables{{}, custom} {
		want := reference(t, tables)
		for i, m := range ms {
			for cut := 1; cut <= len(m.Statements); cut++ {
				t.Run(fmt.Sprintf("%s/%s/after %d of %d", map[bool]string{true: "default names", false: "other names"}[tables == mysqlstore.Tables{}], m.Version, cut, len(m.Statements)), func(t *testing.T) {
					ctx := context.Background()
					s, db := freshStore(t, tables)
					if i > 0 {
						if _, err := s.MigrateTo(ctx, ms[i-1].Version); err != nil {
							t.Fatal(err)
						}
					}
					for _, stmt := range m.Statements[:cut] {
						if _, err := db.Exec(s.SQL(stmt)); err != nil {
							t.Fatalf("by hand: %v", err)
						}
					}
					applied, err := s.Migrate(ctx)
					if err != nil || len(applied) != len(ms)-i || applied[0] != m.Version {
						t.Fatalf("re-run applied %v, %v", applied, err)
					}
					if got := schema(t, db); got != want {
						t.Fatalf("schema after the re-run:\n%s\nwant:\n%s", got, want)
					}
				})
			}
		}
	}
}

// The failure of issue 20 case 9 as it happens: the second statement of 006
// waits behind a transaction that holds idempotency_replay and times out;
// the first (a column) is in. Then the traffic ends and migrate runs again.
func TestMigrateAfterALockWaitMidMigration(t *testing.T) {
	ctx := context.Background()
	s, db := freshStore(t, mysqlstore.Tables{}, "lock_wait_timeout=1")
	if _, err := s.MigrateTo(ctx, "005_finish_and_deferral"); err != nil {
		t.Fatal(err)
	}
	traffic, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := traffic.Exec(`SELECT COUNT(*) FROM idempotency_replay`); err != nil { // holds its metadata lock
		t.Fatal(err)
	}
	_, err = s.Migrate(ctx)
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1205 || !strings.Contains(err.Error(), "006_traceparent_and_purge, statement 2") {
		t.Fatalf("migrate behind traffic: %v", err)
	}
	var col int
	if err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
 AND table_name = 'idempotency_record' AND column_name = 'traceparent'`).Scan(&col); err != nil || col != 1 {
		t.Fatalf("the first statement did not land: %d %v", col, err)
	}
	if err := traffic.Rollback(); err != nil {
		t.Fatal(err)
	}
	ms, err := mysqlstore.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	applied, err := s.Migrate(ctx)
	if err != nil || len(applied) != len(ms)-5 || applied[0] != "006_traceparent_and_purge" {
		t.Fatalf("re-run: %v, %v", applied, err)
	}
	if got, want := schema(t, db), reference(t, mysqlstore.Tables{}); got != want {
		t.Fatalf("schema:\n%s\nwant:\n%s", got, want)
	}
}

// Every statement of every migration has a guard; one without is refused
// before anything runs.
func TestMigrationStatementsAreGuarded(t *testing.T) {
	if _, err := mysqlstore.Migrations(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sql string
		ok  bool
	}{
		{"CREATE TABLE IF NOT EXISTS x (a INT)", true},
		{"ALTER TABLE idempotency_record ADD COLUMN a INT NOT NULL DEFAULT 0", true},
		{"CREATE INDEX idx_a ON idempotency_record (a)", true},
		{"UPDATE idempotency_record SET a = 1 WHERE a = 0", true},
		{"CREATE TABLE x (a INT)", false},
		{"ALTER TABLE idempotency_record ADD COLUMN a INT, ADD COLUMN b INT", false},
		{"ALTER TABLE idempotency_record ADD COLUMN a INT, DROP COLUMN b", false},
		{"ALTER TABLE idempotency_record DROP COLUMN a", false},
		{"DROP TABLE idempotency_record", false},
		{"ALTER TABLE idempotency_record MODIFY a BIGINT", false},
	} {
		if err := mysqlstore.Classify(c.sql); (err == nil) != c.ok {
			t.Errorf("%q: %v, want ok %v", c.sql, err, c.ok)
		}
	}
}

// The conformance suites on tables of other names: no statement may name a
// default table (none exists in this database, so one that did would fail).
func TestConformanceOtherTableNames(t *testing.T) {
	migrated := func(t *testing.T) (*mysqlstore.Store, *sql.DB) {
		s, db := freshStore(t, custom)
		if _, err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s, db
	}
	s, db := migrated(t)
	idemtest.Run(t, idemtest.StoreOnly(s))
	// Each suite on a database of its own, as with the default names; as
	// subtests, which the race stage's -run '/Race64OneWinner' leaves out.
	t.Run("Maintenance", func(t *testing.T) {
		m, _ := migrated(t)
		idemtest.RunMaintenance(t, m)
	})
	t.Run("Purge", func(t *testing.T) {
		p, _ := migrated(t)
		idemtest.RunPurge(t, p)
	})
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()
 AND table_name LIKE 'idempotency%'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d tables under the default names, %v", n, err)
	}
	if err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()
 AND table_name LIKE 'acme_idem_%'`).Scan(&n); err != nil || n != 4 {
		t.Fatalf("%d tables under the given names, %v", n, err)
	}
}

// A bad table name is a clear error and nothing reaches the database.
func TestBadTableNames(t *testing.T) {
	dsn := testenv.FreshMySQLDSN(t)
	for _, c := range []struct {
		name   string
		tables mysqlstore.Tables
		says   string
	}{
		{"a hyphen", mysqlstore.Tables{Record: "idem-record"}, `Tables.Record "idem-record"`},
		{"SQL", mysqlstore.Tables{Replay: "x; DROP TABLE y"}, "Tables.Replay"},
		{"a quote", mysqlstore.Tables{Stats: "a`b"}, "Tables.Stats"},
		{"a leading digit", mysqlstore.Tables{Migrations: "1st"}, "Tables.Migrations"},
		{"a schema", mysqlstore.Tables{Record: "other.idem"}, "Tables.Record"},
		{"too long", mysqlstore.Tables{Record: strings.Repeat("r", 65)}, "at most 64"},
		{"two alike", mysqlstore.Tables{Record: "idem", Replay: "IDEM"}, "Tables.Record and Tables.Replay"},
		{"a default taken", mysqlstore.Tables{Stats: "idempotency_record"}, "Tables.Record and Tables.Stats"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := mysqlstore.Open(dsn, mysqlstore.Options{Tables: c.tables})
			if !errors.Is(err, mysqlstore.ErrTableName) || !strings.Contains(err.Error(), c.says) || s != nil {
				t.Fatalf("Open: %v", err)
			}
			db, err := sql.Open("mysql", dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if s, err := mysqlstore.New(db, mysqlstore.Options{Tables: c.tables}); !errors.Is(err, mysqlstore.ErrTableName) || s != nil {
				t.Fatalf("New: %v", err)
			}
			var n int
			if err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()`).Scan(&n); err != nil || n != 0 {
				t.Fatalf("%d tables, %v", n, err)
			}
		})
	}
}

// New takes the caller's pool if it has the settings the store relies on,
// and says which one is missing otherwise.
func TestNewChecksThePool(t *testing.T) {
	base, err := mysql.ParseDSN(testenv.FreshMySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	good := func() *mysql.Config {
		c := base.Clone()
		c.ParseTime, c.ClientFoundRows = true, true
		c.Params = map[string]string{"time_zone": "'+00:00'"}
		return c
	}
	for _, c := range []struct {
		name string
		cfg  func() *mysql.Config
		says string
	}{
		{"all set", good, ""},
		{"no parseTime", func() *mysql.Config { c := good(); c.ParseTime = false; return c }, "parseTime=true"},
		{"another loc", func() *mysql.Config {
			c := good()
			c.Loc, _ = timeLocation("Asia/Shanghai")
			return c
		}, "loc=UTC"},
		{"another time zone", func() *mysql.Config { c := good(); c.Params["time_zone"] = "'+08:00'"; return c }, "time_zone"},
		{"no clientFoundRows", func() *mysql.Config { c := good(); c.ClientFoundRows = false; return c }, "clientFoundRows=true"},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, err := sql.Open("mysql", c.cfg().FormatDSN())
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			s, err := mysqlstore.New(db, mysqlstore.Options{Tables: custom})
			if c.says != "" {
				if !errors.Is(err, mysqlstore.ErrSettings) || !strings.Contains(err.Error(), c.says) {
					t.Fatalf("%v, want one naming %s", err, c.says)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			idemtest.Run(t, idemtest.StoreOnly(s))
			if err := s.Close(); err != nil || db.Ping() != nil {
				t.Fatalf("Close closed the caller's pool: %v", err)
			}
		})
	}
}

func timeLocation(name string) (*time.Location, error) { return time.LoadLocation(name) }
