package cli

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// taskEvent writes a CloudEvent with the given task data to a file of its own.
func taskEvent(t *testing.T, data string) string {
	t.Helper()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	body := `{"specversion":"1.0","id":"cli-` + hex.EncodeToString(b) + `","source":"idemgate.cli-test","type":"idemgate:Task:Submitted",` +
		`"datacontenttype":"application/json","data":` + data + `}`
	path := filepath.Join(t.TempDir(), "event.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// uniqueTask is a summarize task no other run has submitted: its key is new
// even to a Redis that other test runs share.
func uniqueTask(t *testing.T) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return taskEvent(t, `{"tenant_id":"cli-test","task_type":"summarize","operation":"summarize","input":{"content":"cli test `+
		hex.EncodeToString(b)+`"}}`)
}

func outcome(t *testing.T, stdout string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(stdout), &m); err != nil {
		t.Fatalf("stdout is not an outcome: %v\n%s", err, stdout)
	}
	return m
}

// migrated returns the environment of a fresh, migrated MySQL database.
func migrated(t *testing.T, extra ...string) []string {
	t.Helper()
	env := append([]string{"MYSQL_DSN=" + testenv.FreshMySQLDSN(t)}, extra...)
	setEnv(t, env...)
	if stdout, stderr, code := cli("migrate"); code != ExitOK {
		t.Fatalf("migrate: exit %d\n%s%s", code, stdout, stderr)
	}
	return env
}

// `main invoke` counts its decisions as the server does: two invokes of one
// event are first=1, repeat_done=1 in `main stats`, on every store.
func TestInvokeRecordsStats(t *testing.T) {
	tests := []struct {
		name string
		env  func(t *testing.T) []string
	}{
		{"embedded store", func(t *testing.T) []string { return nil }},
		{"MySQL", func(t *testing.T) []string { return migrated(t) }},
		{"MySQL and Redis", func(t *testing.T) []string {
			return migrated(t, "REDIS_URL="+testenv.RedisURL(t), "REDIS_KEY_PREFIX="+testenv.RedisPrefix(t))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			setEnv(t, tc.env(t)...)
			file := uniqueTask(t)
			for i, want := range []string{"FIRST", "REPEAT_DONE"} {
				stdout, stderr, code := cli("invoke", "--event", file)
				if o := outcome(t, stdout); code != ExitOK || o["decision"] != want || o["status"] != "SUCCEEDED" {
					t.Fatalf("invoke %d: exit %d, %v\n%s", i+1, code, o, stderr)
				}
			}
			stdout, stderr, code := cli("stats", "--json")
			var minutes []struct {
				First      int64 `json:"first"`
				RepeatDone int64 `json:"repeat_done"`
				Claims     int64 `json:"claims"`
			}
			if err := json.Unmarshal([]byte(stdout), &minutes); code != ExitOK || err != nil {
				t.Fatalf("stats: exit %d, %v\n%s%s", code, err, stdout, stderr)
			}
			var first, done, claims int64
			for _, m := range minutes { // the two invokes may straddle a minute
				first, done, claims = first+m.First, done+m.RepeatDone, claims+m.Claims
			}
			if first != 1 || done != 1 || claims != 2 {
				t.Fatalf("stats first=%d repeat_done=%d claims=%d; want 1, 1, 2\n%s", first, done, claims, stdout)
			}
		})
	}
}

// The sample batch runs offline: no notify, nothing to reach.
func TestInvokeSampleBatchOffline(t *testing.T) {
	setEnv(t)
	stdout, stderr, code := cli("invoke", "--event", event("eventbridge-batch.json"))
	var out struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); code != ExitOK || err != nil || len(out.Results) != 3 {
		t.Fatalf("exit %d, %v\n%s%s", code, err, stdout, stderr)
	}
	for i, r := range out.Results {
		if r["status"] != "SUCCEEDED" || r["duplicate"] != (i == 2) {
			t.Errorf("result %d = %v", i, r)
		}
	}
}

// With the store down, `main invoke` still prints the outcome JSON
// (docs/events.md), store_unavailable and retryable, and exits 4. The
// outcome names K and the event's request id, as any answer does once they
// can be derived; an event refused on its own is answered with its refusal
// (nothing a retry can mend: exit 1), under the invocation's request id.
func TestInvokeStoreDownPrintsOutcome(t *testing.T) {
	const k = "fde778c5a488457dfd290d1e00c57a173481ee6ac8a5884c2b9a57edfcf80f4c" // eventbridge-single.json's (docs/events.md)
	tests := []struct {
		name, file, errorType, key, requestID string
		retryable                             bool
		exit                                  int
	}{
		{"a valid event", event("eventbridge-single.json"), "store_unavailable", k, "req-2f6c1e9a7b3d4e58", true, ExitStoreUnavailable},
		{"an event without tenant_id", event("invalid-missing-tenant.json"), "invalid_request", "", "local-test", false, ExitFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			setEnv(t, "MYSQL_DSN=root@tcp(127.0.0.1:1)/idemgate?timeout=1s")
			stdout, stderr, code := cli("invoke", "--request-id", "local-test", "--event", tc.file)
			o := outcome(t, stdout)
			if code != tc.exit || o["errorType"] != tc.errorType || o["retryable"] != tc.retryable || o["status"] != "REJECTED" ||
				o["idempotency_key"] != tc.key || o["request_id"] != tc.requestID {
				t.Fatalf("exit %d, %v\n%s", code, o, stderr)
			}
			if !strings.Contains(lastLine(stderr), "durable store unavailable") {
				t.Fatalf("stderr does not say the store failed:\n%s", stderr)
			}
		})
	}
	t.Run("a batch", func(t *testing.T) {
		setEnv(t, "MYSQL_DSN=root@tcp(127.0.0.1:1)/idemgate?timeout=1s")
		stdout, stderr, code := cli("invoke", "--event", event("eventbridge-batch.json"))
		var out struct {
			Results   []map[string]any `json:"results"`
			ErrorType string           `json:"errorType"`
		}
		if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != ExitStoreUnavailable || out.ErrorType != "batch_failed" || len(out.Results) != 3 {
			t.Fatalf("exit %d, %v\n%s%s", code, err, stdout, stderr)
		}
		for i, r := range out.Results {
			if r["errorType"] != "store_unavailable" || r["idempotency_key"] == "" || r["request_id"] == "" {
				t.Errorf("member %d: %v", i, r)
			}
		}
	})
}

// A function that cannot even be opened (its embedded store held by another
// process) answers invoke as one whose store fails its check: the event
// keyed, the failure said, retryable.
func TestInvokeUnopenedStoreKeysTheEvent(t *testing.T) {
	setEnv(t)
	store, err := boltstore.Open(os.Getenv("STATE_DIR"), time.Second) // holds the file's lock
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	stdout, stderr, code := cli("invoke", "--event", event("eventbridge-single.json"))
	o := outcome(t, stdout)
	if code == ExitOK || code == ExitUsage || o["retryable"] != true || o["status"] != "REJECTED" ||
		o["idempotency_key"] != "fde778c5a488457dfd290d1e00c57a173481ee6ac8a5884c2b9a57edfcf80f4c" || o["request_id"] != "req-2f6c1e9a7b3d4e58" {
		t.Fatalf("exit %d, %v\n%s", code, o, stderr)
	}
}

// While another process holds the embedded store (`main serve`, as
// docs/api.md's "Try it locally" runs it), a command is store unavailable,
// exit 4, naming the lock — and invoke answers store_unavailable, retryable,
// not unknown. (The lock is this test's own: bbolt's flock keeps out a
// second open of the file within one process as well.)
func TestALockedEmbeddedStoreIsUnavailable(t *testing.T) {
	tests := []struct {
		name string
		args func(t *testing.T) []string
	}{
		{"stats", func(*testing.T) []string { return []string{"stats", "-q"} }},
		{"invoke", func(t *testing.T) []string { return []string{"invoke", "-q", "--event", uniqueTask(t)} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			setEnv(t, "STATE_DIR="+dir)
			held, err := boltstore.Open(dir, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			stdout, stderr, code := cli(tc.args(t)...)
			if code != ExitStoreUnavailable || !strings.Contains(stderr, "is held by") || !strings.Contains(stderr, dir) {
				t.Fatalf("exit %d, want %d naming the lock\nstdout %s\nstderr %s", code, ExitStoreUnavailable, stdout, stderr)
			}
			if tc.name == "invoke" {
				if o := outcome(t, stdout); o["errorType"] != "store_unavailable" || o["retryable"] != true {
					t.Fatalf("answer %v, want store_unavailable, retryable", o)
				}
			}
		})
	}
}
