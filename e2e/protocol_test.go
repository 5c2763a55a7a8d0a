package e2e_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemgate/idemgate/internal/dev/proc"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// The README's first command, as a new user runs it: twice, no servers, the
// offline model. The first run executes, the second answers the duplicate.
func TestReadmeInvokeTwice(t *testing.T) {
	dir := t.TempDir()
	run := func() map[string]any {
		cmd := exec.Command(binary, "invoke", "--event", "testdata/events/eventbridge-single.json")
		cmd.Dir, cmd.Env = root, proc.BaseEnv("STATE_DIR="+dir)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("invoke: %v\n%s\n%s", err, stdout.String(), stderr.String())
		}
		var out map[string]any
		if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
			t.Fatalf("outcome is not JSON: %s", stdout.String())
		}
		for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
			if strings.Contains(line, `"idempotency_key"`) && !strings.Contains(line, `"request_id"`) {
				t.Errorf("log line without request_id: %s", line)
			}
		}
		return out
	}
	first, second := run(), run()
	for name, got := range map[string]map[string]any{"invoke-first": first, "invoke-duplicate": second} {
		golden(t, name, got, dir)
	}
	if first["status"] != "SUCCEEDED" || first["decision"] != "FIRST" || first["duplicate"] != false {
		t.Fatalf("first run: %v", first)
	}
	if second["status"] != "SUCCEEDED" || second["duplicate"] != true || second["result_ref"] != first["result_ref"] {
		t.Fatalf("second run: %v", second)
	}
	if first["request_id"] != "req-2f6c1e9a7b3d4e58" {
		t.Fatalf("upstream request id not carried: %v", first["request_id"])
	}
	key := first["idempotency_key"].(string)
	approved, err := os.ReadFile(filepath.Join(dir, "results", "tasks", key, "approved", "result.md"))
	if err != nil {
		t.Fatal(err)
	}
	var output struct {
		Text    string `json:"text"`
		Offline bool   `json:"offline"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "results", "tasks", key, "attempt-001", "output.json"))
	if err != nil || json.Unmarshal(raw, &output) != nil {
		t.Fatalf("attempt output: %v %s", err, raw)
	}
	if string(approved) != output.Text || !output.Offline || !strings.Contains(strings.ToLower(output.Text), "offline") {
		t.Fatalf("approved %q vs output %+v", approved, output)
	}
}

func TestCustomRuntimeProtocol(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(root, "testdata", "events", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	single := read("eventbridge-single.json")
	// The batch's notify URL points at a local receiver (tests reach no other host).
	var hooks atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.Header.Get("Idempotency-Key"), ":notify") {
			hooks.Add(1)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	inst := start(t, "STATE_DIR="+t.TempDir(), "NOTIFY_ALLOWED_HOSTS="+receiver.URL+";loopback")
	batch := bytes.ReplaceAll(read("eventbridge-batch-notify.json"), []byte("http://127.0.0.1:8787/idemgate"), []byte(receiver.URL+"/idemgate"))
	cases := []struct {
		name      string
		body      []byte
		reqID     string
		headers   map[string]string
		status    int
		errorType string
		check     func(t *testing.T, m map[string]any)
	}{
		{name: "first delivery", body: single, reqID: "fc-1", status: 200, check: func(t *testing.T, m map[string]any) {
			if m["decision"] != "FIRST" || m["status"] != "SUCCEEDED" || m["attempt"] != 1.0 {
				t.Fatalf("%v", m)
			}
		}},
		{name: "redelivery with another request id", body: single, reqID: "fc-2", status: 200, check: func(t *testing.T, m map[string]any) {
			if m["decision"] != "REPEAT_DONE" || m["duplicate"] != true {
				t.Fatalf("%v", m)
			}
		}},
		{name: "routed by x-fc-control-path", body: single, reqID: "fc-3", headers: map[string]string{"x-fc-control-path": "/invoke"},
			status: 200, check: func(t *testing.T, m map[string]any) {
				if m["duplicate"] != true {
					t.Fatalf("%v", m)
				}
			}},
		{name: "batch with a double submit", body: batch, reqID: "fc-4", status: 200,
			check: func(t *testing.T, m map[string]any) {
				rs := m["results"].([]any)
				if len(rs) != 3 {
					t.Fatalf("results: %v", rs)
				}
				a, c := rs[0].(map[string]any), rs[2].(map[string]any)
				if a["idempotency_key"] != c["idempotency_key"] || c["duplicate"] != true || a["duplicate"] != false {
					t.Fatalf("double submit not answered as a duplicate: %v", rs)
				}
				if hooks.Load() != 1 {
					t.Fatalf("notifications %d, want 1", hooks.Load())
				}
			}},
		{name: "malformed", body: read("malformed.json"), reqID: "fc-5", status: 404, errorType: "malformed_event"},
		{name: "missing tenant", body: read("invalid-missing-tenant.json"), reqID: "fc-6", status: 404, errorType: "invalid_request"},
		{name: "empty body", body: nil, reqID: "fc-7", status: 404, errorType: "malformed_event"},
		{name: "failure-destination message", body: read("fc-failure-destination.json"), reqID: "fc-8", status: 404, errorType: "dead_letter_message"},
		{name: "timer", body: read("timer-sweep.json"), reqID: "fc-9", status: 200},
		{name: "empty batch", body: []byte(`[]`), reqID: "fc-10", status: 200, check: func(t *testing.T, m map[string]any) {
			if rs, ok := m["results"].([]any); !ok || len(rs) != 0 {
				t.Fatalf("%v", m)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := inst.invoke(t, c.body, c.reqID, c.headers)
			if a.status != c.status {
				t.Fatalf("status %d, want %d: %s", a.status, c.status, a.body)
			}
			m := a.json(t)
			if c.status == 404 {
				if a.header.Get("x-fc-status") != "404" {
					t.Fatalf("x-fc-status = %q", a.header.Get("x-fc-status"))
				}
				if m["errorType"] != c.errorType || m["errorMessage"] == "" {
					t.Fatalf("failure body %s, want errorType %s", a.body, c.errorType)
				}
			}
			if c.check != nil {
				c.check(t, m)
			}
		})
	}
	for _, path := range []string{"/initialize", "/pre-stop"} {
		method := http.MethodPost
		if path == "/pre-stop" {
			method = http.MethodGet
		}
		req, _ := http.NewRequest(method, inst.Base+path, nil)
		req.Header.Set("x-fc-request-id", "lc-"+path)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", path, err, resp)
		}
		resp.Body.Close()
	}
	for _, want := range []string{"FC Invoke Start RequestId: fc-1", "FC Invoke End RequestId: fc-1"} {
		inst.waitOutput(t, want)
	}
}

// Eight concurrent deliveries of one business action, spread over three
// running instances sharing MySQL and Redis: exactly one execution.
func TestThreeInstancesOneExecution(t *testing.T) {
	dsn, redisURL := testenv.MySQLDSN(t), testenv.RedisURL(t)
	llm := newLLMFake(t, 300e6)
	env := append(llm.Env(), "MYSQL_DSN="+dsn, "REDIS_URL="+redisURL, "REDIS_KEY_PREFIX="+testenv.RedisPrefix(t), "STATE_DIR="+t.TempDir())
	migrate(t, env)
	insts := []*instance{start(t, env...), start(t, env...), start(t, env...)}
	content := "three instances " + nonce()
	var wg sync.WaitGroup
	answers := make([]map[string]any, 8)
	for i := range 8 {
		wg.Go(func() {
			// Each delivery is its own event (a redelivery or a double submit).
			body := taskEvent("ev-"+nonce(), content, nil)
			a := insts[i%3].invoke(t, body, "fc-"+nonce(), nil)
			if a.status != 200 {
				t.Errorf("delivery %d: %d %s", i, a.status, a.body)
				return
			}
			answers[i] = a.json(t)
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	executed := 0
	for _, m := range answers {
		if m["duplicate"] == false {
			executed++
			if m["status"] != "SUCCEEDED" {
				t.Fatalf("the executing delivery answered %v", m)
			}
		} else if d := m["decision"]; d != "REPEAT_OTHER" && d != "REPEAT_DONE" {
			t.Fatalf("duplicate decision %v", m)
		}
	}
	if executed != 1 || llm.Total() != 1 {
		t.Fatalf("executions %d, model calls %d; want 1 and 1 (answers %v)", executed, llm.Total(), answers)
	}
	// Afterwards every instance answers the finished result.
	for i, inst := range insts {
		m := inst.invoke(t, taskEvent("late-"+nonce(), content, nil), "fc-late-"+nonce(), nil).json(t)
		if m["status"] != "SUCCEEDED" || m["duplicate"] != true {
			t.Fatalf("instance %d late answer %v", i, m)
		}
	}
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// golden compares an outcome with testdata/golden/<name>.json, with the
// run's state directory written as $STATE_DIR.
func golden(t *testing.T, name string, got map[string]any, stateDir string) {
	t.Helper()
	b, _ := json.MarshalIndent(got, "", "  ")
	b = bytes.ReplaceAll(b, []byte(stateDir), []byte("$STATE_DIR"))
	path := filepath.Join(root, "testdata", "golden", name+".json")
	if *update {
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(bytes.TrimSpace(want), b) {
		t.Fatalf("%s differs from %s:\n%s", name, path, b)
	}
}
