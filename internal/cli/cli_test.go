package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/internal/config"
	"github.com/idemgate/idemgate/internal/dev/proc"
)

// setEnv clears every variable the binary reads, then sets kv ("NAME=value"),
// so that the developer's environment cannot leak into a test. STATE_DIR is
// a fresh directory unless kv sets it.
func setEnv(t *testing.T, kv ...string) {
	t.Helper()
	for _, e := range envDocs {
		t.Setenv(e.name, "")
	}
	t.Setenv("STATE_DIR", t.TempDir())
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		t.Setenv(k, v)
	}
}

// cli runs the binary in-process. Its output is written under a lock, as
// a file is: go-redis's own lines come from its pool's goroutines.
func cli(args ...string) (stdout, stderr string, code int) {
	var out, errb proc.Buffer
	code = Run(args, &out, &errb)
	return out.String(), errb.String(), code
}

// event is a sample event file of the repository.
func event(name string) string { return filepath.Join("..", "..", "testdata", "events", name) }

func TestHelp(t *testing.T) {
	setEnv(t)
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			stdout, stderr, code := cli(args...)
			if code != ExitOK || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			golden(t, "usage.golden", stdout)
			for _, c := range commands {
				if !strings.Contains(stdout, "  "+strings.TrimSpace(c.name+" "+c.synopsis)+"\n") {
					t.Errorf("usage does not list %s", c.name)
				}
			}
		})
	}
}

// `main help env` documents every variable; the usage points to it.
func TestHelpEnv(t *testing.T) {
	setEnv(t)
	stdout, stderr, code := cli("help", "env")
	if code != ExitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, e := range envDocs {
		if !strings.Contains(stdout, "  "+e.name+" ") {
			t.Errorf("main help env does not document %s", e.name)
		}
	}
}

// Outside FC a bare `main` explains itself and exits 2 instead of listening
// on :9000 without a word; inside FC (any runtime variable) it serves.
func TestNoArguments(t *testing.T) {
	setEnv(t)
	for _, v := range fcRuntimeVars {
		t.Setenv(v, "")
	}
	t.Setenv("FC_GENERATE_PROJECT_NAME", "a-deploy-time-export") // not a runtime variable
	type result struct {
		stdout, stderr string
		code           int
	}
	done := make(chan result, 1)
	go func() { o, e, c := cli(); done <- result{o, e, c} }()
	var res result
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("main without arguments outside FC did not return: it serves")
	}
	stdout, stderr, code := res.stdout, res.stderr, res.code
	if code != ExitUsage || stdout != "" || !strings.Contains(stderr, "`main serve` serves") ||
		!strings.Contains(stderr, "commands:") {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	for _, tc := range []struct{ name, getenv string }{{"custom runtime", "FC_CUSTOM_LISTEN_PORT"},
		{"go1", "FC_RUNTIME_API"}, {"local stand-in", "FC_SERVER_PORT"}, {"any instance", "FC_INSTANCE_ID"}} {
		t.Run(tc.name, func(t *testing.T) {
			if !inFC(func(k string) string {
				if k == tc.getenv {
					return "x"
				}
				return ""
			}) {
				t.Fatalf("%s set: not seen as FC", tc.getenv)
			}
		})
	}
	if inFC(func(k string) string {
		if k == "FC_GENERATE_PROJECT_NAME" {
			return "x"
		}
		return ""
	}) {
		t.Fatal("a deploy-time FC_ export counts as FC")
	}
}

func TestCommandHelp(t *testing.T) {
	setEnv(t)
	for _, c := range commands {
		for _, args := range [][]string{{c.name, "-h"}, {c.name, "--help"}, {"help", c.name}} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				stdout, stderr, code := cli(args...)
				if code != ExitOK || stderr != "" {
					t.Fatalf("exit %d, stderr %q", code, stderr)
				}
				if !strings.HasPrefix(stdout, "usage: main "+c.name) || !strings.Contains(stdout, "exit codes:") {
					t.Fatalf("help:\n%s", stdout)
				}
				if n := strings.Count(stdout, "\n"); n > 40 {
					t.Errorf("%d lines: a command's help is one screen", n)
				}
				fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
				c.setup(fs)
				addLogFlags(fs)
				fs.VisitAll(func(f *flag.Flag) {
					if !strings.Contains(stdout, "  -"+f.Name+" ") && !strings.Contains(stdout, "  -"+f.Name+"\n") &&
						!strings.Contains(stdout, "  -"+f.Name+"\t") {
						t.Errorf("flag -%s not shown", f.Name)
					}
				})
				for _, name := range c.env {
					if !strings.Contains(stdout, " "+name) {
						t.Errorf("variable %s not named", name)
					}
				}
			})
		}
	}
	stdout, _, _ := cli("sweep", "-h")
	golden(t, "sweep-help.golden", stdout)
}

// golden compares got with testdata/name (go test ./internal/cli -update
// rewrites it).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("%s changed (go test ./internal/cli -update, then look at it):\n%s", name, got)
	}
}

// Every variable the configuration reads is documented, and the usage
// documents nothing the binary does not read.
func TestEnvironmentDocumented(t *testing.T) {
	documented := map[string]bool{}
	for _, e := range envDocs {
		if e.doc == "" || documented[e.name] {
			t.Errorf("%s: empty or twice", e.name)
		}
		documented[e.name] = true
	}
	read := map[string]bool{"FC_RUNTIME_API": true, "IDEMGATE_FAULT": true} // read by this package
	for _, v := range config.Variables {
		read[v] = true
		if !documented[v] {
			t.Errorf("config reads %s; the usage does not document it", v)
		}
	}
	for name := range documented {
		if !read[name] {
			t.Errorf("%s is documented but nothing reads it", name)
		}
	}
	for _, c := range commands {
		for _, name := range c.env {
			if !documented[name] {
				t.Errorf("%s names undocumented %s", c.name, name)
			}
		}
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name    string
		env     []string
		args    []string
		command string // the name the message starts with
		want    string
	}{
		{"unknown command", nil, []string{"frobnicate"}, "main", `unknown command "frobnicate"`},
		{"help for an unknown command", nil, []string{"help", "frobnicate"}, "main help", `unknown command "frobnicate"`},
		{"unknown flag", nil, []string{"invoke", "--frobnicate"}, "invoke", "flag provided but not defined: -frobnicate"},
		{"flag without its value", nil, []string{"inspect", "--key"}, "inspect", "flag needs an argument: -key"},
		{"bad flag value", nil, []string{"sweep", "--limit", "many"}, "sweep", `invalid value "many" for flag -limit`},
		{"stray argument", nil, []string{"stats", "now"}, "stats", `unexpected argument "now"`},
		{"invoke without --event", nil, []string{"invoke"}, "invoke", "--event FILE is required"},
		{"invoke of a missing file", nil, []string{"invoke", "--event", "no-such-event.json"}, "invoke", "no-such-event.json: file not found"},
		{"inspect without --key", nil, []string{"inspect"}, "inspect", "--key K is required"},
		{"replay without a reason", nil, []string{"replay", "--key", "k", "--operator", "o"}, "replay", "--reason R --operator O"},
		{"replay of both a key and a file", nil, []string{"replay", "--key", "k", "--dlq", "f", "--reason", "r", "--operator", "o"}, "replay", "exactly one of"},
		{"replay of a missing file", nil, []string{"replay", "--dlq", "no-such-dlq.json", "--reason", "r", "--operator", "o"}, "replay", "no-such-dlq.json: file not found"},
		{"inspect of a malformed key", nil, []string{"inspect", "--key", "k"}, "inspect", `--key "k" is not a business key (64 lowercase hex characters)`},
		{"inspect of an upper-case key", nil, []string{"inspect", "--key", strings.Repeat("AB", 32)}, "inspect", "keys are lower case"},
		{"replay of a malformed key", nil, []string{"replay", "--key", strings.Repeat("a", 63), "--reason", "r", "--operator", "o"}, "replay", "is not a business key"},
		{"replay of a malformed dead letter", nil, []string{"replay", "--dlq", event("malformed.json"), "--reason", "r", "--operator", "o"}, "replay", "malformed.json: "},
		{"replay of a timer event as a dead letter", nil, []string{"replay", "--dlq", event("timer-sweep.json"), "--reason", "r", "--operator", "o"}, "replay", "a dead letter holds task events"},
		{"sweep of a negative limit", nil, []string{"sweep", "--limit", "-1"}, "sweep", "--limit and --budget must be positive"},
		{"sweep of no limit", nil, []string{"sweep", "--limit", "0"}, "sweep", "--limit and --budget must be positive"},
		{"sweep of a negative grace", nil, []string{"sweep", "--grace", "-1m"}, "sweep", "--grace not negative"},
		{"sweep of a bad budget", nil, []string{"sweep", "--budget", "soon"}, "sweep", `invalid value "soon" for flag -budget: want a duration such as 90s, 36h or 1d`},
		{"stats of fractional days", nil, []string{"stats", "--since", "1.5d"}, "stats", `invalid value "1.5d" for flag -since`},
		{"stats since nothing", nil, []string{"stats", "--since", "0s"}, "stats", "--since must be positive"},
		{"an unknown log level", nil, []string{"stats", "--log-level", "loud"}, "stats", `--log-level "loud": want debug, info, warn or error`},
		{"serve on no port", nil, []string{"serve", "--listen", "127.0.0.1"}, "serve", `--listen "127.0.0.1": want host:port`},
		{"migrate without MYSQL_DSN", nil, []string{"migrate"}, "migrate", "MYSQL_DSN is not set"},
		{"bad configuration", []string{"LEASE_SECONDS=0"}, []string{"stats"}, "configuration", "LEASE_SECONDS: want a whole number"},
		{"objects expiring within FC's redeliveries", []string{"OBJECT_EXPIRE_DAYS=1"}, []string{"stats"}, "configuration",
			`OBJECT_EXPIRE_DAYS: want a whole number from 2 to 3650, got "1"`},
		{"retention under the floor", []string{"RETENTION_DAYS=7"}, []string{"purge"}, "configuration", "RETENTION_DAYS: want a whole number from 8"},
		{"purge of a day", nil, []string{"purge", "--older-than", "24h"}, "purge", "--older-than: want from 8d (FC may redeliver an event for up to 7 days)"},
		{"purge without a limit", nil, []string{"purge", "--limit", "0"}, "purge", "--limit and --budget must be positive"},
		{"a DSN that does not parse", []string{"MYSQL_DSN=this is not a dsn"}, []string{"invoke", "--event", event("eventbridge-single.json")}, "configuration", "MYSQL_DSN: not a go-sql-driver DSN"},
		{"a DSN without a database", []string{"MYSQL_DSN=root@tcp(127.0.0.1:3306)/"}, []string{"inspect", "--key", strings.Repeat("0", 64)}, "configuration", "MYSQL_DSN: names no database"},
		{"a DSN with a bad parameter", []string{"MYSQL_DSN=root@tcp(127.0.0.1:3306)/db?tls=bogus"}, []string{"stats"}, "configuration", "MYSQL_DSN: not a go-sql-driver DSN"},
		{"a STATE_DIR that cannot be made", []string{"STATE_DIR=/dev/null/state"}, []string{"invoke", "--event", event("eventbridge-single.json")}, "configuration", "STATE_DIR: "},
		{"configuration a client refuses", []string{"LLM_MODEL=qwen-plus", "LLM_API_KEY=k", "LLM_BASE_URL=https://127.0.0.1:1/v1?x=1"}, []string{"stats"}, "invalid_config", "LLM_BASE_URL must not have a query"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			setEnv(t, tc.env...)
			stdout, stderr, code := cli(tc.args...)
			if code != ExitUsage || stdout != "" {
				t.Fatalf("exit %d, stdout %q; want %d", code, stdout, ExitUsage)
			}
			last := lastLine(stderr)
			if !strings.HasPrefix(last, tc.command+": ") || !strings.Contains(last, tc.want) {
				t.Fatalf("stderr %q; want %q from %s", last, tc.want, tc.command)
			}
			if strings.HasPrefix(last, tc.command+": "+tc.command+":") {
				t.Fatalf("the command is named twice: %q", last)
			}
		})
	}
}

// lastLine is the last non-empty line of s: what a command said after its
// startup log line.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"none", nil, ExitOK},
		{"unknown key", fmt.Errorf("abc: %w", handler.ErrUnknownKey), ExitNotFound},
		{"store down", fmt.Errorf("claim: %w: dial tcp", idempotency.ErrStoreUnavailable), ExitStoreUnavailable},
		{"schema missing", idempotency.Retryable("schema_missing", fmt.Errorf("%w: no table", idempotency.ErrStoreUnavailable)), ExitStoreUnavailable},
		{"anything else", errors.New("sweep: boom"), ExitFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := exitCode(tc.err); got != tc.want {
				t.Fatalf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}
