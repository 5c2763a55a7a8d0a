package notify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/internal/dev/testenv"
	"github.com/idemgate/idemgate/internal/trace"
	"github.com/idemgate/idemgate/internal/transport"
)

const outcome = `{"status":"SUCCEEDED","idempotencyKey":"K1"}`

// secretPath stands for the token a webhook URL often carries; no error may show it.
const secretPath = "/hooks/T0SECRET/B0SECRET?sig=S3CRET"

func TestPostSendsContract(t *testing.T) {
	type seen struct {
		method, path, ctype, key, rid, traceparent, body string
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.RequestURI(), r.Header.Get("Content-Type"), r.Header.Get("Idempotency-Key"),
			r.Header.Get("X-Request-Id"), r.Header.Get("traceparent"), string(b)}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()

	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tc, _ := trace.Parse(tp)
	for _, c := range []struct {
		name string
		ctx  context.Context
		tp   string
	}{{"traced", trace.WithContext(context.Background(), tc), tp}, {"no trace", context.Background(), ""}} {
		if err := loopbackClient(t, srv.URL, time.Second).Post(c.ctx, srv.URL+"/hook?a=1", "K1", "req-7", []byte(outcome)); err != nil {
			t.Fatalf("%s: Post: %v", c.name, err)
		}
		want := seen{"POST", "/hook?a=1", "application/json", "K1:notify", "req-7", c.tp, outcome}
		if g := <-got; g != want {
			t.Errorf("%s: receiver saw %+v, want %+v", c.name, g, want)
		}
	}
}

// loopbackClient allows plain http to target's host and port, loopback
// addresses included: what a test server on 127.0.0.1 needs.
func loopbackClient(t *testing.T, target string, timeout time.Duration) *Client {
	t.Helper()
	o := Options{Timeout: timeout}
	if u, err := url.Parse(target); err == nil && u.Host != "" {
		o.Allow = MustParseAllowList("http://" + u.Host + ";loopback")
	}
	return New(o)
}

func TestNewDefaults(t *testing.T) {
	c0 := New(Options{})
	if c0.timeout != DefaultTimeout || c0.hc == nil || c0.hc.CheckRedirect == nil || c0.secret != "" || !c0.allow.Empty() {
		t.Errorf("New(Options{}) = %+v", c0)
	}
	// A pool of its own, sized for concurrent invocations: not
	// http.DefaultTransport, whose idle connections anyone may close.
	tr, ok := c0.hc.Transport.(*http.Transport)
	if !ok || tr == http.DefaultTransport || tr.MaxIdleConnsPerHost != transport.IdlePerHost {
		t.Fatalf("New(Options{}) transport = %#v", c0.hc.Transport)
	}
	// No proxy: it would connect to the target where the dial check cannot see.
	if tr.Proxy != nil || tr.DialContext == nil || tr.DialTLSContext != nil {
		t.Errorf("transport proxy %v, dial %v, TLS dial %v: want no proxy and the checked dial only",
			tr.Proxy != nil, tr.DialContext != nil, tr.DialTLSContext != nil)
	}
	if c := New(Options{Timeout: time.Second}); c.timeout != time.Second {
		t.Errorf("timeout %s", c.timeout)
	}
}

func TestPostClassifies(t *testing.T) {
	reply := func(code int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			io.WriteString(w, body)
		}
	}
	stall := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}
	refused := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return "http://" + addr + secretPath
	}
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		url     func(t *testing.T) string // overrides the test server
		key     string
		body    string
		class   idempotency.Class // "" means success
		code    string
		hits    int64
	}{
		{name: "200 ok", handler: reply(200, `ok`), hits: 1},
		{name: "201 created", handler: reply(201, ``), hits: 1},
		{name: "204 no content", handler: reply(204, ``), hits: 1},
		{name: "429 rate limited", handler: reply(429, `slow down`), class: idempotency.ClassRetryable, code: CodeRateLimited, hits: 1},
		{name: "500", handler: reply(500, `boom`), class: idempotency.ClassRetryable, code: CodeTemporaryUnavailable, hits: 1},
		{name: "503", handler: reply(503, ``), class: idempotency.ClassRetryable, code: CodeTemporaryUnavailable, hits: 1},
		{name: "408", handler: reply(408, ``), class: idempotency.ClassRetryable, code: CodeTimeout, hits: 1},
		{name: "409 same key in flight", handler: reply(409, `in progress`), class: idempotency.ClassRetryable, code: CodeTemporaryUnavailable, hits: 1},
		{name: "400", handler: reply(400, `bad`), class: idempotency.ClassFinal, code: CodeRejected, hits: 1},
		{name: "401", handler: reply(401, ``), class: idempotency.ClassFinal, code: CodeRejected, hits: 1},
		{name: "404", handler: reply(404, `no such hook`), class: idempotency.ClassFinal, code: CodeRejected, hits: 1},
		{name: "422 key reused with another body", handler: reply(422, ``), class: idempotency.ClassFinal, code: CodeRejected, hits: 1},
		{name: "302 not followed", handler: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/moved" {
				t.Error("redirect was followed")
			}
			http.Redirect(w, r, "/moved", http.StatusFound)
		}, class: idempotency.ClassFinal, code: CodeRejected, hits: 1},
		{name: "huge error body is drained and cut", handler: reply(500, strings.Repeat("x", 1<<20)), class: idempotency.ClassRetryable, code: CodeTemporaryUnavailable, hits: 1},
		{name: "timeout", handler: stall, class: idempotency.ClassRetryable, code: CodeTimeout, hits: 1},
		{name: "connection refused", url: refused, class: idempotency.ClassRetryable, code: CodeTemporaryUnavailable},
		{name: "ftp url", url: func(*testing.T) string { return "ftp://host/x" }, class: idempotency.ClassFinal, code: CodeInvalidRequest},
		{name: "mailto url", url: func(*testing.T) string { return "mailto:ops@example.com" }, class: idempotency.ClassFinal, code: CodeInvalidRequest},
		{name: "relative url", url: func(*testing.T) string { return "/hook" }, class: idempotency.ClassFinal, code: CodeInvalidRequest},
		{name: "empty url", url: func(*testing.T) string { return "" }, class: idempotency.ClassFinal, code: CodeInvalidRequest},
		{name: "no host", url: func(*testing.T) string { return "http:///hook" }, class: idempotency.ClassFinal, code: CodeInvalidRequest},
		{name: "unparsable url", url: func(*testing.T) string { return "http://[::1" + secretPath }, class: idempotency.ClassFinal, code: CodeInvalidRequest},
		{name: "empty key", handler: reply(200, ``), key: "-", class: idempotency.ClassFinal, code: CodeInvalidRequest},
		{name: "header injection in key", handler: reply(200, ``), key: "K\r\nX-Evil: 1", class: idempotency.ClassFinal, code: CodeInvalidRequest},
		{name: "body not JSON", handler: reply(200, ``), body: "{", class: idempotency.ClassFinal, code: CodeInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hits := new(atomic.Int64)
			target := ""
			if tc.url != nil {
				target = tc.url(t)
			} else {
				target, hits = testenv.Peer(t, tc.handler)
				target += secretPath
			}
			key, body := "K1", outcome
			switch tc.key {
			case "":
			case "-":
				key = ""
			default:
				key = tc.key
			}
			if tc.body != "" {
				body = tc.body
			}

			start := time.Now()
			err := loopbackClient(t, target, 100*time.Millisecond).Post(context.Background(), target, key, "req-1", []byte(body))
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Post took %s", d)
			}
			if n := hits.Load(); n != tc.hits {
				t.Errorf("receiver hit %d times, want %d", n, tc.hits)
			}
			if tc.class == "" {
				if err != nil {
					t.Fatalf("Post: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Post succeeded, want an error")
			}
			var ie *idempotency.Error
			if !errors.As(err, &ie) || ie.Class != tc.class || ie.Code != tc.code {
				t.Fatalf("error %v classified as %+v, want %s/%s", err, ie, tc.class, tc.code)
			}
			t.Logf("%s/%s: %v", ie.Class, ie.Code, err)
			for _, s := range []string{err.Error(), fmt.Sprintf("%+v", err)} {
				if strings.Contains(s, "SECRET") || strings.Contains(s, "S3CRET") {
					t.Errorf("error shows the URL's secret path or query: %s", s)
				}
				if len(s) > 400 {
					t.Errorf("error text is %d bytes", len(s))
				}
			}
		})
	}
}

func TestPostHonoursCallerContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := loopbackClient(t, "http://127.0.0.1:1", time.Second).Post(ctx, "http://127.0.0.1:1/x", "K", "", []byte(outcome))
	if c, code := idempotency.Classify(err); c != idempotency.ClassRetryable || code != CodeTimeout || !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: %s/%s %v", c, code, err)
	}
}
