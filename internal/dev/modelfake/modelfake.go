// Package modelfake is an OpenAI-compatible chat-completions endpoint on
// loopback for the end-to-end tests and scripts/chaos: it counts calls per
// Idempotency-Key and answers as a Behaviour says. Each answer's text names
// its call number ("summary <n> for <key>"), so two effective results of one
// key differ in content.
package modelfake

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// APIKey is the key the fake always accepts (Accept adds more).
const APIKey = "sk-test-key"

// Behaviour decides call n (counted from 1): a delay before answering and
// an HTTP status (0 or 200: a normal answer).
type Behaviour func(n int64) (delay time.Duration, status int)

// Fake is the endpoint.
type Fake struct {
	// URL is the API's base URL (LLM_BASE_URL), ending in /v1.
	URL string
	// Arrived receives each call's number as it arrives (buffered; a call
	// does not wait for a reader).
	Arrived chan int64

	srv     *httptest.Server
	mu      sync.Mutex
	keys    []string
	calls   map[string]int
	traces  map[string][]string
	total   atomic.Int64
	failed  atomic.Int64
	behave  atomic.Pointer[Behaviour]
	errBody atomic.Pointer[string]
}

// Start serves the fake until Close; every call answers at once with 200
// until Set says otherwise.
func Start() *Fake {
	f := newFake()
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	f.URL = f.srv.URL + "/v1"
	return f
}

// StartAt is Start on addr instead of a loopback port: an address inside a
// network namespace of a benchmark rig (scripts/netrig).
func StartAt(addr string) (*Fake, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	f := newFake()
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.srv.Listener.Close()
	f.srv.Listener = ln
	f.srv.Start()
	f.URL = f.srv.URL + "/v1"
	return f, nil
}

func newFake() *Fake {
	return &Fake{calls: map[string]int{}, traces: map[string][]string{}, keys: []string{APIKey}, Arrived: make(chan int64, 1000)}
}

// Close stops serving.
func (f *Fake) Close() { f.srv.Close() }

// Env is the function's model configuration for the fake.
func (f *Fake) Env() []string {
	return []string{"LLM_BASE_URL=" + f.URL, "LLM_API_KEY=" + APIKey, "LLM_MODEL=qwen-plus"}
}

// Set replaces the behaviour.
func (f *Fake) Set(b Behaviour) { f.behave.Store(&b) }

// SetErrorBody makes body the answer of every failing call ("" the default
// body of its status).
func (f *Fake) SetErrorBody(body string) {
	if body == "" {
		f.errBody.Store(nil)
		return
	}
	f.errBody.Store(&body)
}

// Accept adds an API key the fake answers.
func (f *Fake) Accept(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = append(f.keys, key)
}

// Total is the number of calls so far; Failed those answered with an error.
func (f *Fake) Total() int64  { return f.total.Load() }
func (f *Fake) Failed() int64 { return f.failed.Load() }

// Calls is the number of calls under key.
func (f *Fake) Calls(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[key]
}

// TraceParents are the traceparent headers of the calls under key, in
// arrival order ("" for a call without one).
func (f *Fake) TraceParents(key string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.traces[key]...)
}

// Snapshot is the number of calls per key.
func (f *Fake) Snapshot() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.calls))
	for k, v := range f.calls {
		out[k] = v
	}
	return out
}

func (f *Fake) accepted(auth string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.ContainsFunc(f.keys, func(k string) bool { return auth == "Bearer "+k })
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	// Reading the body lets net/http notice a caller that hung up.
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	w.Header().Set("Content-Type", "application/json")
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" || !f.accepted(r.Header.Get("Authorization")) {
		// Quotes what it got, as a careless gateway would: the client must
		// keep the key out of its errors.
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"code":"invalid_api_key","message":"bad key: %s"}}`, r.Header.Get("Authorization"))
		return
	}
	key := r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	f.calls[key]++
	f.traces[key] = append(f.traces[key], r.Header.Get("traceparent"))
	f.mu.Unlock()
	n := f.total.Add(1)
	select {
	case f.Arrived <- n:
	default:
	}
	var delay time.Duration
	status := 0
	if b := f.behave.Load(); b != nil {
		delay, status = (*b)(n)
	}
	select {
	case <-time.After(delay):
	case <-r.Context().Done(): // the caller died or gave up
		return
	}
	if status != 0 && status != http.StatusOK {
		f.failed.Add(1)
		f.fail(w, status)
		return
	}
	fmt.Fprintf(w, `{"id":"cmpl-%d","object":"chat.completion","model":"qwen-plus","choices":[{"index":0,`+
		`"message":{"role":"assistant","content":"summary %d for %s"},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, n, n, short(key))
}

// fail answers status with the error body set, or one like a provider's.
func (f *Fake) fail(w http.ResponseWriter, status int) {
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	if b := f.errBody.Load(); b != nil {
		fmt.Fprint(w, *b)
		return
	}
	switch status {
	case http.StatusServiceUnavailable:
		fmt.Fprint(w, `{"error":{"code":"service_unavailable","message":"overloaded, try later"}}`)
	case http.StatusTooManyRequests:
		fmt.Fprint(w, `{"error":{"code":"rate_limit_exceeded","message":"slow down"}}`)
	default:
		fmt.Fprintf(w, `{"error":{"code":"fake","message":"status %d"}}`, status)
	}
}

func short(key string) string {
	if len(key) > 8 {
		return key[:8]
	}
	return key
}
