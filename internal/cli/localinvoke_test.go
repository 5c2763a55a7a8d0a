package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// scripts/local-invoke.sh, the stand-in for `s local invoke`: its usage, its
// bad-usage answers, and a first run that says it is building.
func TestLocalInvokeScript(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			if testenv.Required() {
				t.Fatalf("%s is required (CI=true) but not found", tool)
			}
			t.Skipf("no %s (set CI=true to make this a failure)", tool)
		}
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "local-invoke.sh"))
	if err != nil {
		t.Fatal(err)
	}
	target, state := t.TempDir(), t.TempDir()
	run := func(args ...string) (string, string, int) {
		cmd := exec.Command("bash", append([]string{script}, args...)...)
		cmd.Env = append(cleanEnv(), "TARGET_DIR="+target, "STATE_DIR="+state)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return stdout.String(), stderr.String(), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return stdout.String(), stderr.String(), 0
	}
	tests := []struct {
		name      string
		args      []string
		code      int
		stdout    string // what it must print there
		stderr    string
		notStderr string
	}{
		{"-h", []string{"-h"}, 0, "usage: scripts/local-invoke.sh EVENT_FILE", "", ""},
		{"--help", []string{"--help"}, 0, "usage: scripts/local-invoke.sh EVENT_FILE", "", ""},
		{"no event file", nil, 2, "", "usage: scripts/local-invoke.sh", ""},
		{"missing event file", []string{"no-such-event.json"}, 2, "", "no-such-event.json: file not found", "building"},
		{"a directory", []string{target}, 2, "", "not a readable file", "building"},
		{"first use builds", []string{event("eventbridge-single.json"), "fc-1"}, 0, `"decision":"FIRST"`, "building " + target + "/main (first use", ""},
		{"later runs reuse the build", []string{event("eventbridge-single.json"), "fc-2"}, 0, `"decision":"REPEAT_DONE"`, "HTTP 200", "building"},
		{"a failed task", []string{event("invalid-missing-tenant.json")}, 1, `"errorType":"invalid_request"`, "HTTP 404", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && strings.HasPrefix(tc.stdout, `"`) {
				t.Skip("builds the function (-short)")
			}
			stdout, stderr, code := run(tc.args...)
			if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) ||
				(tc.notStderr != "" && strings.Contains(stderr, tc.notStderr)) {
				t.Fatalf("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
		})
	}
}

// cleanEnv is this process's environment without the function's variables.
func cleanEnv() []string {
	drop := map[string]bool{}
	for _, e := range envDocs {
		drop[e.name] = true
	}
	var out []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			out = append(out, kv)
		}
	}
	return out
}
