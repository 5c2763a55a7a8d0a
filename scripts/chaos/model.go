package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

const modelAPIKey = "sk-chaos-key"

// modelFake is an OpenAI-compatible chat-completions endpoint that counts
// calls per Idempotency-Key. Each answer's text names its call number, so
// two effective results of one key would differ in content.
type modelFake struct {
	url    string
	srv    *http.Server
	rnd    *lockedRand
	errors float64 // fraction of calls answered 503 (4/7) or 429 (3/7)
	total  atomic.Int64
	failed atomic.Int64
	mu     sync.Mutex
	calls  map[string]int
}

func startModel(rnd *lockedRand, errorRate float64) (*modelFake, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m := &modelFake{url: "http://" + ln.Addr().String(), rnd: rnd, errors: errorRate, calls: map[string]int{}}
	m.srv = &http.Server{Handler: http.HandlerFunc(m.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.srv.Serve(ln) }() // ends with ErrServerClosed at close
	return m, nil
}

func (m *modelFake) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if m.srv.Shutdown(ctx) != nil {
		_ = m.srv.Close()
	}
}

func (m *modelFake) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer "+modelAPIKey {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":{"code":"invalid_api_key","message":"bad path, method or key"}}`)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	m.mu.Lock()
	m.calls[key]++
	m.mu.Unlock()
	n := m.total.Add(1)
	delay := m.rnd.Between(50*time.Millisecond, 400*time.Millisecond)
	roll := m.rnd.Float64()
	select {
	case <-time.After(delay):
	case <-r.Context().Done(): // the caller died or gave up
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case roll < m.errors*4/7:
		m.failed.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":{"code":"service_unavailable","message":"overloaded, try later"}}`)
		return
	case roll < m.errors:
		m.failed.Add(1)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"error":{"code":"rate_limit_exceeded","message":"slow down"}}`)
		return
	}
	short := key
	if len(short) > 12 {
		short = short[:12]
	}
	fmt.Fprintf(w, `{"id":"cmpl-%d","object":"chat.completion","model":"qwen-plus","choices":[{"index":0,`+
		`"message":{"role":"assistant","content":"# Summary\n\nCall %d for key %s: the document, summarised."},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":42,"completion_tokens":12,"total_tokens":54}}`, n, n, short)
}

func (m *modelFake) snapshot() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int, len(m.calls))
	for k, v := range m.calls {
		out[k] = v
	}
	return out
}
