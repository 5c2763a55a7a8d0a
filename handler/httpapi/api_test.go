package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/httpapi"
	"github.com/idemgate/idemgate/idempotency/idemhttp"
	"github.com/idemgate/idemgate/idempotency/keys"
	"github.com/idemgate/idemgate/internal/app"
	"github.com/idemgate/idemgate/internal/config"
	"github.com/idemgate/idemgate/internal/logx"
)

// newAPI is the task API on the wired function (the embedded store, the
// offline model) with env's settings besides.
func newAPI(t *testing.T, env map[string]string) *httpapi.API {
	t.Helper()
	all := map[string]string{"STATE_DIR": t.TempDir(), "LLM_MODEL": config.OfflineModel}
	for k, v := range env {
		all[k] = v
	}
	cfg, err := config.Load(func(k string) string { return all[k] })
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	a, err := app.Open(cfg, log, &logx.Redactor{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return &httpapi.API{Pipeline: a.Pipeline, Log: log}
}

// api is newAPI served in-process.
func api(t *testing.T, env map[string]string) *httptest.Server {
	h := newAPI(t, env)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.Serve(r.Context(), w, r, handler.Meta{RequestID: r.Header.Get("x-fc-request-id"), RetryCount: -1})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// call sends one request to srv (key: the Idempotency-Key header's value, if
// any) and decodes the JSON it answers.
func call(t *testing.T, srv *httptest.Server, method, path, key, body string, header map[string]string) (*http.Response, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(idemhttp.HeaderKey, key)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp, m
}

const task = `{"tenant_id":"acme","task_type":"summarize","operation":"summarize","input":{"content":"in-process"}}`

func TestRoutes(t *testing.T) {
	srv := api(t, nil)
	do := func(method, path, key, body string, header map[string]string) (*http.Response, map[string]any) {
		return call(t, srv, method, path, key, body, header)
	}
	first, out := do("POST", "/tasks", `"k1"`, task, nil)
	if first.StatusCode != 200 || out["status"] != "SUCCEEDED" {
		t.Fatalf("%d %v", first.StatusCode, out)
	}
	k := out["idempotency_key"].(string)
	cases := []struct {
		name, method, path, key, body string
		header                        map[string]string
		status                        int
		typ, allow, replayed, fcStat  string
	}{
		{name: "repeat", method: "POST", path: "/tasks", key: `"k1"`, body: task, status: 200, replayed: "true"},
		{name: "state by K", method: "GET", path: "/tasks/" + k, status: 200},
		{name: "state by key and tenant", method: "GET", path: "/tasks/k1?tenant_id=acme", status: 200},
		{name: "state of another tenant's key", method: "GET", path: "/tasks/k1?tenant_id=globex", status: 404, typ: idemhttp.TypeNotFound},
		{name: "PUT /tasks", method: "PUT", path: "/tasks", status: 405, typ: httpapi.TypeMethodNotAllowed, allow: "POST"},
		{name: "DELETE a task", method: "DELETE", path: "/tasks/" + k, status: 405, typ: httpapi.TypeMethodNotAllowed, allow: "GET, HEAD"},
		{name: "a deeper path", method: "GET", path: "/tasks/a/b", status: 404, typ: idemhttp.TypeNotFound},
		{name: "a key that is not UTF-8", method: "GET", path: "/tasks/%FF?tenant_id=acme", status: 400, typ: idemhttp.TypeKeyMalformed},
		{name: "a tenant that is not UTF-8", method: "GET", path: "/tasks/k1?tenant_id=%FF", status: 400, typ: idemhttp.TypeKeyMalformed},
		{name: "another path", method: "POST", path: "/orders", status: 404, typ: idemhttp.TypeNotFound},
		{name: "async failure is marked for FC", method: "POST", path: "/tasks", key: `"k2"`, body: `{}`,
			header: map[string]string{"X-Fc-Invocation-Type": "async"}, status: 400, typ: idemhttp.TypeMalformedBody, fcStat: "404"},
		{name: "async replay is not", method: "POST", path: "/tasks", key: `"k1"`, body: task,
			header: map[string]string{"X-Fc-Invocation-Type": "Async"}, status: 200, replayed: "true"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, m := do(c.method, c.path, c.key, c.body, c.header)
			if resp.StatusCode != c.status || resp.Header.Get("Allow") != c.allow ||
				resp.Header.Get(idemhttp.HeaderReplayed) != c.replayed || resp.Header.Get("x-fc-status") != c.fcStat {
				t.Fatalf("%d %v %v", resp.StatusCode, resp.Header, m)
			}
			if c.typ != "" && (m["type"] != c.typ || resp.Header.Get("Content-Type") != "application/problem+json") {
				t.Fatalf("problem %v, want %s", m, c.typ)
			}
		})
	}
}

// A client that hangs up (its request's context ends) does not cancel its
// task: the task runs to its end, and a retry is answered from the record
// instead of taking the lease over and running the model again. FC's
// deadline still bounds the task (docs/api.md, "Retries").
func TestHangUpDoesNotCancelTheTask(t *testing.T) {
	h := newAPI(t, nil)
	post := func(ctx context.Context, key, requestID string) (*httptest.ResponseRecorder, map[string]any) {
		r := httptest.NewRequest(http.MethodPost, "/tasks", strings.NewReader(task))
		r.Header.Set(idemhttp.HeaderKey, key)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.Serve(ctx, w, r, handler.Meta{RequestID: requestID, RetryCount: -1})
		var m map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &m)
		return w, m
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel() // the client has gone before the task starts
	past, cancelPast := context.WithDeadline(gone, time.Now().Add(-time.Second))
	defer cancelPast()
	cases := []struct {
		name, key, requestID string
		ctx                  context.Context
		status               int
		decision, replayed   string
	}{
		{name: "the client hung up", key: `"hang-up-1"`, requestID: "req-hang-up", ctx: gone, status: 200, decision: "FIRST"},
		{name: "its retry is answered from the record", key: `"hang-up-1"`, requestID: "req-retry", ctx: context.Background(),
			status: 200, decision: "REPEAT_DONE", replayed: "true"},
		{name: "FC's deadline has passed", key: `"hang-up-2"`, requestID: "req-late", ctx: past, status: 503},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, m := post(c.ctx, c.key, c.requestID)
			if w.Code != c.status || w.Header().Get(idemhttp.HeaderReplayed) != c.replayed || (c.decision != "" && m["decision"] != c.decision) {
				t.Fatalf("%d (replayed %q): %s", w.Code, w.Header().Get(idemhttp.HeaderReplayed), w.Body)
			}
		})
	}
}

// sfString is key as an Idempotency-Key header value (RFC 8941 sf-string).
func sfString(key string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
}

// Any key POST accepts is read back by GET /tasks/{key}?tenant_id=, the key
// sent as one escaped path segment; a path of more segments is no task's.
func TestKeyReadBackFromItsEscapedSegment(t *testing.T) {
	srv := api(t, nil)
	ks := map[string]string{} // client key -> K
	for _, key := range []string{"a/b", "b", "%2F", "a b", "100%", "x?y#z", `q"uo\te`, "a/../b", "+plus"} {
		resp, out := call(t, srv, "POST", "/tasks", sfString(key), task, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("POST %q: %d %v", key, resp.StatusCode, out)
		}
		ks[key] = out["idempotency_key"].(string)
	}
	cases := []struct {
		name, path string
		status     int
		k          string // the K answered, when 200
	}{
		{name: "a slash", path: "/tasks/a%2Fb?tenant_id=acme", status: 200, k: ks["a/b"]},
		{name: "an escape's text", path: "/tasks/%252F?tenant_id=acme", status: 200, k: ks["%2F"]},
		{name: "a space", path: "/tasks/a%20b?tenant_id=acme", status: 200, k: ks["a b"]},
		{name: "a percent sign", path: "/tasks/100%25?tenant_id=acme", status: 200, k: ks["100%"]},
		{name: "query and fragment marks", path: "/tasks/x%3Fy%23z?tenant_id=acme", status: 200, k: ks["x?y#z"]},
		{name: "a quote and a backslash", path: "/tasks/" + url.PathEscape(`q"uo\te`) + "?tenant_id=acme", status: 200, k: ks[`q"uo\te`]},
		{name: "dot segments inside the key", path: "/tasks/a%2F..%2Fb?tenant_id=acme", status: 200, k: ks["a/../b"]},
		{name: "a plus is not a space", path: "/tasks/+plus?tenant_id=acme", status: 200, k: ks["+plus"]},
		{name: "a needless escape", path: "/tasks/%62?tenant_id=acme", status: 200, k: ks["b"]},
		{name: "two segments are not a key", path: "/tasks/a/b?tenant_id=acme", status: 404},
		{name: "a key and a segment more", path: "/tasks/a%2Fb/c?tenant_id=acme", status: 404},
		{name: "an empty segment first", path: "/tasks//b?tenant_id=acme", status: 404},
		{name: "a trailing slash", path: "/tasks/b/?tenant_id=acme", status: 404},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, m := call(t, srv, "GET", c.path, "", "", nil)
			if resp.StatusCode != c.status {
				t.Fatalf("GET %s: %d %v", c.path, resp.StatusCode, m)
			}
			if c.status == 200 && m["idempotency_key"] != c.k {
				t.Fatalf("GET %s read %v, want K %s", c.path, m["idempotency_key"], c.k)
			}
			if c.status == 404 && m["type"] != idemhttp.TypeNotFound {
				t.Fatalf("GET %s: %v, want a not-found problem", c.path, m)
			}
		})
	}
}

// Under KEY_JMESPATH a task's K is its expression's, for POST as for an
// event (docs/design.md §4): the Idempotency-Key does not name it, so a
// lookup by the client's key is refused with a problem saying to use K,
// not answered 404 as if the task did not exist.
func TestKeyJMESPathLookup(t *testing.T) {
	const expr = "[tenant_id, input.content]"
	srv := api(t, map[string]string{"KEY_JMESPATH": expr})
	resp, first := call(t, srv, "POST", "/tasks", `"jp-1"`, task, nil)
	if resp.StatusCode != 200 || first["decision"] != "FIRST" {
		t.Fatalf("POST: %d %v", resp.StatusCode, first)
	}
	k := first["idempotency_key"].(string)
	explicit, _ := keys.Explicit("acme", "jp-1")
	if k == explicit {
		t.Fatalf("POST ignored KEY_JMESPATH: K is keys.Explicit's %s", k)
	}
	if want, err := keys.FromJMESPath([]byte(task), expr); err != nil || k != want {
		t.Fatalf("K %s, docs/api.md says keys.FromJMESPath's %s (%v)", k, want, err)
	}
	cases := []struct {
		name, method, path, key, body string
		status                        int
		typ, decision                 string
	}{
		{name: "another key, the same selection, is the same task", method: "POST", path: "/tasks", key: `"jp-2"`, body: task,
			status: 200, decision: "REPEAT_DONE"},
		{name: "by K", method: "GET", path: "/tasks/" + k, status: 200},
		{name: "by the client's key", method: "GET", path: "/tasks/jp-1?tenant_id=acme", status: 400, typ: httpapi.TypeKeyLookupUnavailable},
		{name: "by a key never sent", method: "GET", path: "/tasks/nope?tenant_id=acme", status: 400, typ: httpapi.TypeKeyLookupUnavailable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, m := call(t, srv, c.method, c.path, c.key, c.body, nil)
			if resp.StatusCode != c.status || (c.typ != "" && m["type"] != c.typ) ||
				(c.decision != "" && m["decision"] != c.decision) || (c.status == 200 && m["idempotency_key"] != k) {
				t.Fatalf("%d %v", resp.StatusCode, m)
			}
		})
	}
}

// A client whose body is cut off in transit (it sent fewer bytes than its
// Content-Length, then closed its side) is told to send it again, 408
// retryable, and nothing is recorded: its retry runs the task as the first.
func TestCutOffBodyIsRetryable(t *testing.T) {
	srv := api(t, nil)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
		"Idempotency-Key: \"cut-1\"\r\nContent-Length: %d\r\n\r\n%s", len(task), task[:len(task)/2])
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || p["type"] != idemhttp.TypeBodyIncomplete || p["retryable"] != true {
		t.Fatalf("a cut-off body: %d %v", resp.StatusCode, p)
	}
	if resp, m := call(t, srv, "GET", "/tasks/cut-1?tenant_id=acme", "", "", nil); resp.StatusCode != 404 {
		t.Fatalf("a cut-off body left a record: %d %v", resp.StatusCode, m)
	}
	if resp, m := call(t, srv, "POST", "/tasks", `"cut-1"`, task, nil); resp.StatusCode != 200 || m["decision"] != "FIRST" {
		t.Fatalf("its retry: %d %v", resp.StatusCode, m)
	}
}

// Under KEY_FALLBACK=fingerprint a task without tenant_id is keyed by its
// data's fingerprint, not by its Idempotency-Key; a lookup by the key cannot
// tell such a task from none, so its 404 says where to look. One without
// operation keeps its key and is found by it.
func TestKeyFallbackLookup(t *testing.T) {
	srv := api(t, map[string]string{"KEY_FALLBACK": "fingerprint"})
	post := func(key, body string) string {
		resp, first := call(t, srv, "POST", "/tasks", key, body, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("POST: %d %v", resp.StatusCode, first)
		}
		return first["idempotency_key"].(string)
	}
	noOp := post(`"fb-1"`, `{"tenant_id":"acme","task_type":"summarize","input":{"content":"x"}}`)
	noTenant := post(`"fb-2"`, `{"task_type":"summarize","operation":"summarize","input":{"content":"y"}}`)
	cases := []struct {
		name, path string
		status     int
		detail     string // a fragment of the problem's detail
	}{
		{name: "by K", path: "/tasks/" + noOp, status: 200},
		{name: "without operation, by the client's key", path: "/tasks/fb-1?tenant_id=acme", status: 200},
		{name: "without tenant_id, by K", path: "/tasks/" + noTenant, status: 200},
		{name: "without tenant_id, by the client's key", path: "/tasks/fb-2?tenant_id=acme", status: 404, detail: "KEY_FALLBACK=fingerprint"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, m := call(t, srv, "GET", c.path, "", "", nil)
			detail, _ := m["detail"].(string)
			if resp.StatusCode != c.status || !strings.Contains(detail, c.detail) {
				t.Fatalf("%d %v", resp.StatusCode, m)
			}
		})
	}
}

// The header is the key and is required (docs/api.md, the IETF
// Idempotency-Key draft): a body's idempotency_key alone is key-missing,
// another one beside the header is refused with a message that offers only
// what is accepted, and the same one in both runs the task.
func TestKeyInTheBodyAndTheHeader(t *testing.T) {
	srv := api(t, nil)
	withKey := func(k string) string {
		return `{"tenant_id":"acme","task_type":"summarize","operation":"summarize","idempotency_key":"` + k + `","input":{"content":"keyed"}}`
	}
	cases := []struct {
		name, header, body string
		status             int
		typ, detail        string
	}{
		{"only the body's key", "", withKey("k9"), 400, idemhttp.TypeKeyMissing, "requires the Idempotency-Key header"},
		{"another key in the body", `"k9"`, withKey("k10"), 400, idemhttp.TypeMalformedBody,
			"differs from the Idempotency-Key header: send the same key in both, or leave it out of the body (the header is required)"},
		{"the same key in both", `"k9"`, withKey("k9"), 200, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, m := call(t, srv, "POST", "/tasks", c.header, c.body, nil)
			detail, _ := m["detail"].(string)
			if resp.StatusCode != c.status || c.typ != "" && m["type"] != c.typ || !strings.Contains(detail, c.detail) {
				t.Fatalf("%d %v; want %d %s saying %q", resp.StatusCode, m, c.status, c.typ, c.detail)
			}
			if strings.Contains(detail, "send one of them") {
				t.Fatalf("the answer offers the body's key alone, which is key-missing: %q", detail)
			}
		})
	}
}
