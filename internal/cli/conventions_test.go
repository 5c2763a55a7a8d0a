package cli

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/handler"
)

// Durations take days wherever a command takes one.
func TestDurationsTakeDays(t *testing.T) {
	setEnv(t)
	for _, args := range [][]string{{"stats", "--since", "1d"}, {"stats", "--since", "1d12h"},
		{"sweep", "--budget", "1d", "--grace", "2d"}, {"purge", "--budget", "1d"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			if stdout, stderr, code := cli(args...); code != ExitOK {
				t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
			}
		})
	}
}

// --log-level and -q decide which JSON lines reach stderr; stdout (the
// answer) is the same.
func TestLogLevel(t *testing.T) {
	setEnv(t)
	for _, tc := range []struct {
		name     string
		flags    []string
		wantInfo bool
	}{
		{"default", nil, true},
		{"debug", []string{"--log-level", "debug"}, true},
		{"warn", []string{"--log-level", "WARN"}, false},
		{"quiet", []string{"-q"}, false},
		{"quiet wins over a level", []string{"--log-level", "debug", "-q"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := cli(append([]string{"stats", "--json"}, tc.flags...)...)
			if code != ExitOK || strings.TrimSpace(stdout) == "" {
				t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
			}
			if got := strings.Contains(stderr, `"msg":"backends"`); got != tc.wantInfo {
				t.Fatalf("info lines on stderr: %v, want %v:\n%s", got, tc.wantInfo, stderr)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	var b bytes.Buffer
	writeVersion(&b, &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/idemgate/idemgate", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-12-01T15:00:00Z"}, {Key: "vcs.modified", Value: "true"}}})
	b.WriteString("== without VCS information\n")
	writeVersion(&b, &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/idemgate/idemgate", Version: "v1.4.0"}})
	golden(t, "version.golden", b.String())
	setEnv(t)
	stdout, stderr, code := cli("version")
	if code != ExitOK || !strings.Contains(stdout, "go        go1.") || stderr != "" {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
}

// progressLines are the "<what> progress" log lines of stderr.
func progressLines(t *testing.T, stderr, what string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(stderr, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == what+" progress" {
			out = append(out, m)
		}
	}
	return out
}

// A long purge says how far it got on stderr while it runs: with one record
// a batch and a progress line at every chance, three old records give a line
// per batch, counting up; --progress 0 gives none.
func TestPurgeProgress(t *testing.T) {
	env := migrated(t, "RETENTION_DAYS=30")
	db, err := sql.Open("mysql", strings.TrimPrefix(env[0], "MYSQL_DSN="))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	age := func() {
		for range 3 {
			if stdout, stderr, code := cli("invoke", "--event", uniqueTask(t)); code != ExitOK {
				t.Fatalf("invoke: exit %d\n%s%s", code, stdout, stderr)
			}
		}
		if _, err := db.Exec(`UPDATE idempotency_record SET updated_at = updated_at - INTERVAL 31 DAY`); err != nil {
			t.Fatal(err)
		}
	}
	age()
	_, stderr, code := cli("purge", "--limit", "1", "--progress", "1ns")
	lines := progressLines(t, stderr, "purge")
	if code != ExitOK || len(lines) < 3 {
		t.Fatalf("exit %d, %d progress lines:\n%s", code, len(lines), stderr)
	}
	for i, l := range lines[:3] {
		if l["purged_records"] != float64(i+1) || l["batches"] != float64(i+1) {
			t.Fatalf("progress line %d: %v", i, l)
		}
	}
	age()
	if _, stderr, _ := cli("purge", "--limit", "1", "--progress", "0"); len(progressLines(t, stderr, "purge")) != 0 {
		t.Fatalf("--progress 0 printed progress:\n%s", stderr)
	}
}

// A sweep that takes up several records says so as it goes.
func TestSweepProgress(t *testing.T) {
	env := migrated(t)
	db, err := sql.Open("mysql", strings.TrimPrefix(env[0], "MYSQL_DSN="))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for range 3 {
		if stdout, stderr, code := cli("invoke", "--event", uniqueTask(t)); code != ExitOK {
			t.Fatalf("invoke: exit %d\n%s%s", code, stdout, stderr)
		}
	}
	// Failed an hour ago with attempts left: the sweeper's to re-drive.
	if _, err := db.Exec(`UPDATE idempotency_record SET status = 'FAILED_RETRYABLE',
 updated_at = updated_at - INTERVAL 1 HOUR WHERE parent_key = ''`); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := cli("sweep", "--grace", "0s", "--progress", "1ns")
	lines := progressLines(t, stderr, "sweep")
	if code != ExitOK || len(lines) != 3 {
		t.Fatalf("exit %d, %d progress lines:\n%s%s", code, len(lines), stdout, stderr)
	}
	if l := lines[2]; l["taken_up"] != float64(3) || l["scanned"] != float64(3) {
		t.Fatalf("last progress line %v", l)
	}
}

// purge --dry-run says what would go and deletes nothing: the records are
// still there, and the real purge then deletes as many.
func TestPurgeDryRun(t *testing.T) {
	env := migrated(t, "RETENTION_DAYS=30")
	db, err := sql.Open("mysql", strings.TrimPrefix(env[0], "MYSQL_DSN="))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var keys []string
	for range 3 {
		stdout, stderr, code := cli("invoke", "--event", uniqueTask(t))
		if code != ExitOK {
			t.Fatalf("invoke: exit %d\n%s%s", code, stdout, stderr)
		}
		keys = append(keys, outcome(t, stdout)["idempotency_key"].(string))
	}
	if _, err := db.Exec(`UPDATE idempotency_record SET updated_at = updated_at - INTERVAL 31 DAY`); err != nil {
		t.Fatal(err)
	}
	purge := func(args ...string) handler.PurgeReport {
		t.Helper()
		stdout, stderr, code := cli(append([]string{"purge"}, args...)...)
		var rep handler.PurgeReport
		if err := json.Unmarshal([]byte(stdout), &rep); code != ExitOK || err != nil {
			t.Fatalf("purge %v: exit %d, %v\n%s%s", args, code, err, stdout, stderr)
		}
		return rep
	}
	if rep := purge("--dry-run"); !rep.DryRun || rep.Records != 3 || rep.Batches != 1 {
		t.Fatalf("dry run %+v", rep)
	}
	for _, k := range keys {
		if _, _, code := cli("inspect", "--key", k); code != ExitOK {
			t.Fatalf("after the dry run, inspect %s: exit %d", k, code)
		}
	}
	if rep := purge("--dry-run", "--limit", "2"); rep.Records != 2 || !rep.More {
		t.Fatalf("dry run of one batch of 2 %+v: want 2 and more", rep)
	}
	if rep := purge(); rep.DryRun || rep.Records != 3 {
		t.Fatalf("purge %+v", rep)
	}
}
