package idemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/idemhttp"
	"github.com/idemgate/idemgate/idempotency/keys"
)

// app is the service under test: routes whose handlers count their runs.
type app struct {
	t       *testing.T
	h       Harness
	eng     *idempotency.Engine
	srv     *httptest.Server
	runs    atomic.Int64
	mu      sync.Mutex
	gate    chan struct{} // the slow route blocks on it
	started chan struct{} // the slow route signals its start
	answer  atomic.Int64  // the status /status answers
}

const principalHeader = "X-Test-Principal"

func newApp(t *testing.T, h Harness, engOpts ...idempotency.Option) *app {
	a := &app{t: t, h: h, gate: make(chan struct{}), started: make(chan struct{}, 64)}
	// A short back-off after a retryable failure, so that retries run soon
	// (a test that is about the back-off sets its own).
	a.eng = h.NewEngine(t, append([]idempotency.Option{idempotency.WithBlobStore(&MemBlobs{}),
		idempotency.WithRetryBackoff(20 * time.Millisecond)}, engOpts...)...)
	m := idemhttp.New(a.eng, idemhttp.WithMaxBody(4096), idemhttp.WithStoredHeaders("X-Order"),
		idemhttp.WithLogger(TestLogger(t)),
		idemhttp.WithPrincipal(func(r *http.Request) (string, error) {
			if p := r.Header.Get(principalHeader); p != "nobody" {
				return p, nil
			}
			return "", errors.New("unknown principal")
		}))
	mux := http.NewServeMux()
	mux.Handle("POST /orders", m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := a.runs.Add(1)
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", fmt.Sprintf("/orders/%d", n))
		w.Header().Set("X-Order", fmt.Sprint(n))
		w.Header().Set("X-Unnamed", "fresh-only")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":%d,"echo":%s}`, n, body)
	}), idemhttp.JSONBody()))
	mux.Handle("POST /slow", m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.runs.Add(1)
		a.started <- struct{}{}
		select {
		case <-a.gate:
		case <-r.Context().Done(): // what a handler that honours its context does
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "done")
	})))
	mux.Handle("POST /status", m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.runs.Add(1)
		w.WriteHeader(int(a.answer.Load()))
		fmt.Fprintf(w, "answer %d", a.runs.Load())
	})))
	mux.Handle("POST /large", m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := a.runs.Add(1)
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(bytes.Repeat([]byte{byte(n)}, 256<<10))
	})))
	mux.Handle("POST /optional", m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.runs.Add(1)
		fmt.Fprint(w, "ok")
	}), idemhttp.Optional()))
	mux.Handle("/any", m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %d", r.Method, a.runs.Add(1))
	})))
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

type reply struct {
	status  int
	header  http.Header
	body    []byte
	problem struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
		Code   string `json:"code"`
	}
}

// post sends one request; key "" sends no header, a key starting with "raw:"
// sends the rest as the field as it is.
func (a *app) post(path, key, principal, contentType, body string) reply {
	a.t.Helper()
	return a.send(http.MethodPost, "POST "+path, path, key, principal, contentType, body)
}

// send is post with another method, to a route registered as route (the
// mux pattern: the middleware's default route name).
func (a *app) send(method, route, path, key, principal, contentType, body string) reply {
	a.t.Helper()
	req, _ := http.NewRequest(method, a.srv.URL+path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set(principalHeader, principal)
	switch {
	case strings.HasPrefix(key, "raw:"):
		req.Header.Set(idemhttp.HeaderKey, key[4:])
	case key != "":
		req.Header.Set(idemhttp.HeaderKey, `"`+key+`"`)
		k, _ := keys.HTTPRequest(principal, method, route, key)
		a.forget(k)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	r := reply{status: resp.StatusCode, header: resp.Header}
	r.body, _ = io.ReadAll(resp.Body)
	if resp.Header.Get("Content-Type") == "application/problem+json" {
		if err := json.Unmarshal(r.body, &r.problem); err != nil || r.problem.Type == "" || r.problem.Status != r.status {
			a.t.Fatalf("a problem that is not RFC 9457: %s %v", r.body, err)
		}
	}
	return r
}

// postLater is post as a client that honours Retry-After sends it: again
// while the key's retryable failure is in its back-off (503 retry_later).
func (a *app) postLater(path, key, principal, contentType, body string) reply {
	a.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		r := a.post(path, key, principal, contentType, body)
		if r.status != http.StatusServiceUnavailable || r.problem.Code != "retry_later" || time.Now().After(deadline) {
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// forget drops, when the test ends, what the key left in the fast layer.
func (a *app) forget(k string) {
	if a.h.Fast != nil {
		a.t.Cleanup(func() { _ = a.h.Fast.Forget(context.Background(), k) })
	}
}

// recorded reports whether the key has a record: refused requests change nothing.
func (a *app) recorded(path, principal, key string) bool {
	k, _ := keys.HTTPRequest(principal, http.MethodPost, "POST "+path, key)
	_, err := a.eng.Get(context.Background(), k)
	if err != nil && !errors.Is(err, driver.ErrNotFound) {
		a.t.Fatal(err)
	}
	return err == nil
}

// record reads the key's record.
func (a *app) record(path, principal, key string) driver.Record {
	k, _ := keys.HTTPRequest(principal, http.MethodPost, "POST "+path, key)
	rec, err := a.eng.Get(context.Background(), k)
	if err != nil {
		a.t.Fatal(err)
	}
	return rec
}

var httpSeq atomic.Int64

func httpKey(t *testing.T) string {
	return fmt.Sprintf("%s-%d-%d", t.Name(), time.Now().UnixNano(), httpSeq.Add(1))
}

// RunHTTP is the table of the draft's cases
// (draft-ietf-httpapi-idempotency-key-header) and of the outcomes
// idemhttp's middleware stores, against a real server and client on h's
// store configuration: every store runs it (Run).
func RunHTTP(t *testing.T, h Harness) {
	for _, c := range httpCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newApp(t, h)) })
	}
	t.Run("waits for the request in flight", func(t *testing.T) {
		met := make(chan struct{}, 8) // a claim met the first request's live lease
		a := newApp(t, h, idempotency.WithWaitInFlight(10*time.Second), idempotency.WithObserver(func(d idempotency.Decision, _ idempotency.Tier) {
			if d == idempotency.DecisionRepeatOther {
				met <- struct{}{}
			}
		}))
		httpWaitInFlight(t, a, met)
	})
	t.Run("a retry within the back-off is 503 with Retry-After and runs nothing", func(t *testing.T) {
		a := newApp(t, h, idempotency.WithRetryBackoff(3*time.Second))
		a.answer.Store(http.StatusBadGateway)
		k := httpKey(t)
		if r := a.post("/status", k, "acme", "", "x"); r.status != http.StatusBadGateway {
			t.Fatalf("first: %d", r.status)
		}
		r := a.post("/status", k, "acme", "", "x")
		if r.status != 503 || r.problem.Type != idemhttp.TypeUnavailable || r.problem.Code != "retry_later" ||
			(r.header.Get("Retry-After") != "2" && r.header.Get("Retry-After") != "3") || a.runs.Load() != 1 {
			t.Fatalf("%d %v %s, %d runs", r.status, r.header, r.body, a.runs.Load())
		}
	})
	t.Run("32 concurrent identical requests run once", func(t *testing.T) { httpConcurrent(t, newApp(t, h)) })
}

var httpCases = []struct {
	name string
	run  func(t *testing.T, a *app)
}{
	{"first request runs, a repeat replays it exactly and marks it", func(t *testing.T, a *app) {
		k := httpKey(t)
		first := a.post("/orders", k, "acme", "application/json", `{"sku":"a","n":1}`)
		if first.status != 201 || first.header.Get(idemhttp.HeaderReplayed) != "" || first.header.Get("X-Unnamed") == "" {
			t.Fatalf("first: %d %v %s", first.status, first.header, first.body)
		}
		again := a.post("/orders", k, "acme", "application/json", `{ "n": 1, "sku": "a" }`) // the same JSON
		if again.status != 201 || !bytes.Equal(again.body, first.body) || again.header.Get(idemhttp.HeaderReplayed) != "true" {
			t.Fatalf("replay: %d %v %s", again.status, again.header, again.body)
		}
		for _, h := range []string{"Content-Type", "Location", "X-Order"} {
			if again.header.Get(h) != first.header.Get(h) {
				t.Fatalf("header %s replayed as %q, was %q", h, again.header.Get(h), first.header.Get(h))
			}
		}
		if again.header.Get("X-Unnamed") != "" {
			t.Fatal("a header the middleware was not told to store was replayed")
		}
		if a.runs.Load() != 1 {
			t.Fatalf("%d runs", a.runs.Load())
		}
	}},
	{"reuse with another body is 422 and runs nothing", func(t *testing.T, a *app) {
		k := httpKey(t)
		a.post("/orders", k, "acme", "application/json", `{"sku":"a"}`)
		r := a.post("/orders", k, "acme", "application/json", `{"sku":"b"}`)
		if r.status != 422 || r.problem.Type != idemhttp.TypeKeyReused || a.runs.Load() != 1 {
			t.Fatalf("%d %s, %d runs", r.status, r.body, a.runs.Load())
		}
	}},
	{"the key is scoped by the principal", func(t *testing.T, a *app) {
		k := httpKey(t)
		x := a.post("/orders", k, "acme", "application/json", `{}`)
		y := a.post("/orders", k, "globex", "application/json", `{}`)
		if x.status != 201 || y.status != 201 || y.header.Get(idemhttp.HeaderReplayed) != "" || a.runs.Load() != 2 {
			t.Fatalf("%d %d, %d runs", x.status, y.status, a.runs.Load())
		}
		if r := a.post("/orders", httpKey(t), "nobody", "application/json", `{}`); r.status != 401 || r.problem.Type != idemhttp.TypeUnauthenticated {
			t.Fatalf("no principal: %d %s", r.status, r.body)
		}
	}},
	{"the key is scoped by the method", func(t *testing.T, a *app) {
		k := httpKey(t)
		x := a.send(http.MethodPost, "/any", "/any", k, "acme", "", "x")
		y := a.send(http.MethodPut, "/any", "/any", k, "acme", "", "x")
		if x.status != 200 || y.status != 200 || string(y.body) != "PUT 2" || y.header.Get(idemhttp.HeaderReplayed) != "" {
			t.Fatalf("POST %d %q, then PUT %d %q", x.status, x.body, y.status, y.body)
		}
	}},
	{"every unsafe method is keyed", func(t *testing.T, a *app) {
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if r := a.send(m, "/any", "/any", "", "acme", "", "x"); r.status != 400 || r.problem.Type != idemhttp.TypeKeyMissing {
				t.Fatalf("%s without a key: %d %s", m, r.status, r.body)
			}
			k := httpKey(t)
			first := a.send(m, "/any", "/any", k, "acme", "", "x")
			again := a.send(m, "/any", "/any", k, "acme", "", "x")
			if again.header.Get(idemhttp.HeaderReplayed) != "true" || string(again.body) != string(first.body) {
				t.Fatalf("%s repeated: %d %q after %q", m, again.status, again.body, first.body)
			}
		}
		if a.runs.Load() != 4 {
			t.Fatalf("%d runs, want one per method", a.runs.Load())
		}
	}},
	{"missing key on a required route is 400", func(t *testing.T, a *app) {
		r := a.post("/orders", "", "acme", "application/json", `{}`)
		if r.status != 400 || r.problem.Type != idemhttp.TypeKeyMissing || !strings.Contains(r.problem.Detail, "Idempotency-Key") || a.runs.Load() != 0 {
			t.Fatalf("%d %s", r.status, r.body)
		}
	}},
	{"missing key on an optional route runs without idempotency", func(t *testing.T, a *app) {
		a.post("/optional", "", "acme", "", "x")
		r := a.post("/optional", "", "acme", "", "x")
		if r.status != 200 || a.runs.Load() != 2 {
			t.Fatalf("%d, %d runs", r.status, a.runs.Load())
		}
	}},
	{"malformed, empty and overlong keys are 400 naming the header and record nothing", func(t *testing.T, a *app) {
		for _, raw := range []string{"unquoted-token", `""`, `"` + strings.Repeat("k", idemhttp.MaxKeyLength+1) + `"`, `"a", "b"`, `"open`} {
			r := a.post("/orders", "raw:"+raw, "acme", "application/json", `{}`)
			if r.status != 400 || r.problem.Type != idemhttp.TypeKeyMalformed || !strings.Contains(r.problem.Detail, "Idempotency-Key") {
				t.Fatalf("%.20q: %d %s", raw, r.status, r.body)
			}
		}
		if a.runs.Load() != 0 {
			t.Fatal("a malformed key ran the handler")
		}
	}},
	{"oversized, non-JSON and wrong media type bodies are refused and record nothing", func(t *testing.T, a *app) {
		cases := []struct {
			ct, body, typ string
			status        int
		}{
			{"application/json", `{"pad":"` + strings.Repeat("x", 5000) + `"}`, idemhttp.TypeBodyTooLarge, 413},
			{"application/json", `{"open":`, idemhttp.TypeMalformedBody, 400},
			{"text/plain", `{}`, idemhttp.TypeUnsupportedMedia, 415},
		}
		for _, c := range cases {
			k := httpKey(t)
			r := a.post("/orders", k, "acme", c.ct, c.body)
			if r.status != c.status || r.problem.Type != c.typ || a.recorded("/orders", "acme", k) {
				t.Fatalf("%s: %d %s", c.typ, r.status, r.body)
			}
		}
		if a.runs.Load() != 0 {
			t.Fatal("a refused body ran the handler")
		}
	}},
	{"a request while the first is in flight is 409 with Retry-After", func(t *testing.T, a *app) {
		k := httpKey(t)
		done := make(chan reply)
		go func() { done <- a.post("/slow", k, "acme", "", "x") }()
		<-a.started
		r := a.post("/slow", k, "acme", "", "x")
		if r.status != 409 || r.problem.Type != idemhttp.TypeInFlight || r.header.Get("Retry-After") == "" {
			t.Fatalf("%d %v %s", r.status, r.header, r.body)
		}
		close(a.gate)
		if first := <-done; first.status != 200 || string(first.body) != "done" {
			t.Fatalf("first: %d %s", first.status, first.body)
		}
		if r := a.post("/slow", k, "acme", "", "x"); r.status != 200 || r.header.Get(idemhttp.HeaderReplayed) != "true" || a.runs.Load() != 1 {
			t.Fatalf("after: %d %s, %d runs", r.status, r.body, a.runs.Load())
		}
	}},
	{"a client that gives up does not cut the first request short", func(t *testing.T, a *app) {
		k := httpKey(t)
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.srv.URL+"/slow", strings.NewReader("x"))
		req.Header.Set(idemhttp.HeaderKey, `"`+k+`"`)
		req.Header.Set(principalHeader, "acme")
		hk, _ := keys.HTTPRequest("acme", http.MethodPost, "POST /slow", k)
		a.forget(hk)
		errc := make(chan error)
		go func() { _, err := http.DefaultClient.Do(req); errc <- err }()
		<-a.started
		cancel()
		if err := <-errc; err == nil {
			t.Fatal("the cancelled request answered")
		}
		time.Sleep(50 * time.Millisecond) // the server sees the connection close
		close(a.gate)
		for {
			r := a.post("/slow", k, "acme", "", "x")
			if r.status == 409 {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if r.status != 200 || r.header.Get(idemhttp.HeaderReplayed) != "true" || a.runs.Load() != 1 {
				t.Fatalf("%d %s, %d runs", r.status, r.body, a.runs.Load())
			}
			return
		}
	}},
	{"2xx and final 4xx are stored; 5xx, 408 and 429 are not", func(t *testing.T, a *app) {
		for _, c := range []struct {
			status int
			stored bool
		}{{200, true}, {204, true}, {400, true}, {404, true}, {409, true}, {422, true}, {408, false}, {429, false}, {500, false}, {503, false}} {
			a.answer.Store(int64(c.status))
			before := a.runs.Load()
			k := httpKey(t)
			first := a.post("/status", k, "acme", "", "x")
			again := a.postLater("/status", k, "acme", "", "x")
			ran := a.runs.Load() - before
			switch {
			case first.status != c.status:
				t.Fatalf("%d answered %d", c.status, first.status)
			case c.stored && (ran != 1 || again.status != c.status || !bytes.Equal(again.body, first.body) || again.header.Get(idemhttp.HeaderReplayed) != "true"):
				t.Fatalf("%d not replayed: %d runs, %d %s", c.status, ran, again.status, again.body)
			case !c.stored && (ran != 2 || again.status != c.status || again.header.Get(idemhttp.HeaderReplayed) != ""):
				t.Fatalf("%d was stored: %d runs, %d %v", c.status, ran, again.status, again.header)
			}
		}
	}},
	{"a key whose retries ran out answers its failure without running", func(t *testing.T, a *app) {
		a.answer.Store(500)
		k := httpKey(t)
		for range idempotency.DefaultMaxAttempts {
			if r := a.postLater("/status", k, "acme", "", "x"); r.status != 500 {
				t.Fatalf("%d", r.status)
			}
		}
		r := a.postLater("/status", k, "acme", "", "x")
		if r.status != 500 || r.problem.Type != idemhttp.TypeFailed || r.header.Get(idemhttp.HeaderReplayed) != "true" ||
			a.runs.Load() != idempotency.DefaultMaxAttempts {
			t.Fatalf("%d %s %v, %d runs", r.status, r.body, r.header, a.runs.Load())
		}
	}},
	{"a large response is stored by reference and replayed exactly", func(t *testing.T, a *app) {
		k := httpKey(t)
		first := a.post("/large", k, "acme", "", "x")
		again := a.post("/large", k, "acme", "", "x")
		if first.status != 200 || len(first.body) != 256<<10 || !bytes.Equal(first.body, again.body) ||
			again.header.Get(idemhttp.HeaderReplayed) != "true" || again.header.Get("Content-Type") != "application/octet-stream" {
			t.Fatalf("%d %d bytes, replay %d bytes %v", first.status, len(first.body), len(again.body), again.header)
		}
		if rec := a.record("/large", "acme", k); !strings.HasPrefix(rec.ResultRef, "blob:") || a.runs.Load() != 1 {
			t.Fatalf("record %q, %d runs", rec.ResultRef, a.runs.Load())
		}
	}},
	{"safe methods pass through", func(t *testing.T, a *app) {
		resp, err := http.Get(a.srv.URL + "/orders")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 { // the mux's answer: no POST-only handler ran, and no problem
			t.Fatalf("%d", resp.StatusCode)
		}
	}},
}

// httpWaitInFlight: with the engine's WithWaitInFlight, a repeat that meets the
// first request waits for its response instead of 409.
func httpWaitInFlight(t *testing.T, a *app, met <-chan struct{}) {
	k := httpKey(t)
	first := make(chan reply)
	go func() { first <- a.post("/slow", k, "acme", "", "x") }()
	<-a.started
	second := make(chan reply)
	go func() { second <- a.post("/slow", k, "acme", "", "x") }()
	<-met // the repeat met the lease: without the wait it would answer 409 now
	close(a.gate)
	<-first
	r := <-second
	if r.status != 200 || string(r.body) != "done" || r.header.Get(idemhttp.HeaderReplayed) != "true" || a.runs.Load() != 1 {
		t.Fatalf("%d %s %v, %d runs", r.status, r.body, r.header, a.runs.Load())
	}
}

// httpConcurrent: 32 identical requests at once → one execution; every other
// answer is a 409 in flight or the replay.
func httpConcurrent(t *testing.T, a *app) {
	k := httpKey(t)
	const n = 32
	var wg sync.WaitGroup
	replies := make([]reply, n)
	for i := range n {
		wg.Go(func() { replies[i] = a.post("/slow", k, "acme", "", "x") })
	}
	<-a.started
	time.Sleep(100 * time.Millisecond)
	close(a.gate)
	wg.Wait()
	fresh := 0
	for _, r := range replies {
		switch {
		case r.status == 200 && r.header.Get(idemhttp.HeaderReplayed) == "":
			fresh++
		case r.status == 200 || (r.status == 409 && r.problem.Type == idemhttp.TypeInFlight):
		default:
			t.Fatalf("%d %s", r.status, r.body)
		}
	}
	if fresh != 1 || a.runs.Load() != 1 {
		t.Fatalf("%d fresh answers, %d runs", fresh, a.runs.Load())
	}
}
