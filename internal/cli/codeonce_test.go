package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// A failure names its code, and a command its name, once: no message says
// "invalid_request: invalid_request: …" or "migrate: migrate: …". Every
// failure path a command can reach without a fault is here, and each is run
// twice where a duplicate answers from the stored failure.
func TestErrorsSayTheirCodeOnce(t *testing.T) {
	task := func(data string) func(t *testing.T) string {
		return func(t *testing.T) string { return taskEvent(t, data) }
	}
	file := func(name string) func(t *testing.T) string { return func(*testing.T) string { return event(name) } }
	dlqOf := func(t *testing.T) string { return deadLetterOf(t, `{"tenant_id":"cli-test","task_type":"summarize"}`) }
	key := strings.Repeat("b", 64)
	tests := []struct {
		name  string
		env   func(t *testing.T) []string
		args  func(file string) []string
		file  func(t *testing.T) string
		twice bool
	}{
		{"summarize without content", nil, invokeArgs, task(`{"tenant_id":"a","task_type":"summarize","operation":"summarize","input":{}}`), true},
		{"keywords without text", nil, invokeArgs, task(`{"tenant_id":"a","task_type":"keywords","operation":"keywords","input":{"text":""}}`), true},
		{"unknown task type", nil, invokeArgs, task(`{"tenant_id":"a","task_type":"translate","operation":"t","input":{}}`), false},
		{"missing tenant", nil, invokeArgs, file("invalid-missing-tenant.json"), false},
		{"malformed event", nil, invokeArgs, file("malformed.json"), false},
		{"dead letter of an invalid task", nil, func(f string) []string {
			return []string{"replay", "--dlq", f, "--reason", "r", "--operator", "o"}
		}, dlqOf, false},
		{"replay of an unknown key", nil, fixed("replay", "--key", key, "--reason", "r", "--operator", "o"), nil, false},
		{"inspect of an unknown key", nil, fixed("inspect", "--key", key), nil, false},
		{"migrate, MySQL down", down, fixed("migrate"), nil, false},
		{"migrate --create-database, MySQL down", down, fixed("migrate", "--create-database"), nil, false},
		{"sweep, MySQL down", down, fixed("sweep"), nil, false},
		{"stats before migrate", func(t *testing.T) []string { return []string{"MYSQL_DSN=" + testenv.FreshMySQLDSN(t)} }, fixed("stats"), nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var env []string
			if tc.env != nil {
				env = tc.env(t)
			}
			setEnv(t, env...)
			f := ""
			if tc.file != nil {
				f = tc.file(t)
			}
			runs := 1
			if tc.twice {
				runs = 2
			}
			for range runs {
				stdout, stderr, code := cli(tc.args(f)...)
				if code == ExitOK {
					t.Fatalf("exit 0: the case should fail\n%s", stdout)
				}
				msgs := messages(t, stdout, stderr)
				if len(msgs) == 0 {
					t.Fatalf("no error message\n%s%s", stdout, stderr)
				}
				for _, m := range msgs {
					if w := repeated(m.text); w != "" || (m.code != "" && strings.Count(m.text, m.code) > 1) {
						t.Errorf("said twice (%q, code %s): %s", w, m.code, m.text)
					}
				}
			}
		})
	}
}

func invokeArgs(f string) []string { return []string{"invoke", "--event", f} }

func fixed(args ...string) func(string) []string { return func(string) []string { return args } }

func down(*testing.T) []string {
	return []string{"MYSQL_DSN=root@tcp(127.0.0.1:1)/idemgate?timeout=1s"}
}

type message struct{ text, code string }

// messages are the error texts a command printed: its plain stderr lines,
// the errors of its log lines and the errorMessage of every outcome.
func messages(t *testing.T, stdout, stderr string) []message {
	t.Helper()
	var out []message
	for _, l := range strings.Split(stderr, "\n") {
		var m map[string]any
		switch {
		case l == "":
		case json.Unmarshal([]byte(l), &m) == nil:
			if e, _ := m["error"].(string); e != "" {
				c, _ := m["errorType"].(string)
				out = append(out, message{e, c})
			}
		default:
			out = append(out, message{l, ""})
		}
	}
	var o struct {
		ErrorType    string `json:"errorType"`
		ErrorMessage string `json:"errorMessage"`
		Results      []struct {
			ErrorType    string `json:"errorType"`
			ErrorMessage string `json:"errorMessage"`
		} `json:"results"`
	}
	if strings.TrimSpace(stdout) != "" {
		if err := json.Unmarshal([]byte(stdout), &o); err != nil {
			t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
		}
	}
	if o.ErrorMessage != "" {
		out = append(out, message{o.ErrorMessage, o.ErrorType})
	}
	for _, r := range o.Results {
		if r.ErrorMessage != "" {
			out = append(out, message{r.ErrorMessage, r.ErrorType})
		}
	}
	return out
}

// repeated returns the word that ends one ": "-separated part of s and
// begins the next ("migrate: migrate …", "replay: replay K: …"), or "".
func repeated(s string) string {
	parts := strings.Split(s, ": ")
	for i := 1; i < len(parts); i++ {
		prev, next := strings.Fields(parts[i-1]), strings.Fields(parts[i])
		if len(prev) > 0 && len(next) > 0 && prev[len(prev)-1] == next[0] {
			return next[0]
		}
	}
	return ""
}
