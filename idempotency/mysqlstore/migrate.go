package mysqlstore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrate applies the embedded migrations that have not run yet, in name
// order, and returns the ones it applied. It is idempotent and safe to run
// from several processes at once (a named lock serialises them), and safe to
// run again after one failed half-way (a lock wait behind traffic, a lost
// connection): every statement is guarded (guard), so what a failed run
// applied is skipped and the rest applied.
func (s *Store) Migrate(ctx context.Context) ([]string, error) { return s.migrateTo(ctx, "") }

// migrateTo applies the pending migrations up to last ("" for all).
func (s *Store) migrateTo(ctx context.Context, last string) ([]string, error) {
	pending, err := migrationFiles()
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	sess, err := s.db.Session(ctx) // GET_LOCK belongs to a session: keep one
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", mapErr(err))
	}
	defer sess.Close()
	var got int
	if err := sess.QueryRowContext(ctx, `SELECT COALESCE(GET_LOCK('idemgate_migrate', 30), 0)`).Scan(&got); err != nil || got != 1 {
		return nil, fmt.Errorf("migrate: could not take the migration lock (got %d): %v", got, err)
	}
	defer sess.ExecContext(context.WithoutCancel(ctx), `SELECT RELEASE_LOCK('idemgate_migrate')`) //nolint:errcheck // the session ends anyway
	if _, err := sess.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS idempotency_schema_migrations (
 version VARCHAR(128) NOT NULL PRIMARY KEY, applied_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)) ENGINE=InnoDB`); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	var applied []string
	for _, m := range pending {
		if last != "" && m.version > last {
			break
		}
		var n int
		if err := sess.QueryRowContext(ctx, `SELECT COUNT(*) FROM idempotency_schema_migrations WHERE version = ?`, m.version).Scan(&n); err != nil {
			return applied, fmt.Errorf("migrate %s: %w", m.version, err)
		}
		if n > 0 {
			continue
		}
		for i, st := range m.steps {
			if done, err := st.applied(ctx, sess); err != nil || done {
				if err != nil {
					return applied, fmt.Errorf("migrate %s, statement %d: %w", m.version, i+1, err)
				}
				continue
			}
			if _, err := sess.ExecContext(ctx, st.sql); err != nil {
				return applied, fmt.Errorf("migrate %s, statement %d: %w", m.version, i+1, err)
			}
		}
		if _, err := sess.ExecContext(ctx, `INSERT INTO idempotency_schema_migrations (version) VALUES (?)`, m.version); err != nil {
			return applied, fmt.Errorf("migrate %s: %w", m.version, err)
		}
		applied = append(applied, m.version)
	}
	return applied, nil
}

// migration is one embedded file, its statements classified.
type migration struct {
	version string
	steps   []step
}

// migrationFiles reads and classifies every embedded migration before any
// runs: a statement without a guard stops Migrate having changed nothing.
func migrationFiles() ([]migration, error) {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []migration
	for _, name := range names {
		body, err := migrations.ReadFile(name)
		if err != nil {
			return nil, err
		}
		m := migration{version: strings.TrimSuffix(strings.TrimPrefix(name, "migrations/"), ".sql")}
		for i, text := range statements(string(body)) {
			st, err := classify(text)
			if err != nil {
				return nil, fmt.Errorf("%s, statement %d: %w", m.version, i+1, err)
			}
			m.steps = append(m.steps, st)
		}
		out = append(out, m)
	}
	return out, nil
}

// step is one statement and what shows it already ran: the column or index
// it adds (kind "column", "index"), or nothing for a statement that is its
// own guard ("create": CREATE TABLE IF NOT EXISTS; "data": an UPDATE written
// to change nothing the second time, as its migration's comment says).
type step struct {
	sql, kind, table, name string
}

// Both MariaDB and MySQL 8 read these; neither has ADD COLUMN IF NOT EXISTS
// and CREATE INDEX IF NOT EXISTS in common, so the guards ask
// information_schema.
var (
	addColumnRe   = regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+(\w+)\s+ADD\s+COLUMN\s+(\w+)\s`)
	createIndexRe = regexp.MustCompile(`(?is)^CREATE\s+INDEX\s+(\w+)\s+ON\s+(\w+)\s*\(`)
	createTableRe = regexp.MustCompile(`(?is)^CREATE\s+TABLE\s+IF\s+NOT\s+EXISTS\s+\w+\s*\(`)
	updateRe      = regexp.MustCompile(`(?is)^UPDATE\s`)
	secondAddRe   = regexp.MustCompile(`(?i),\s*(ADD|DROP|MODIFY|CHANGE|ALTER|RENAME)\s`)
)

func classify(text string) (step, error) {
	switch {
	case createTableRe.MatchString(text):
		return step{sql: text, kind: "create"}, nil
	case addColumnRe.MatchString(text):
		if secondAddRe.MatchString(text) {
			return step{}, fmt.Errorf("an ALTER TABLE must add one column, so that its guard covers all of it: %.60q", text)
		}
		m := addColumnRe.FindStringSubmatch(text)
		return step{sql: text, kind: "column", table: m[1], name: m[2]}, nil
	case createIndexRe.MatchString(text):
		m := createIndexRe.FindStringSubmatch(text)
		return step{sql: text, kind: "index", table: m[2], name: m[1]}, nil
	case updateRe.MatchString(text):
		return step{sql: text, kind: "data"}, nil
	}
	return step{}, fmt.Errorf("no guard for this statement (CREATE TABLE IF NOT EXISTS, one ADD COLUMN, CREATE INDEX or UPDATE): %.60q", text)
}

// applied reports whether st's column or index exists already, under the
// store's table names.
func (st step) applied(ctx context.Context, sess *session) (bool, error) {
	var q string
	switch st.kind {
	case "column":
		q = `SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? AND column_name = ?`
	case "index":
		q = `SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ? AND index_name = ?`
	default:
		return false, nil
	}
	var n int
	// The names are arguments, which sess does not rewrite: the table's is
	// rewritten here.
	if err := sess.QueryRowContext(ctx, q, sess.sql(st.table), st.name).Scan(&n); err != nil {
		return false, mapErr(err)
	}
	return n > 0, nil
}

// statements splits a migration on semicolons that end a line, dropping
// comment-only lines; the migrations are plain DDL without procedures.
func statements(sqlText string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(sqlText, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(t, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}
