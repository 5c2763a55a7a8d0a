package customruntime

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/idemgate/idemgate/handler"
)

func TestDeadline(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		headers map[string]string
		want    time.Time
		ok      bool
	}{
		{"none", nil, time.Time{}, false},
		{"timeout seconds", map[string]string{"x-fc-function-timeout": "60"}, now.Add(time.Minute), true},
		{"deadline unix ms", map[string]string{"x-fc-function-deadline": "1796025630000"}, time.UnixMilli(1796025630000), true},
		{"deadline rfc3339", map[string]string{"x-fc-function-deadline": "2026-11-30T08:00:30Z"}, now.Add(30 * time.Second), true},
		{"the sooner wins", map[string]string{"x-fc-function-deadline": "2026-11-30T08:00:30Z", "x-fc-function-timeout": "10"},
			now.Add(10 * time.Second), true},
		{"garbage", map[string]string{"x-fc-function-deadline": "soon", "x-fc-function-timeout": "-3"}, time.Time{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range c.headers {
				h.Set(k, v)
			}
			got, ok := Deadline(h, now)
			if ok != c.ok || !got.Equal(c.want) {
				t.Fatalf("got %v %v, want %v %v", got, ok, c.want, c.ok)
			}
		})
	}
}

func TestMetaFromHeaders(t *testing.T) {
	h := http.Header{}
	for k, v := range map[string]string{"x-fc-request-id": "r1", "x-fc-access-key-id": "STS.id", "x-fc-access-key-secret": "sec",
		"x-fc-security-token": "tok", "x-fc-function-name": "f", "x-fc-region": "cn-hangzhou", "x-fc-account-id": "123",
		"x-fc-retry-count": "2", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"} {
		h.Set(k, v)
	}
	m := Meta(h)
	want := handler.Meta{RequestID: "r1", Credentials: handler.Credentials{AccessKeyID: "STS.id", AccessKeySecret: "sec",
		SecurityToken: "tok"}, FunctionName: "f", Region: "cn-hangzhou", AccountID: "123", RetryCount: 2,
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	if m != want {
		t.Fatalf("%+v", m)
	}
	if Meta(http.Header{}).RetryCount != -1 {
		t.Fatal("absent retry count must be -1")
	}
}

func newServer(handle func(context.Context, []byte, handler.Meta) handler.Reply) *Server {
	return &Server{Handle: handle, Log: slog.New(slog.NewJSONHandler(io.Discard, nil)), MaxBody: 1024}
}

func TestRoutingAndFailures(t *testing.T) {
	var gotDeadline bool
	s := newServer(func(ctx context.Context, body []byte, m handler.Meta) handler.Reply {
		_, gotDeadline = ctx.Deadline()
		if string(body) == "fail" {
			return handler.Reply{Status: 404, Body: []byte(`{"errorType":"x","errorMessage":"y"}`)}
		}
		return handler.Reply{Status: 200, Body: []byte(`{"ok":true}`)}
	})
	cases := []struct {
		name, method, path, control, body string
		status                            int
		fcStatus                          string
	}{
		{"invoke", "POST", "/invoke", "", "hi", 200, ""},
		{"control path wins", "POST", "/", "/invoke", "hi", 200, ""},
		{"failure", "POST", "/invoke", "", "fail", 404, "404"},
		{"too large", "POST", "/invoke", "", strings.Repeat("x", 1025), 404, "404"},
		{"initialize", "POST", "/initialize", "", "", 200, ""},
		{"pre-stop", "GET", "/pre-stop", "", "", 200, ""},
		{"unknown", "GET", "/nope", "", "", 404, "404"},
		{"invoke needs POST", "GET", "/invoke", "", "", 404, "404"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
			r.Header.Set("x-fc-function-timeout", "30")
			if c.control != "" {
				r.Header.Set("x-fc-control-path", c.control)
			}
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			if w.Code != c.status || w.Header().Get("x-fc-status") != c.fcStatus {
				t.Fatalf("%d %q %s", w.Code, w.Header().Get("x-fc-status"), w.Body)
			}
		})
	}
	if !gotDeadline {
		t.Fatal("the invocation context had no deadline")
	}
}

// With an API, FC's control paths route exactly as without one; every
// other request reaches the API inside an invocation (its request id, its
// deadline).
func TestAPIRouting(t *testing.T) {
	s := newServer(func(context.Context, []byte, handler.Meta) handler.Reply {
		return handler.Reply{Status: 200, Body: []byte(`{"from":"invoke"}`)}
	})
	var gotID string
	var gotDeadline bool
	s.API = func(ctx context.Context, w http.ResponseWriter, r *http.Request, m handler.Meta) {
		gotID = m.RequestID
		_, gotDeadline = ctx.Deadline()
		w.WriteHeader(299)
	}
	cases := []struct {
		name, method, path, control string
		status                      int
	}{
		{"invoke stays FC's", "POST", "/invoke", "", 200},
		{"control path wins over the URL", "POST", "/tasks", "/invoke", 200},
		{"initialize stays FC's", "POST", "/initialize", "", 200},
		{"pre-stop stays FC's", "GET", "/pre-stop", "", 200},
		{"pre-freeze stays FC's", "POST", "/pre-freeze", "", 200},
		{"an unknown control path is not the API's", "POST", "/tasks", "/nope", 404},
		{"tasks go to the API", "POST", "/tasks", "", 299},
		{"an HTTP trigger's request goes to the API", "POST", "/tasks", "/http-invoke", 299},
		{"any other path goes to the API", "GET", "/nope", "", 299},
		{"GET /invoke goes to the API", "GET", "/invoke", "", 299},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(c.method, c.path, strings.NewReader("{}"))
			r.Header.Set("x-fc-request-id", "req-1")
			r.Header.Set("x-fc-function-timeout", "30")
			if c.control != "" {
				r.Header.Set("x-fc-control-path", c.control)
			}
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			if w.Code != c.status {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
		})
	}
	if gotID != "req-1" || !gotDeadline {
		t.Fatalf("the API saw request id %q, deadline %v", gotID, gotDeadline)
	}
}

// recorder is a set of hooks that log their calls in order.
type recorder struct {
	mu    sync.Mutex
	order []string
}

func (r *recorder) add(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.order = append(r.order, what)
}

func (r *recorder) calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.order...)
}

func (r *recorder) hooks() handler.Hooks {
	return handler.Hooks{
		PreStop:  func(context.Context) error { r.add("pre-stop"); return nil },
		Shutdown: func(context.Context) error { r.add("shutdown"); return nil },
	}
}

// Pre-stop waits for the invocations in flight, then flushes; the instance
// keeps serving (FC may thaw it and invoke it again), and it may come again.
func TestPreStopFlushesAndKeepsServing(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{}, 2)
	rec := &recorder{}
	s := newServer(func(_ context.Context, body []byte, _ handler.Meta) handler.Reply {
		if string(body) == "slow" {
			started <- struct{}{}
			<-release
		}
		rec.add("invoke " + string(body))
		return handler.Reply{Status: 200, Body: []byte(`{}`)}
	})
	s.Hooks = rec.hooks()
	go s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/invoke", strings.NewReader("slow")))
	<-started
	done := make(chan struct{})
	go func() {
		s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/pre-stop", nil))
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("pre-stop returned while an invocation runs")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-done
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("POST", "/invoke", strings.NewReader("after")))
	if w.Code != 200 {
		t.Fatalf("invocation after pre-stop: %d %s", w.Code, w.Body)
	}
	s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/pre-freeze", nil))
	want := []string{"invoke slow", "pre-stop", "invoke after", "pre-stop"}
	if got := rec.calls(); !slices.Equal(got, want) {
		t.Fatalf("calls %v, want %v (no shutdown before SIGTERM)", got, want)
	}
}

// The end of ListenAndServe (SIGTERM) drains and runs Shutdown once.
func TestShutdownWhenServingEnds(t *testing.T) {
	rec := &recorder{}
	s := newServer(func(context.Context, []byte, handler.Meta) handler.Reply {
		return handler.Reply{Status: 200, Body: []byte(`{}`)}
	})
	s.Hooks = rec.hooks()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	errc := make(chan error, 1)
	go func() { errc <- s.ListenAndServe(ctx, "127.0.0.1:0", func(a net.Addr) { ready <- a.String() }) }()
	addr := <-ready
	resp, err := http.Post("http://"+addr+"/invoke", "application/octet-stream", strings.NewReader("x"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("invoke: %v %v", resp, err)
	}
	resp.Body.Close()
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got := rec.calls(); !slices.Equal(got, []string{"shutdown"}) {
		t.Fatalf("calls %v, want one shutdown", got)
	}
}

func TestReadBody(t *testing.T) {
	const max = 1025 // the server's limit + 1
	body := func(n int) string { return strings.Repeat("x", n) }
	cases := []struct {
		name    string
		r       io.Reader
		size    int64
		want    int
		wantErr bool
	}{
		{name: "sized by Content-Length", r: strings.NewReader(body(700)), size: 700, want: 700},
		{name: "no Content-Length, grown past the first buffer", r: strings.NewReader(body(1000)), size: -1, want: 1000},
		{name: "one byte a read", r: iotest.OneByteReader(strings.NewReader(body(600))), size: 600, want: 600},
		{name: "empty", r: strings.NewReader(""), size: 0, want: 0},
		{name: "exactly the limit", r: strings.NewReader(body(max - 1)), size: max - 1, want: max - 1},
		{name: "over the limit, sized", r: strings.NewReader(body(5000)), size: 5000, want: max},
		{name: "over the limit, unsized", r: strings.NewReader(body(5000)), size: -1, want: max},
		{name: "a read fails", r: iotest.ErrReader(errors.New("reset")), size: 10, wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := readBody(c.r, c.size, max)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v", err)
			}
			if !c.wantErr && (len(got) != c.want || strings.Trim(string(got), "x") != "") {
				t.Errorf("read %d bytes, want %d", len(got), c.want)
			}
		})
	}
}
