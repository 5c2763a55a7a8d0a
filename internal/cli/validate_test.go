package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/customruntime"
)

type validation struct {
	Kind      string `json:"kind"`
	Valid     bool   `json:"valid"`
	ErrorType string `json:"errorType"`
	Events    []struct {
		IdempotencyKey string `json:"idempotency_key"`
		PayloadHash    string `json:"payload_hash"`
		Fingerprint    string `json:"fingerprint"`
		ErrorType      string `json:"errorType"`
		Schema         string `json:"schema"`
	} `json:"events"`
}

// `main validate` judges each sample as the function does, with the exit
// codes of invoke, and touches no store: with MYSQL_DSN naming a server
// that does not answer it still answers, and the embedded store's
// directory stays empty.
func TestValidate(t *testing.T) {
	tests := []struct {
		file, kind, errorType string
		code, events          int
		schemaValid           bool
	}{
		{"eventbridge-single.json", "single", "", ExitOK, 1, true},
		{"eventbridge-batch.json", "batch", "", ExitOK, 3, true},
		{"eventbridge-dead-letter.json", "single", "", ExitOK, 1, true},
		{"invalid-missing-tenant.json", "single", "invalid_request", ExitFailed, 1, false},
		{"malformed.json", "", "malformed_event", ExitFailed, 0, false},
		{"timer-sweep.json", "timer", "", ExitOK, 0, false},
		{"fc-failure-destination.json", "failure_destination", "dead_letter_message", ExitFailed, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			dir := t.TempDir()
			setEnv(t, "MYSQL_DSN=root@tcp(127.0.0.1:1)/idemgate?timeout=1s", "STATE_DIR="+dir)
			stdout, stderr, code := cli("validate", "--event", event(tc.file))
			var v validation
			if err := json.Unmarshal([]byte(stdout), &v); err != nil || code != tc.code || v.Kind != tc.kind || len(v.Events) != tc.events {
				t.Fatalf("exit %d, %v %+v\n%s%s", code, err, v, stdout, stderr)
			}
			errorType := v.ErrorType
			for _, e := range v.Events {
				errorType += e.ErrorType
				if (e.Schema == "valid") != tc.schemaValid {
					t.Errorf("schema verdict %q", e.Schema)
				}
				if e.ErrorType == "" && (len(e.IdempotencyKey) != 64 || len(e.PayloadHash) != 64 || len(e.Fingerprint) != 64) {
					t.Errorf("identifiers missing: %+v", e)
				}
			}
			if errorType != tc.errorType || v.Valid != (tc.code == ExitOK) {
				t.Errorf("errorType %q valid %v", errorType, v.Valid)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("validate wrote %d entries to STATE_DIR", len(entries))
			}
		})
	}
}

// The key validate prints is the key invoke runs under.
func TestValidateKeyIsInvokeKey(t *testing.T) {
	setEnv(t)
	file := uniqueTask(t)
	stdout, _, code := cli("validate", "--event", file)
	var v validation
	if json.Unmarshal([]byte(stdout), &v) != nil || code != ExitOK || len(v.Events) != 1 {
		t.Fatalf("validate: exit %d\n%s", code, stdout)
	}
	out, stderr, code := cli("invoke", "--event", file)
	if o := outcome(t, out); code != ExitOK || o["idempotency_key"] != v.Events[0].IdempotencyKey {
		t.Fatalf("invoke: exit %d, %v; validate said %s\n%s", code, o, v.Events[0].IdempotencyKey, stderr)
	}
	if _, stderr, code := cli("validate"); code != ExitUsage || !strings.Contains(stderr, "--event FILE is required") {
		t.Fatalf("no --event: exit %d %s", code, stderr)
	}
}

// A body the custom runtime would refuse body_too_large before the
// function sees it is refused so by validate and invoke too: both judge
// what FC can hand over, and one byte less is judged as usual.
func TestEventOverTheBodyLimit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		size      int
		errorType string
	}{
		{"at the limit", customruntime.DefaultMaxBody, ""},
		{"one byte over", customruntime.DefaultMaxBody + 1, "body_too_large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setEnv(t)
			body, err := os.ReadFile(event("malformed.json"))
			if err != nil {
				t.Fatal(err)
			}
			// A truncated body padded with white space: malformed_event when judged.
			body = append(body, strings.Repeat(" ", tc.size-len(body))...)
			file := filepath.Join(t.TempDir(), "big.json")
			if err := os.WriteFile(file, body, 0o600); err != nil {
				t.Fatal(err)
			}
			want := tc.errorType
			if want == "" {
				want = "malformed_event"
			}
			stdout, stderr, code := cli("validate", "--event", file)
			var v validation
			if err := json.Unmarshal([]byte(stdout), &v); err != nil || code != ExitFailed || v.Valid || v.ErrorType != want {
				t.Errorf("validate: exit %d, %v %+v\n%s", code, err, v, stderr)
			}
			out, stderr, code := cli("invoke", "--event", file)
			if o := outcome(t, out); code != ExitFailed || o["errorType"] != want || o["retryable"] != false {
				t.Errorf("invoke: exit %d, %v\n%s", code, o, stderr)
			}
		})
	}
}

// validate's batch limit is Handle's: a batch of handler.MaxBatch events is
// judged event by event, one more is refused whole.
func TestValidateBatchAtTheLimit(t *testing.T) {
	one, err := os.ReadFile(event("eventbridge-single.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n         int
		errorType string
		code      int
	}{{handler.MaxBatch, "", ExitOK}, {handler.MaxBatch + 1, "batch_too_large", ExitFailed}} {
		t.Run(strconv.Itoa(tc.n), func(t *testing.T) {
			setEnv(t, "STATE_DIR="+t.TempDir())
			file := filepath.Join(t.TempDir(), "batch.json")
			batch := "[" + strings.TrimSuffix(strings.Repeat(string(one)+",", tc.n), ",") + "]"
			if err := os.WriteFile(file, []byte(batch), 0o600); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, code := cli("validate", "--event", file)
			var v validation
			if err := json.Unmarshal([]byte(stdout), &v); err != nil || code != tc.code || v.ErrorType != tc.errorType {
				t.Fatalf("exit %d, %v %+v\n%s", code, err, v.ErrorType, stderr)
			}
			want := tc.n // each judged, or none when the batch is refused whole
			if tc.errorType != "" {
				want = 0
			}
			if len(v.Events) != want {
				t.Fatalf("%d events judged, want %d", len(v.Events), want)
			}
		})
	}
}
