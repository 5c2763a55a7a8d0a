package customruntime

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
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
		"x-fc-retry-count": "2"} {
		h.Set(k, v)
	}
	m := Meta(h)
	want := handler.Meta{RequestID: "r1", Credentials: handler.Credentials{AccessKeyID: "STS.id", AccessKeySecret: "sec",
		SecurityToken: "tok"}, FunctionName: "f", Region: "cn-hangzhou", AccountID: "123", RetryCount: 2}
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

// pre-stop waits for the invocations in flight, then closes the clients once.
func TestPreStopDrains(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var order []string
	s := newServer(func(context.Context, []byte, handler.Meta) handler.Reply {
		<-release
		mu.Lock()
		order = append(order, "invoke done")
		mu.Unlock()
		return handler.Reply{Status: 200, Body: []byte(`{}`)}
	})
	stops := 0
	s.Stop = func(context.Context) error {
		mu.Lock()
		order = append(order, "stopped")
		stops++
		mu.Unlock()
		return nil
	}
	go s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/invoke", strings.NewReader("x")))
	time.Sleep(50 * time.Millisecond)
	done := make(chan struct{})
	go func() {
		s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/pre-stop", nil))
		close(done)
	}()
	time.Sleep(50 * time.Millisecond)
	close(release)
	<-done
	s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/pre-stop", nil))
	if len(order) != 2 || order[0] != "invoke done" || order[1] != "stopped" || stops != 1 {
		t.Fatalf("order %v, stops %d", order, stops)
	}
}
