// Package runtimeapi is a stand-in of FC's go1 runtime API, as
// github.com/aliyun/fc-runtime-go-sdk v0.3.1 polls it (runtime_api_client.go),
// for the tests that run the go1 adapter for real: handler/go1 and the
// end-to-end tests. It hands out one invocation at a time, as FC does for a
// single-concurrency instance: the next only after the previous one was
// answered, so an initializer completes before the first event.
package runtimeapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"
)

// Prefix is the path prefix of the SDK's calls.
const Prefix = "/2020-11-11/runtime/invocation/"

// Function types (x-fc-function-type) of the lifecycle calls.
const (
	TypeInitializer = "1"
	TypePreStop     = "2"
)

// Invocation is one item handed out on GET next.
type Invocation struct {
	ID       string
	FuncType string // "" an event, TypeInitializer, TypePreStop
	Body     string
	Headers  map[string]string
}

// Post is what the SDK sent back for one invocation.
type Post struct {
	ID, Kind    string // Kind: "response", "error", or "unexpected <method> <path>"
	ContentType string
	Body        []byte
}

// Server is the stand-in.
type Server struct {
	srv   *httptest.Server
	queue chan Invocation
	turn  chan struct{}
	posts chan Post
	done  chan struct{}
}

// Start serves the runtime API on a loopback port; queued invocations are
// handed out in order. When the queue is empty, GET next waits for Add or
// Close.
func Start(queued ...Invocation) *Server {
	s := &Server{queue: make(chan Invocation, 64), turn: make(chan struct{}, 1), posts: make(chan Post, 80),
		done: make(chan struct{})}
	for _, inv := range queued {
		s.queue <- inv
	}
	s.turn <- struct{}{}
	s.srv = httptest.NewServer(s)
	return s
}

// Addr is what FC_RUNTIME_API holds: host:port (the SDK adds http://).
func (s *Server) Addr() string { return s.srv.Listener.Addr().String() }

// Add queues an invocation.
func (s *Server) Add(inv Invocation) { s.queue <- inv }

// Posts delivers what the SDK sent back, in order.
func (s *Server) Posts() <-chan Post { return s.posts }

// Close releases a held poll and stops serving. Call it after the function
// process ended (or was killed): the SDK then drops its poll.
func (s *Server) Close() {
	close(s.done)
	s.srv.Close()
}

// ServeHTTP answers the SDK's GET next and POST response / error.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, Prefix)
	switch {
	case ok && r.Method == http.MethodGet && rest == "next":
		s.next(w, r)
		return
	case ok && r.Method == http.MethodPost:
		if id, kind, ok := strings.Cut(rest, "/"); ok && (kind == "response" || kind == "error") {
			body, _ := io.ReadAll(r.Body)
			s.posts <- Post{ID: id, Kind: kind, ContentType: r.Header.Get("Content-Type"), Body: body}
			s.turn <- struct{}{}
			return
		}
	}
	s.posts <- Post{Kind: "unexpected " + r.Method + " " + r.URL.Path}
	http.NotFound(w, r)
}

func (s *Server) next(w http.ResponseWriter, r *http.Request) {
	select {
	case <-s.turn:
	case <-s.done:
		return
	case <-r.Context().Done():
		return
	}
	var inv Invocation
	select {
	case inv = <-s.queue:
	case <-s.done: // hold the poll like an idle instance until the end
		return
	case <-r.Context().Done():
		s.turn <- struct{}{} // the poll is gone; the next one may have the turn
		return
	}
	h := w.Header()
	h.Set("x-fc-request-id", inv.ID)
	h.Set("x-fc-function-deadline", strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10))
	h.Set("x-fc-function-timeout", "60")
	if inv.FuncType != "" {
		h.Set("x-fc-function-type", inv.FuncType)
	}
	for k, v := range inv.Headers {
		h.Set(k, v)
	}
	_, _ = io.WriteString(w, inv.Body)
}
