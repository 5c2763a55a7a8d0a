package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgate/idemgate/internal/dev/proc"
)

// With a model key in the environment (the shell of someone who also uses
// DashScope), `main invoke` calls no model unless LLM_MODEL names one — the
// README's first command stays offline — and, when it does, says which on
// stderr before the request leaves.
func TestInvokeCallsARealModelOnlyWhenNamed(t *testing.T) {
	tests := []struct {
		name      string
		model     string // LLM_MODEL
		wantCalls int32
		wantSaid  string // on stderr
	}{
		{"LLM_MODEL unset: offline", "", 0, "invoke: the offline model (LLM_MODEL is unset; LLM_MODEL=qwen-plus calls the model"},
		{"LLM_MODEL=offline, as the README runs it", "offline", 0, ""},
		{"LLM_MODEL named: called, said first", "qwen-plus", 1, "invoke: calling the model qwen-plus at http://127.0.0.1:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr proc.Buffer
			var calls, saidFirst atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				if tc.wantSaid != "" && strings.Contains(stderr.String(), tc.wantSaid) {
					saidFirst.Add(1)
				}
				http.Error(w, `{"error":{"message":"tripwire"}}`, http.StatusBadRequest)
			}))
			defer srv.Close()
			setEnv(t, "DASHSCOPE_API_KEY=sk-test-tripwire", "LLM_API_KEY=sk-test-tripwire", "LLM_BASE_URL="+srv.URL+"/v1",
				"LLM_MODEL="+tc.model)
			var stdout bytes.Buffer
			code := Run([]string{"invoke", "-q", "--event", uniqueTask(t)}, &stdout, &stderr)
			if calls.Load() != tc.wantCalls {
				t.Fatalf("model calls %d, want %d\nstdout %s\nstderr %s", calls.Load(), tc.wantCalls, stdout.String(), stderr.String())
			}
			if tc.wantCalls == 0 {
				if o := outcome(t, stdout.String()); code != ExitOK || o["status"] != "SUCCEEDED" {
					t.Fatalf("exit %d, %v\n%s", code, o, stderr.String())
				}
				if strings.Contains(stderr.String(), "calling the model") {
					t.Fatalf("stderr says a model is called:\n%s", stderr.String())
				}
			}
			if tc.wantSaid != "" && !strings.Contains(stderr.String(), tc.wantSaid) {
				t.Fatalf("stderr lacks %q:\n%s", tc.wantSaid, stderr.String())
			}
			if tc.wantCalls > 0 && saidFirst.Load() != tc.wantCalls {
				t.Fatalf("the model was called before stderr named it:\n%s", stderr.String())
			}
		})
	}
}
