package mysqlstore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrate applies the embedded migrations that have not run yet, in name
// order, and returns the ones it applied. It is idempotent and safe to run
// from several processes at once (a named lock serialises them).
func (s *Store) Migrate(ctx context.Context) ([]string, error) {
	conn, err := s.db.Conn(ctx) // GET_LOCK belongs to a session: keep one
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", mapErr(err))
	}
	defer conn.Close()
	var got int
	if err := conn.QueryRowContext(ctx, `SELECT COALESCE(GET_LOCK('idemgate_migrate', 30), 0)`).Scan(&got); err != nil || got != 1 {
		return nil, fmt.Errorf("migrate: could not take the migration lock (got %d): %v", got, err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT RELEASE_LOCK('idemgate_migrate')`) //nolint:errcheck // the session ends anyway
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS idempotency_schema_migrations (
 version VARCHAR(128) NOT NULL PRIMARY KEY, applied_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)) ENGINE=InnoDB`); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	sort.Strings(names)
	var applied []string
	for _, name := range names {
		version := strings.TrimSuffix(strings.TrimPrefix(name, "migrations/"), ".sql")
		var n int
		if err := conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM idempotency_schema_migrations WHERE version = ?`, version).Scan(&n); err != nil {
			return applied, fmt.Errorf("migrate %s: %w", version, err)
		}
		if n > 0 {
			continue
		}
		body, err := migrations.ReadFile(name)
		if err != nil {
			return applied, fmt.Errorf("migrate %s: %w", version, err)
		}
		for _, stmt := range statements(string(body)) {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return applied, fmt.Errorf("migrate %s: %w", version, err)
			}
		}
		if _, err := conn.ExecContext(ctx, `INSERT INTO idempotency_schema_migrations (version) VALUES (?)`, version); err != nil {
			return applied, fmt.Errorf("migrate %s: %w", version, err)
		}
		applied = append(applied, version)
	}
	return applied, nil
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
