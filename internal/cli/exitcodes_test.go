package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/internal/dev/proc"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// exitCase runs one command into one exit code: docs/troubleshooting.md's
// table by command has one cell per case, and this test one case per cell.
type exitCase struct {
	cmd  string // the command, as the table's first column names it
	code int
	// args builds the command line (and whatever it needs) once setEnv has
	// run; run, when set, runs the command itself instead (serve's SIGTERM).
	env  func(t *testing.T) []string
	args func(t *testing.T) []string
	run  func(t *testing.T) (out string, code int)
}

func TestExitCodes(t *testing.T) {
	anyKey := strings.Repeat("a", 64)
	args := func(a ...string) func(*testing.T) []string { return func(*testing.T) []string { return a } }
	replayOf := func(k string) []string { return []string{"replay", "--key", k, "--reason", "r", "--operator", "o"} }
	forgetOf := func(k string) []string { return []string{"forget", "--key", k, "--reason", "r", "--operator", "o"} }
	done := func(then func(k string) []string) func(*testing.T) []string { // a key that ran to SUCCEEDED
		return func(t *testing.T) []string { return then(invoked(t)) }
	}
	cases := []exitCase{
		{cmd: "main", code: ExitUsage, args: args()},
		{cmd: "help", code: ExitOK, args: args("help")},
		{cmd: "help", code: ExitUsage, args: args("help", "frobnicate")},
		{cmd: "serve", code: ExitOK, run: serveStopped},
		{cmd: "serve", code: ExitFailed, args: func(t *testing.T) []string { return []string{"serve", "--listen", takenAddr(t)} }},
		{cmd: "serve", code: ExitUsage, args: args("serve", "--listen", "9000")},
		{cmd: "invoke", code: ExitOK, args: args("invoke", "--event", event("eventbridge-single.json"))},
		{cmd: "invoke", code: ExitFailed, args: args("invoke", "--event", event("invalid-missing-tenant.json"))},
		{cmd: "invoke", code: ExitUsage, args: args("invoke")},
		{cmd: "invoke", code: ExitStoreUnavailable, env: down, args: args("invoke", "--event", event("eventbridge-single.json"))},
		{cmd: "validate", code: ExitOK, args: args("validate", "--event", event("eventbridge-single.json"))},
		{cmd: "validate", code: ExitFailed, args: args("validate", "--event", event("malformed.json"))},
		{cmd: "validate", code: ExitUsage, args: args("validate", "--event", "no-such-event.json")},
		{cmd: "migrate", code: ExitOK, env: func(t *testing.T) []string { return []string{"MYSQL_DSN=" + testenv.FreshMySQLDSN(t)} },
			args: args("migrate")},
		{cmd: "migrate", code: ExitFailed, env: createDenied, args: args("migrate", "--create-database")},
		{cmd: "migrate", code: ExitUsage, args: args("migrate")},
		{cmd: "migrate", code: ExitStoreUnavailable, env: down, args: args("migrate")},
		{cmd: "inspect", code: ExitOK, args: done(func(k string) []string { return []string{"inspect", "--key", k} })},
		{cmd: "inspect", code: ExitUsage, args: args("inspect", "--key", "abc")},
		{cmd: "inspect", code: ExitNotFound, args: args("inspect", "--key", anyKey)},
		{cmd: "inspect", code: ExitStoreUnavailable, env: down, args: args("inspect", "--key", anyKey)},
		{cmd: "replay", code: ExitOK, args: done(replayOf)},
		{cmd: "replay", code: ExitFailed, args: func(t *testing.T) []string {
			return []string{"replay", "--dlq", deadLetterOf(t, `{"tenant_id":"cli-test","task_type":"summarize"}`), "--reason", "r", "--operator", "o"}
		}},
		{cmd: "replay", code: ExitUsage, args: args("replay", "--dlq", event("timer-sweep.json"), "--reason", "r", "--operator", "o")},
		{cmd: "replay", code: ExitNotFound, args: args(replayOf(anyKey)...)},
		{cmd: "replay", code: ExitStoreUnavailable, env: down, args: args(replayOf(anyKey)...)},
		{cmd: "forget", code: ExitOK, args: done(forgetOf)},
		{cmd: "forget", code: ExitFailed, args: func(t *testing.T) []string { return forgetOf(running(t)) }},
		{cmd: "forget", code: ExitUsage, args: args("forget", "--key", anyKey)},
		{cmd: "forget", code: ExitNotFound, args: args(forgetOf(anyKey)...)},
		{cmd: "forget", code: ExitStoreUnavailable, env: down, args: args(forgetOf(anyKey)...)},
		{cmd: "sweep", code: ExitOK, args: args("sweep")},
		{cmd: "sweep", code: ExitUsage, args: args("sweep", "--limit", "0")},
		{cmd: "sweep", code: ExitStoreUnavailable, env: down, args: args("sweep")},
		{cmd: "stats", code: ExitOK, args: args("stats")},
		{cmd: "stats", code: ExitUsage, args: args("stats", "--since", "0s")},
		{cmd: "stats", code: ExitStoreUnavailable, env: down, args: args("stats")},
		{cmd: "purge", code: ExitOK, args: args("purge")},
		{cmd: "purge", code: ExitFailed, env: deleteDenied, args: args("purge")},
		{cmd: "purge", code: ExitUsage, args: args("purge", "--older-than", "7d")},
		{cmd: "purge", code: ExitStoreUnavailable, env: down, args: args("purge")},
		{cmd: "version", code: ExitOK, args: args("version")},
		{cmd: "version", code: ExitUsage, args: args("version", "--short")},
	}
	documented := documentedExitCodes(t)
	tested := map[string]bool{}
	for _, tc := range cases {
		cell := fmt.Sprintf("%s %d", tc.cmd, tc.code)
		tested[cell] = true
		t.Run(cell, func(t *testing.T) {
			for _, v := range fcRuntimeVars { // outside FC, whatever runs the test
				t.Setenv(v, "")
			}
			var env []string
			if tc.env != nil {
				env = tc.env(t)
			}
			setEnv(t, env...)
			var out string
			var code int
			if tc.run != nil {
				out, code = tc.run(t)
			} else {
				stdout, stderr, c := cli(tc.args(t)...)
				out, code = stdout+stderr, c
			}
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", code, tc.code, out)
			}
		})
	}
	var missing, extra []string
	for cell := range documented {
		if !tested[cell] {
			missing = append(missing, cell)
		}
	}
	for cell := range tested {
		if !documented[cell] {
			extra = append(extra, cell)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing)+len(extra) > 0 {
		t.Errorf("docs/troubleshooting.md's exit codes by command and this test differ: documented, not run %v; run, not documented %v",
			missing, extra)
	}
}

// documentedExitCodes reads the table by command of docs/troubleshooting.md:
// "command code" for every cell that is not "—".
func documentedExitCodes(t *testing.T) map[string]bool {
	t.Helper()
	page, err := os.ReadFile("../../docs/troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(page), "<!-- exit-codes:begin")
	table, _, ok2 := strings.Cut(table, "<!-- exit-codes:end -->")
	if !ok || !ok2 {
		t.Fatal("docs/troubleshooting.md has no exit-codes:begin … exit-codes:end table")
	}
	cells := map[string]bool{}
	for _, row := range strings.Split(table, "\n") {
		cols := strings.Split(strings.Trim(strings.TrimSpace(row), "|"), "|")
		if len(cols) != 6 || !strings.HasPrefix(strings.TrimSpace(cols[0]), "`") {
			continue // the comment's rest, the header, the rule
		}
		cmd := strings.Split(strings.TrimSpace(cols[0]), "`")[1]
		for code, cell := range cols[1:] {
			if c := strings.TrimSpace(cell); c != "—" && c != "" {
				cells[fmt.Sprintf("%s %d", cmd, code)] = true
			}
		}
	}
	if len(cells) == 0 {
		t.Fatal("no cell read from the exit-codes table")
	}
	return cells
}

// invoked runs a fresh task to SUCCEEDED and returns its key.
func invoked(t *testing.T) string {
	t.Helper()
	stdout, stderr, code := cli("invoke", "--event", uniqueTask(t))
	k, _ := outcome(t, stdout)["idempotency_key"].(string)
	if code != ExitOK || len(k) != 64 {
		t.Fatalf("invoke: exit %d\n%s%s", code, stdout, stderr)
	}
	return k
}

// running claims a key in the embedded store under a live lease, as a
// delivery running now holds it, and returns the key.
func running(t *testing.T) string {
	t.Helper()
	store, err := boltstore.Open(os.Getenv("STATE_DIR"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	k := strings.Repeat("c", 64)
	if _, lease, err := idempotency.New(store).Claim(context.Background(), idempotency.ClaimRequest{Key: k, Owner: "fc-req-1"}); err != nil || lease == nil {
		t.Fatalf("claim: %v", err)
	}
	return k
}

// deadLetterOf writes an FC failure-destination message carrying a task
// event of data.
func deadLetterOf(t *testing.T, data string) string {
	t.Helper()
	body, err := os.ReadFile(taskEvent(t, data))
	if err != nil {
		t.Fatal(err)
	}
	msg := fmt.Sprintf(`{"requestContext":{"requestId":"fc-1"},"requestPayload":%q}`, body)
	path := t.TempDir() + "/dlq.json"
	if err := os.WriteFile(path, []byte(msg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// takenAddr is a loopback address another listener holds for the test.
func takenAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// serveStopped serves and stops the server as FC's SIGTERM does (the
// context Run gives serve ends).
func serveStopped(t *testing.T) (string, int) {
	var out proc.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- serve(ctx, &run{name: "serve", stdout: &out, stderr: &out}, "127.0.0.1:0") }()
	for i := 0; i < 3000 && !strings.Contains(out.String(), `"msg":"listening"`); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	return out.String(), <-done
}

// createDenied is a MySQL account that may not create the database its
// DSN names.
func createDenied(t *testing.T) []string {
	dsn, _ := testenv.AbsentMySQLDSN(t)
	cfg, err := mysql.ParseDSN(testenv.MySQLAccount(t, dsn, "exit-codes-1"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName += "_other" // its privileges are on the first name only
	return []string{"MYSQL_DSN=" + cfg.FormatDSN()}
}

// deleteDenied is a MySQL account of a migrated database without DELETE.
func deleteDenied(t *testing.T) []string {
	dsn, admin := testenv.AbsentMySQLDSN(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec("CREATE DATABASE " + quoteIdent(cfg.DBName)); err != nil {
		t.Fatal(err)
	}
	testenv.MigrateMySQL(t, dsn)
	acct, err := mysql.ParseDSN(testenv.MySQLAccount(t, dsn, "exit-codes-1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"127.0.0.1", "localhost"} {
		if _, err := admin.Exec(fmt.Sprintf("REVOKE DELETE ON %s.* FROM '%s'@'%s'", quoteIdent(cfg.DBName), acct.User, h)); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"MYSQL_DSN=" + acct.FormatDSN()}
}
