package main

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// TestProbeCountsAndSeesOthers runs the probe on a private MariaDB (the
// shared one has other clients): a slice of our own statements is counted
// exactly and clean; a slice in which a connection to another database runs
// a statement, or a connection opens and closes, is not clean.
func TestProbeCountsAndSeesOthers(t *testing.T) {
	dsn := testenv.PrivateMariaDB(t)
	ctx := context.Background()
	p, err := openProbe(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ours := openDB(t, dsn, p.dbName)
	if _, err := ours.ExecContext(ctx, "CREATE TABLE t (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	other := openDB(t, dsn, "")
	if err := other.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	next := 0
	ourWork := func(t *testing.T) {
		for range 3 {
			next++
			if _, err := ours.ExecContext(ctx, "INSERT INTO t VALUES (?)", next); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := ours.ExecContext(ctx, "UPDATE t SET id = -id WHERE id = ?", next); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name      string
		meanwhile func(t *testing.T)
		clean     bool
	}{
		{"only ours", func(*testing.T) {}, true},
		{"another database's connection runs a statement", func(t *testing.T) {
			if _, err := other.ExecContext(ctx, "DO 1"); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"a connection comes and goes", func(t *testing.T) {
			db := openDB(t, dsn, "")
			if err := db.PingContext(ctx); err != nil {
				t.Fatal(err)
			}
			db.Close()
			time.Sleep(50 * time.Millisecond) // let the server drop it from the process list
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := p.begin(ctx); err != nil {
				t.Fatal(err)
			}
			ourWork(t)
			c.meanwhile(t)
			d, why, err := p.end(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if (why == "") != c.clean {
				t.Fatalf("clean = %v (%q), want %v", why == "", why, c.clean)
			}
			if c.clean && (d["Com_insert"] != 3 || d["Com_update"] != 1 || d.Statements() != 4 || d.Others() != 0) {
				t.Errorf("deltas %v: want 3 INSERT, 1 UPDATE, 4 statements, no others", d)
			}
		})
	}
}

// openDB opens a pool on dsn's server and the database db ("": none).
func openDB(t *testing.T, dsn, db string) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = db
	pool, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	return pool
}

// TestPacedExecute offers deliveries open loop: when the server keeps up,
// every one is sent about on time; when it cannot (c = 1, 20 ms each), the
// offer ends with a backlog and the sent ones run late.
func TestPacedExecute(t *testing.T) {
	for _, c := range []struct {
		name       string
		delay      time.Duration
		c          int
		wantAll    bool
		maxLagP50  time.Duration
		minLagLast time.Duration
	}{
		{"keeps up", 0, 8, true, 20 * time.Millisecond, 0},
		{"saturated", 20 * time.Millisecond, 1, false, time.Hour, 50 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(c.delay)
				_, _ = w.Write([]byte(`{"status":"SUCCEEDED","decision":"FIRST"}`))
			}))
			defer srv.Close()
			units := make([]Unit, 40)
			for i := range units {
				units[i] = Unit{Members: []Delivery{{Action: i, Kind: KindFirst, Body: []byte("{}")}}}
			}
			var done atomic.Int64
			// 40 deliveries at one per 5 ms: a 200 ms offer.
			ph := execute(context.Background(), newClient(8, 5*time.Second), 1, PhaseMain, units, []string{srv.URL}, c.c,
				5*time.Millisecond, &done)
			if all := len(ph.Results) == len(units); all != c.wantAll {
				t.Fatalf("sent %d of %d", len(ph.Results), len(units))
			}
			lags := make([]time.Duration, len(ph.Results))
			for i, r := range ph.Results {
				lags[i] = r.Lag
				if r.Class() == "error" {
					t.Fatalf("delivery %d: %s %d", i, r.Err, r.HTTPStatus)
				}
			}
			if l := latStats(lags, 0); l.P50 > c.maxLagP50 || l.Max < c.minLagLast {
				t.Errorf("dispatch lag p50 %s, max %s", l.P50, l.Max)
			}
		})
	}
}

// TestSQLFigures sums the clean slices only, per task, and keeps the
// smallest slice's count.
func TestSQLFigures(t *testing.T) {
	slice := func(tasks int, insert, update, questions int64, foreign string) Slice {
		return Slice{Wall: time.Second, Requests: tasks, Tasks: tasks, Foreign: foreign,
			SQL: Counters{"Com_insert": insert, "Com_update": update, "Questions": questions}}
	}
	for _, c := range []struct {
		name                       string
		slices                     []Slice
		clean                      int
		perTask, minPerTask, other float64
	}{
		{"two clean slices, one with a stats flush", []Slice{slice(10, 20, 30, 51, ""), slice(10, 21, 30, 52, "")},
			2, 5.05, 5, 0},
		{"an unclean slice is left out", []Slice{slice(10, 20, 30, 51, ""), slice(10, 99, 99, 999, "connection 7 ran a statement")},
			1, 5, 5, 0},
		{"other statements are counted apart", []Slice{slice(4, 4, 4, 10, "")}, 1, 2, 2, 1.0 / 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, ok := sqlFigures(PhaseResult{Name: PhaseFirst, Slices: c.slices})
			if !ok || f.Clean != c.clean || f.Statements != c.perTask || f.MinStatements != c.minPerTask || f.Others != c.other {
				t.Errorf("got clean %d, %.3f per task (min %.3f), %.3f others; want %d, %.3f (min %.3f), %.3f",
					f.Clean, f.Statements, f.MinStatements, f.Others, c.clean, c.perTask, c.minPerTask, c.other)
			}
		})
	}
}
