package e2e_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency/idemhttp"
	"github.com/idemgate/idemgate/idempotency/keys"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// The HTTP trigger's API (docs/api.md) against the real binary, with the
// headers FC's HTTP trigger sends, on MySQL and Redis.

// request sends one API request; key "" sends no Idempotency-Key, a key
// starting with "raw:" sends the rest as the field as it is.
func (i *instance) request(t *testing.T, method, path, key, contentType string, body []byte, extra map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(method, i.Base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-fc-control-path", "/http-invoke") // what FC sends with an HTTP trigger's request
	req.Header.Set("x-fc-request-id", "fc-"+nonce())
	req.Header.Set("x-fc-function-timeout", "60")
	req.Header.Set("x-fc-access-key-secret", "SECRET-must-not-leak-"+nonce())
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	switch {
	case strings.HasPrefix(key, "raw:"):
		req.Header.Set(idemhttp.HeaderKey, key[4:])
	case key != "":
		req.Header.Set(idemhttp.HeaderKey, `"`+key+`"`)
	}
	a := send(t, req, extra)
	if bytes.Contains(a.body, []byte("SECRET-must-not-leak")) {
		t.Fatalf("an answer carries the invocation's secret: %s", a.body)
	}
	return a
}

func taskData(content string, extra map[string]any) []byte {
	data := map[string]any{"tenant_id": "acme", "task_type": "summarize", "operation": "summarize",
		"input": map[string]any{"content": content}}
	for k, v := range extra {
		data[k] = v
	}
	b, _ := json.Marshal(data)
	return b
}

// problem checks a is an RFC 9457 answer of the given status and type.
func problem(t *testing.T, a answer, status int, typ string) map[string]any {
	t.Helper()
	if a.status != status || a.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("answer %d %s %s, want %d problem %s", a.status, a.header.Get("Content-Type"), a.body, status, typ)
	}
	m := a.json(t)
	if m["type"] != typ || m["status"] != float64(status) || m["title"] == "" {
		t.Fatalf("problem %s, want type %s", a.body, typ)
	}
	return m
}

func TestHTTPTaskAPI(t *testing.T) {
	llm := newLLMFake(t, 0)
	env := append(llm.Env(), "MYSQL_DSN="+testenv.MySQLDSN(t), "REDIS_URL="+testenv.RedisURL(t), "REDIS_KEY_PREFIX="+testenv.RedisPrefix(t), "STATE_DIR="+t.TempDir())
	migrate(t, env)
	inst := start(t, env...)
	content, key := "over http "+nonce(), "order-"+nonce()

	first := inst.request(t, "POST", "/tasks", key, "application/json", taskData(content, nil), nil)
	m := first.json(t)
	if first.status != 200 || m["status"] != "SUCCEEDED" || m["duplicate"] != false || first.header.Get(idemhttp.HeaderReplayed) != "" {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	k, _ := keys.Explicit("acme", key)
	if m["idempotency_key"] != k {
		t.Fatalf("K %v, want the explicit key's %s (docs/design.md §4)", m["idempotency_key"], k)
	}
	again := inst.request(t, "POST", "/tasks", key, "application/json", taskData(content, nil), nil)
	if n := again.json(t); again.status != 200 || n["duplicate"] != true || n["result_ref"] != m["result_ref"] ||
		again.header.Get(idemhttp.HeaderReplayed) != "true" {
		t.Fatalf("repeat: %d %v %s", again.status, again.header, again.body)
	}
	// The same task as an event naming the key: one task, already done.
	ev := inst.invoke(t, taskEvent("ev-"+nonce(), content, map[string]any{"idempotency_key": key}), "fc-"+nonce(), nil).json(t)
	if ev["idempotency_key"] != k || ev["duplicate"] != true || ev["result_ref"] != m["result_ref"] {
		t.Fatalf("the event of the same key: %v", ev)
	}
	// And the other way round: an event first, then the HTTP submission.
	key2, content2 := "order-"+nonce(), "event first "+nonce()
	ev = inst.invoke(t, taskEvent("ev-"+nonce(), content2, map[string]any{"idempotency_key": key2}), "fc-"+nonce(), nil).json(t)
	h := inst.request(t, "POST", "/tasks", key2, "application/json", taskData(content2, map[string]any{"idempotency_key": key2}), nil)
	if n := h.json(t); ev["status"] != "SUCCEEDED" || n["duplicate"] != true || n["idempotency_key"] != ev["idempotency_key"] {
		t.Fatalf("event %v, then http %s", ev, h.body)
	}
	if llm.Total() != 2 {
		t.Fatalf("%d model calls for two tasks", llm.Total())
	}

	// The task's state, by K and by the client's key.
	for _, path := range []string{"/tasks/" + k, "/tasks/" + key + "?tenant_id=acme"} {
		st := inst.request(t, "GET", path, "", "", nil, nil)
		if s := st.json(t); st.status != 200 || s["status"] != "SUCCEEDED" || s["idempotency_key"] != k || s["result_ref"] != m["result_ref"] {
			t.Fatalf("GET %s: %d %s", path, st.status, st.body)
		}
		for _, internal := range []string{"lease_owner", "fence", "payload_hash", "input_ref"} {
			if bytes.Contains(st.body, []byte(internal)) {
				t.Fatalf("GET %s shows the record's %s: %s", path, internal, st.body)
			}
		}
	}
	problem(t, inst.request(t, "GET", "/tasks/"+strings.Repeat("0", 64), "", "", nil, nil), 404, idemhttp.TypeNotFound)
	problem(t, inst.request(t, "GET", "/tasks/not-a-key", "", "", nil, nil), 400, idemhttp.TypeKeyMalformed)
	problem(t, inst.request(t, "GET", "/nothing-here", "", "", nil, nil), 404, idemhttp.TypeNotFound)

	// Reuse with another input: 422, nothing runs.
	problem(t, inst.request(t, "POST", "/tasks", key, "application/json", taskData("another "+nonce(), nil), nil), 422, idemhttp.TypeKeyReused)
	if llm.Total() != 2 {
		t.Fatal("a reused key ran the model")
	}
	// The control paths are FC's, as before.
	if a := inst.invoke(t, taskEvent("ev-"+nonce(), "control "+nonce(), nil), "fc-"+nonce(), nil); a.status != 200 {
		t.Fatalf("/invoke: %d %s", a.status, a.body)
	}
	out := inst.Output()
	if strings.Contains(out, "SECRET-must-not-leak") || !strings.Contains(out, `"idempotency_key":"`+k+`"`) {
		t.Fatalf("the instance's log holds the invocation's secret, or never names the task's key:\n%s", out)
	}
}

// TestHTTPTaskAPIBadInput: every refusal is problem+json and changes
// nothing (the key has no record afterwards).
func TestHTTPTaskAPIBadInput(t *testing.T) {
	inst := start(t, "STATE_DIR="+t.TempDir(), "LLM_MODEL=offline")
	ok := taskData("fine "+nonce(), nil)
	cases := []struct {
		name, key, ct string
		body          []byte
		status        int
		typ           string
	}{
		{"missing key", "", "application/json", ok, 400, idemhttp.TypeKeyMissing},
		{"unquoted key", "raw:plain-token", "application/json", ok, 400, idemhttp.TypeKeyMalformed},
		{"empty key", `raw:""`, "application/json", ok, 400, idemhttp.TypeKeyMalformed},
		{"overlong key", `raw:"` + strings.Repeat("k", 256) + `"`, "application/json", ok, 400, idemhttp.TypeKeyMalformed},
		{"not JSON", "k-" + nonce(), "application/json", []byte(`{"tenant_id":`), 400, idemhttp.TypeMalformedBody},
		{"not JSON media type", "k-" + nonce(), "text/plain", ok, 415, idemhttp.TypeUnsupportedMedia},
		{"oversized", "k-" + nonce(), "application/json", taskData(strings.Repeat("x", 1<<20+100<<10), nil), 413, idemhttp.TypeBodyTooLarge},
		{"an array", "k-" + nonce(), "application/json", []byte(`[1]`), 400, idemhttp.TypeMalformedBody},
		{"missing tenant", "k-" + nonce(), "application/json", []byte(`{"task_type":"summarize","operation":"summarize","input":{}}`), 400, idemhttp.TypeMalformedBody},
		{"unknown task type", "k-" + nonce(), "application/json", []byte(`{"tenant_id":"acme","task_type":"nope","operation":"x","input":{}}`), 400, idemhttp.TypeMalformedBody},
		{"another idempotency_key in the body", "k-" + nonce(), "application/json", taskData("x", map[string]any{"idempotency_key": "other"}), 400, idemhttp.TypeMalformedBody},
		{"duplicate member", "k-" + nonce(), "application/json", []byte(`{"tenant_id":"a","tenant_id":"b","task_type":"summarize","operation":"s","input":{}}`), 400, idemhttp.TypeMalformedBody},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			problem(t, inst.request(t, "POST", "/tasks", c.key, c.ct, c.body, nil), c.status, c.typ)
			if id, ok := strings.CutPrefix(c.key, "k-"); ok {
				problem(t, inst.request(t, "GET", "/tasks/k-"+id+"?tenant_id=acme", "", "", nil, nil), 404, idemhttp.TypeNotFound)
			}
		})
	}
}

// TestHTTPTaskAPIAsync: with X-Fc-Invocation-Type: Async a failure is
// marked for FC to retry or dead-letter (x-fc-status: 404), a success not.
func TestHTTPTaskAPIAsync(t *testing.T) {
	inst := start(t, "STATE_DIR="+t.TempDir(), "LLM_MODEL=offline")
	async := map[string]string{"X-Fc-Invocation-Type": "Async"}
	a := inst.request(t, "POST", "/tasks", "k-"+nonce(), "application/json", taskData("async "+nonce(), nil), async)
	if a.status != 200 || a.header.Get("x-fc-status") != "" || a.json(t)["status"] != "SUCCEEDED" {
		t.Fatalf("async success: %d %v %s", a.status, a.header, a.body)
	}
	a = inst.request(t, "POST", "/tasks", "k-"+nonce(), "application/json", []byte(`{"task_type":"nope"}`), async)
	problem(t, a, 400, idemhttp.TypeMalformedBody)
	if a.header.Get("x-fc-status") != "404" {
		t.Fatalf("an async failure FC would not retry: %v", a.header)
	}
	sync := inst.request(t, "POST", "/tasks", "k-"+nonce(), "application/json", []byte(`{"task_type":"nope"}`), nil)
	if sync.header.Get("x-fc-status") != "" {
		t.Fatalf("a synchronous answer marked for FC: %v", sync.header)
	}
}

// TestHTTPTaskAPIConcurrent: 32 identical POSTs at once, over two
// instances on MySQL and Redis: one execution; every other answer is the
// replay or 409 in flight with Retry-After.
func TestHTTPTaskAPIConcurrent(t *testing.T) {
	llm := newLLMFake(t, 300*time.Millisecond)
	env := append(llm.Env(), "MYSQL_DSN="+testenv.MySQLDSN(t), "REDIS_URL="+testenv.RedisURL(t), "REDIS_KEY_PREFIX="+testenv.RedisPrefix(t), "STATE_DIR="+t.TempDir())
	migrate(t, env)
	insts := []*instance{start(t, env...), start(t, env...)}
	key, body := "burst-"+nonce(), taskData("burst "+nonce(), nil)
	const n = 32
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { answers[i] = insts[i%2].request(t, "POST", "/tasks", key, "application/json", body, nil) })
	}
	wg.Wait()
	fresh := 0
	for _, a := range answers {
		switch {
		case a.status == 200 && a.json(t)["duplicate"] == false:
			fresh++
		case a.status == 200 && a.header.Get(idemhttp.HeaderReplayed) == "true" && a.json(t)["status"] == "SUCCEEDED":
		case a.status == 409 && a.header.Get("Retry-After") != "":
			problem(t, a, 409, idemhttp.TypeInFlight)
		default:
			t.Fatalf("answer %d %v %s", a.status, a.header, a.body)
		}
	}
	if fresh != 1 || llm.Total() != 1 {
		t.Fatalf("%d fresh answers, %d model calls; want 1 and 1", fresh, llm.Total())
	}
	if a := insts[1].request(t, "POST", "/tasks", key, "application/json", body, nil); a.status != 200 || a.header.Get(idemhttp.HeaderReplayed) != "true" {
		t.Fatalf("after the burst: %d %s", a.status, a.body)
	}
}

// TestHTTPTaskAPIRetryable: a retryable failure (the model answers 503) is
// 503 with Retry-After and not stored; the client's retry with the same key
// runs the task again and succeeds; a FINAL one (400) is 422 task-failed, to
// every repeat.
func TestHTTPTaskAPIRetryable(t *testing.T) {
	llm := newLLMFake(t, 0)
	inst := start(t, append(llm.Env(), "STATE_DIR="+t.TempDir())...)
	llm.Set(func(n int64) (time.Duration, int) { return 0, map[bool]int{true: 503, false: 200}[n == 1] })
	key, body := "retry-"+nonce(), taskData("retryable "+nonce(), nil)
	p := problem(t, inst.request(t, "POST", "/tasks", key, "application/json", body, nil), 503, idemhttp.TypeUnavailable)
	if p["retryable"] != true || p["code"] == "" {
		t.Fatalf("problem %v", p)
	}
	// A retry within the failure's back-off (1 s) is 503 retry_later, its
	// Retry-After the back-off; the retry after it runs the task again.
	a := inst.request(t, "POST", "/tasks", key, "application/json", body, nil)
	for a.status == 503 && a.json(t)["code"] == "retry_later" {
		if ra := a.header.Get("Retry-After"); ra != "1" {
			t.Fatalf("Retry-After %q within a 1 s back-off", ra)
		}
		time.Sleep(200 * time.Millisecond)
		a = inst.request(t, "POST", "/tasks", key, "application/json", body, nil)
	}
	if m := a.json(t); a.status != 200 || m["status"] != "SUCCEEDED" || m["decision"] != "TAKEOVER" || m["attempt"] != float64(2) {
		t.Fatalf("the retry: %d %s", a.status, a.body)
	}

	llm.Set(func(int64) (time.Duration, int) { return 0, 400 })
	key, body = "final-"+nonce(), taskData("final "+nonce(), nil)
	first := inst.request(t, "POST", "/tasks", key, "application/json", body, nil)
	problem(t, first, 422, "https://github.com/idemgate/idemgate/blob/main/docs/api.md#task-failed")
	again := inst.request(t, "POST", "/tasks", key, "application/json", body, nil)
	problem(t, again, 422, "https://github.com/idemgate/idemgate/blob/main/docs/api.md#task-failed")
	if first.header.Get(idemhttp.HeaderReplayed) != "" || again.header.Get(idemhttp.HeaderReplayed) != "true" {
		t.Fatalf("replay marks: first %v, again %v", first.header, again.header)
	}
	if calls := llm.Total(); calls != 3 {
		t.Fatalf("%d model calls, want 3 (503, 200, 400; the FINAL repeat runs nothing)", calls)
	}
}
