package mysqlstore

import (
	"context"
	"fmt"
)

// PurgeStatement is one statement of the purge with arguments to explain it
// with, and the index each table it reads must be read by.
type PurgeStatement struct {
	Name  string
	SQL   string
	Args  []any
	Index map[string]string // table or alias in EXPLAIN → key
}

// PurgeStatements are the purge's statements as it runs them, with ids and
// keys as the values of their lists.
func PurgeStatements(ids []any, keys []any) []PurgeStatement {
	const age = int64(30 * 24 * 3600 * 1e6)
	with := func(list []any, more ...any) []any { return append(append([]any{}, list...), more...) }
	record := map[string]string{"idempotency_record": "PRIMARY"}
	return []PurgeStatement{
		{"candidates", purgeCandidatesSQL, []any{age, 50, age, 50, 50},
			map[string]string{"idempotency_record": "idx_status_updated"}},
		{"lock", fmt.Sprintf(purgeLockSQL, marks(len(keys))), with(keys, age),
			map[string]string{"idempotency_record": "uniq_request_id"}},
		{"steps", fmt.Sprintf(purgeStepsSQL, marks(len(keys))), with([]any{age}, keys...),
			map[string]string{"idempotency_record": "idx_parent_key"}},
		{"audit", fmt.Sprintf(purgeAuditSQL, marks(len(keys))), with(keys, age),
			map[string]string{"idempotency_replay": "idx_replay_request_id"}},
		{"delete", fmt.Sprintf(purgeDeleteSQL, marks(len(ids))), ids, record},
		{"retire", fmt.Sprintf(purgeRetireSQL, marks(len(ids))), ids, record},
		{"tombstones", purgeTombsSQL, []any{tombPrefix + "SUCCEEDED", age, 50},
			map[string]string{"idempotency_record": "idx_status_updated"}},
		{"delete-audit", fmt.Sprintf(purgeDeleteAuditSQL, marks(len(ids))), ids,
			map[string]string{"idempotency_replay": "PRIMARY"}},
		{"orphans", purgeOrphansSQL, []any{age, 50},
			map[string]string{"rp": "idx_replay_created", "r": "uniq_request_id"}},
		{"stats", purgeStatsSQL, []any{age, 50}, map[string]string{"idempotency_stats": "PRIMARY"}},
	}
}

// MigrateTo applies the pending migrations up to version last.
func (s *Store) MigrateTo(ctx context.Context, last string) ([]string, error) {
	return s.migrateTo(ctx, last)
}

// Migration is one embedded migration's version and statements, as Migrate
// runs them (default table names).
type Migration struct {
	Version    string
	Statements []string
}

// Migrations lists the embedded migrations.
func Migrations() ([]Migration, error) {
	ms, err := migrationFiles()
	var out []Migration
	for _, m := range ms {
		mm := Migration{Version: m.version}
		for _, st := range m.steps {
			mm.Statements = append(mm.Statements, st.sql)
		}
		out = append(out, mm)
	}
	return out, err
}

// Classify is classify's verdict on one statement.
func Classify(sql string) error { _, err := classify(sql); return err }

// SQL rewrites a statement with the store's table names.
func (s *Store) SQL(q string) string { return s.db.sql(q) }
