package idemhttp_test

import (
	"cmp"
	"context"
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
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/idemhttp"
	"github.com/idemgate/idemgate/idempotency/idemtest"
)

// clientRig is a real server (the middleware on the embedded store) behind a
// front that can lose responses, and a client on the Transport.
type clientRig struct {
	srv    *httptest.Server
	client *http.Client
	runs   atomic.Int64
	drop   atomic.Int64 // responses the front loses after the handler ran
	status func(n int64) int
	gate   chan struct{}
	mu     sync.Mutex
	keys   []string // the Idempotency-Key of every request that reached the front
}

func newClientRig(t *testing.T, attempts int) *clientRig {
	s, err := boltstore.Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c := &clientRig{status: func(int64) int { return 201 }}
	// No back-off on the server: the server's is idemtest.RunHTTP's case;
	// here, the client's.
	eng := idempotency.New(s, idempotency.WithLogger(idemtest.TestLogger(t)), idempotency.WithMaxAttempts(attempts),
		idempotency.WithRetryBackoff(0))
	m := idemhttp.New(eng, idemhttp.WithRetryAfter(time.Second), idemhttp.WithLogger(idemtest.TestLogger(t)))
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := c.runs.Add(1)
		if c.gate != nil {
			<-c.gate
		}
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(c.status(n))
		fmt.Fprintf(w, "run %d of %s", n, body)
	}), idemhttp.Route("orders"))
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.keys = append(c.keys, r.Header.Get(idemhttp.HeaderKey))
		c.mu.Unlock()
		if c.drop.Add(-1) >= 0 { // the handler runs, the response is lost on the way
			h.ServeHTTP(httptest.NewRecorder(), r)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(c.srv.Close)
	c.client = &http.Client{Transport: &idemhttp.Transport{MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}}
	return c
}

func (c *clientRig) post(t *testing.T, key string) (*http.Response, string) {
	req, _ := http.NewRequest(http.MethodPost, c.srv.URL+"/orders", strings.NewReader("order-1"))
	if key != "" {
		req.Header.Set(idemhttp.HeaderKey, key)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// oneKey checks that every request carried the same key.
func (c *clientRig) oneKey(t *testing.T, want int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.keys) != want {
		t.Fatalf("%d requests, want %d", len(c.keys), want)
	}
	for _, k := range c.keys {
		if k != c.keys[0] {
			t.Fatalf("keys %q", c.keys)
		}
	}
	return c.keys[0]
}

func TestTransport(t *testing.T) {
	cases := []struct {
		name     string
		setup    func(c *clientRig)
		key      string
		status   int
		replayed bool
		runs     int64
		requests int
		attempts int // the engine's budget (0: 10)
	}{
		{"a lost response is retried with the same key and replayed", func(c *clientRig) { c.drop.Store(2) }, "", 201, true, 1, 3, 0},
		{"5xx is retried with the same key until it succeeds", func(c *clientRig) {
			c.status = func(n int64) int { return map[bool]int{true: 503, false: 201}[n < 3] }
		}, "", 201, false, 3, 3, 0},
		{"429 is retried", func(c *clientRig) {
			c.status = func(n int64) int { return map[bool]int{true: 429, false: 200}[n < 2] }
		}, "", 200, false, 2, 2, 0},
		{"408 (the body was cut off) is retried", func(c *clientRig) {
			c.status = func(n int64) int { return map[bool]int{true: 408, false: 200}[n < 2] }
		}, "", 200, false, 2, 2, 0},
		{"a final 4xx is not retried", func(c *clientRig) { c.status = func(int64) int { return 400 } }, "", 400, false, 1, 1, 0},
		{"attempts are bounded", func(c *clientRig) { c.status = func(int64) int { return 500 } }, "", 500, false, 5, 5, 0},
		{"a replayed failure is not retried", func(c *clientRig) { c.status = func(int64) int { return 500 } }, "", 500, true, 2, 3, 2},
		{"the caller's own key is kept", func(c *clientRig) {}, `"mine"`, 201, false, 1, 1, 0},
		{"a malformed key of the caller's is not retried", func(c *clientRig) {}, `mine`, 400, false, 0, 1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newClientRig(t, cmp.Or(tc.attempts, 10))
			tc.setup(c)
			resp, body := c.post(t, tc.key)
			if resp.StatusCode != tc.status || (resp.Header.Get(idemhttp.HeaderReplayed) == "true") != tc.replayed || c.runs.Load() != tc.runs {
				t.Fatalf("%d %v %q, %d runs", resp.StatusCode, resp.Header, body, c.runs.Load())
			}
			k := c.oneKey(t, tc.requests)
			if _, _, err := idemhttp.ParseKey([]string{k}); (err != nil) != (tc.status == 400 && tc.runs == 0) {
				t.Fatalf("key %s: %v", k, err)
			}
			if tc.key != "" && k != tc.key {
				t.Fatalf("sent %s, want the caller's %s", k, tc.key)
			}
		})
	}
}

// TestTransportWaitsOutInFlight: a second logical request with the same
// key meets the first in flight (409, Retry-After) and retries until it gets
// the stored response.
func TestTransportWaitsOutInFlight(t *testing.T) {
	c := newClientRig(t, 10)
	c.gate = make(chan struct{})
	c.client.Transport.(*idemhttp.Transport).MaxBackoff = 2 * time.Second
	first := make(chan int)
	go func() { r, _ := c.post(t, `"shared"`); first <- r.StatusCode }()
	for c.runs.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.AfterFunc(300*time.Millisecond, func() { close(c.gate) })
	resp, body := c.post(t, `"shared"`)
	if s := <-first; s != 201 || resp.StatusCode != 201 || resp.Header.Get(idemhttp.HeaderReplayed) != "true" || c.runs.Load() != 1 {
		t.Fatalf("first %d, second %d %q, %d runs", s, resp.StatusCode, body, c.runs.Load())
	}
}

func TestTransportStopsWithTheContext(t *testing.T) {
	c := newClientRig(t, 10)
	c.status = func(int64) int { return 503 }
	c.client.Transport.(*idemhttp.Transport).MinBackoff = time.Hour
	c.client.Transport.(*idemhttp.Transport).MaxBackoff = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.srv.URL, strings.NewReader("x"))
	start := time.Now()
	if _, err := c.client.Do(req); err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
}
