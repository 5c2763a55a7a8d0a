package cli

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/internal/app"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

func TestMigrateCreateDatabase(t *testing.T) {
	dsn, admin := testenv.AbsentMySQLDSN(t)
	setEnv(t, "MYSQL_DSN="+dsn)

	// Without the flag: the hint names it, in the last line. The start line
	// says what the server said, without telling migrate to run itself.
	_, stderr, code := cli("migrate")
	if code != ExitStoreUnavailable || !strings.Contains(lastLine(stderr), "schema_missing") ||
		!strings.Contains(lastLine(stderr), "run `main migrate --create-database`") {
		t.Fatalf("migrate of a missing database: exit %d\n%s", code, stderr)
	}
	startLineSays := func(stderr string) {
		t.Helper()
		store, _ := backendLine(t, stderr)["store_answered"].(string)
		if !strings.Contains(store, "Unknown database") || strings.Contains(store, "main migrate") {
			t.Fatalf("migrate's start line: store_answered %q", store)
		}
	}
	startLineSays(stderr)
	var report struct {
		Created bool     `json:"created_database"`
		Applied []string `json:"applied"`
	}
	for i, want := range []bool{true, false} { // the second run finds it all done
		stdout, stderr, code := cli("migrate", "--create-database")
		if i == 0 {
			startLineSays(stderr)
		}
		if err := json.Unmarshal([]byte(stdout), &report); code != ExitOK || err != nil {
			t.Fatalf("run %d: exit %d, %v\n%s%s", i+1, code, err, stdout, stderr)
		}
		if report.Created != want || (len(report.Applied) == 0) != !want {
			t.Fatalf("run %d: %+v; want created=%v", i+1, report, want)
		}
	}
	var n int
	if err := admin.QueryRow(`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name IN (?, ?, ?)`,
		dbName(t, dsn), app.SchemaTables[0], app.SchemaTables[1], app.SchemaTables[2]).Scan(&n); err != nil || n != 3 {
		t.Fatalf("%d of the schema tables, %v", n, err)
	}
	if stdout, stderr, code := cli("invoke", "--event", uniqueTask(t)); code != ExitOK {
		t.Fatalf("invoke after migrate: exit %d\n%s%s", code, stdout, stderr)
	}
}

// Every command that uses the store, on a database that was never migrated,
// answers schema_missing with the command that fixes it, and runs nothing.
func TestBeforeMigrate(t *testing.T) {
	setEnv(t, "MYSQL_DSN="+testenv.FreshMySQLDSN(t))
	key := strings.Repeat("a", 64)
	for _, args := range [][]string{
		{"invoke", "--event", uniqueTask(t)},
		{"inspect", "--key", key},
		{"replay", "--key", key, "--reason", "r", "--operator", "o"},
		{"sweep"},
		{"stats"},
		{"purge"},
	} {
		t.Run(args[0], func(t *testing.T) {
			stdout, stderr, code := cli(args...)
			msg := lastLine(stderr)
			if args[0] == "invoke" { // it answers with the outcome, as the function would
				if o := outcome(t, stdout); o["errorType"] != app.CodeSchemaMissing || o["retryable"] != true ||
					len(o["idempotency_key"].(string)) != 64 {
					t.Fatalf("invoke: outcome %v", o)
				}
				stdout = ""
			}
			if code != ExitStoreUnavailable || stdout != "" || !strings.HasPrefix(msg, "schema_missing: ") ||
				!strings.Contains(msg, "run `main migrate` first") {
				t.Fatalf("exit %d, stdout %q, message %q", code, stdout, msg)
			}
		})
	} // FC's initializer answers the same before the server takes an event.
	t.Run("server", func(t *testing.T) {
		a, err := open(io.Discard, "serve", slog.LevelInfo, os.Getenv)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		err = a.Warm(context.Background())
		class, code := idempotency.Classify(err)
		if code != app.CodeSchemaMissing || class != idempotency.ClassRetryable || !strings.Contains(err.Error(), "run `main migrate` first") {
			t.Fatalf("Warm = %v (%s %s)", err, class, code)
		}
	})
}

func dbName(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil || cfg.DBName == "" {
		t.Fatalf("DSN names no database: %v", err)
	}
	return cfg.DBName
}
