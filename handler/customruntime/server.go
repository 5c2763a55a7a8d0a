// Package customruntime serves the FC custom-runtime protocol (docs/design.md §3):
// POST /invoke, POST /initialize, GET /pre-stop on 0.0.0.0, routing on
// x-fc-control-path when the platform sends it. A failure FC must retry (or
// send to the dead-letter queue) is HTTP 404 with x-fc-status: 404.
package customruntime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/internal/logx"
)

// DefaultMaxBody bounds an invocation body. FC's own limits are 128 KB for
// async and 32 MB for sync invocations; 6 MiB keeps a batch of EventBridge
// events with room to spare without letting one request exhaust memory.
const DefaultMaxBody = 6 << 20

// Server adapts the protocol to a handler.
type Server struct {
	Handle func(ctx context.Context, body []byte, meta handler.Meta) handler.Reply
	// Hooks: Init on POST /initialize, PreStop on GET /pre-stop (and
	// /pre-freeze), Shutdown once when ListenAndServe ends (SIGTERM).
	Hooks   handler.Hooks
	Log     *slog.Logger
	MaxBody int64
	// API, when set, serves every request that is not one of FC's control
	// paths (an HTTP trigger's: handler/httpapi), inside the same
	// invocation bookkeeping as /invoke: the request id on every line, the
	// deadline, the drain before pre-stop.
	API func(ctx context.Context, w http.ResponseWriter, r *http.Request, meta handler.Meta)

	inflight     handler.Inflight
	shutdownOnce sync.Once
	shutdownErr  error
}

// httpInvokePath is the control path FC sends with an HTTP trigger's request
// (the request's own path, method and headers stay as the client sent them).
const httpInvokePath = "/http-invoke"

// ServeHTTP routes one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.Header.Get("X-Fc-Control-Path")
	if path == "" {
		path = r.URL.Path
	}
	switch {
	case path == "/invoke" && r.Method == http.MethodPost:
		s.invoke(w, r)
	case path == "/initialize" && r.Method == http.MethodPost:
		s.lifecycle(w, r, "Initialize", s.Hooks.Init)
	case path == "/pre-stop" && (r.Method == http.MethodGet || r.Method == http.MethodPost):
		s.lifecycle(w, r, "PreStop", s.preStop)
	case path == "/pre-freeze" && (r.Method == http.MethodGet || r.Method == http.MethodPost):
		// A frozen instance may never be thawed: flush as before a stop.
		s.lifecycle(w, r, "PreFreeze", s.preStop)
	case s.API != nil && (path == r.URL.Path || path == httpInvokePath):
		ctx, meta, end := s.begin(r)
		defer end()
		s.API(ctx, w, r, meta)
	default:
		writeJSON(w, http.StatusNotFound, fmt.Appendf(nil, `{"errorType":"not_found","errorMessage":"no route %s %s"}`,
			r.Method, strconv.Quote(path)), true)
	}
}

// Meta reads the platform headers. The names are spelled canonically, as
// net/http stores them: Header.Get would otherwise allocate each name's
// canonical form on every request.
func Meta(h http.Header) handler.Meta {
	m := handler.Meta{
		RequestID: h.Get("X-Fc-Request-Id"),
		Credentials: handler.Credentials{AccessKeyID: h.Get("X-Fc-Access-Key-Id"),
			AccessKeySecret: h.Get("X-Fc-Access-Key-Secret"), SecurityToken: h.Get("X-Fc-Security-Token")},
		FunctionName: h.Get("X-Fc-Function-Name"), Region: h.Get("X-Fc-Region"), AccountID: h.Get("X-Fc-Account-Id"),
		RetryCount: -1, TraceParent: h.Get("Traceparent"),
	}
	if v := h.Get("X-Fc-Retry-Count"); v != "" { // absent: no Atoi error to allocate
		if n, err := strconv.Atoi(v); err == nil {
			m.RetryCount = n
		}
	}
	return m
}

// Deadline derives the invocation's deadline from x-fc-function-deadline
// (Unix milliseconds or RFC 3339) or x-fc-function-timeout (seconds from
// now), whichever is sooner; ok is false when neither header is usable.
func Deadline(h http.Header, now time.Time) (time.Time, bool) {
	var dl time.Time
	if v := strings.TrimSpace(h.Get("X-Fc-Function-Deadline")); v != "" {
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms > 0 {
			dl = time.UnixMilli(ms)
		} else if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			dl = t
		}
	}
	if v := strings.TrimSpace(h.Get("X-Fc-Function-Timeout")); v != "" {
		if sec, err := strconv.ParseFloat(v, 64); err == nil && sec > 0 {
			if t := now.Add(time.Duration(sec * float64(time.Second))); dl.IsZero() || t.Before(dl) {
				dl = t
			}
		}
	}
	return dl, !dl.IsZero()
}

// begin opens one invocation: counted in flight, its secrets held for
// redaction while it runs, its request id and trace on every line, its
// deadline on the context. end closes it.
func (s *Server) begin(r *http.Request) (context.Context, handler.Meta, func()) {
	done := s.inflight.Begin()
	meta := Meta(r.Header)
	release := func() {}
	if s.Hooks.Secrets != nil {
		release = s.Hooks.Secrets(meta.Credentials.AccessKeySecret, meta.Credentials.SecurityToken)
	}
	// On every line, the platform's ones included.
	ctx := handler.TraceInvocation(r.Context(), meta, s.Log,
		slog.String("request_id", meta.RequestID), slog.String("fc_request_id", meta.RequestID))
	cancel := context.CancelFunc(func() {})
	if dl, ok := Deadline(r.Header, time.Now()); ok {
		ctx, cancel = context.WithDeadline(ctx, dl)
	}
	id := meta.RequestID // the closure keeps the id, not the whole Meta
	s.Log.InfoContext(ctx, "FC Invoke Start RequestId: "+id)
	return ctx, meta, func() {
		s.Log.InfoContext(ctx, "FC Invoke End RequestId: "+id)
		cancel()
		release()
		done()
	}
}

func (s *Server) invoke(w http.ResponseWriter, r *http.Request) {
	ctx, meta, end := s.begin(r)
	defer end()

	limit := s.MaxBody
	if limit <= 0 {
		limit = DefaultMaxBody
	}
	body, err := readBody(r.Body, r.ContentLength, limit+1)
	switch {
	case err != nil:
		// The platform's connection broke: FC must retry, nothing was read.
		writeJSON(w, http.StatusNotFound, failBody("body_read_failed", "could not read the event body"), true)
		return
	case int64(len(body)) > limit:
		writeJSON(w, http.StatusNotFound, failBody("body_too_large",
			fmt.Sprintf("event body exceeds %d bytes", limit)), true)
		return
	}
	rep := s.Handle(ctx, body, meta)
	writeJSON(w, rep.Status, rep.Body, rep.Status != http.StatusOK)
}

// readBody reads at most max bytes of body into one buffer sized from the
// Content-Length FC sends (size, -1 when absent), so that an invocation's
// body is read without growing and copying it.
func readBody(body io.Reader, size, max int64) ([]byte, error) {
	n := int64(512)
	if size >= 0 {
		n = min(size+1, max) // + 1: the read that sees EOF needs room
	}
	buf := make([]byte, 0, n)
	for {
		if int64(len(buf)) == max {
			return buf, nil
		}
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, int(min(int64(cap(buf)), max-int64(len(buf)))))
		}
		m, err := body.Read(buf[len(buf):min(int64(cap(buf)), max)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

func (s *Server) lifecycle(w http.ResponseWriter, r *http.Request, name string, fn func(context.Context) error) {
	id := r.Header.Get("x-fc-request-id")
	ctx := logx.With(r.Context(), slog.String("request_id", id))
	s.Log.InfoContext(ctx, "FC "+name+" Start RequestId: "+id)
	defer s.Log.InfoContext(ctx, "FC "+name+" End RequestId: "+id)
	if fn != nil {
		if err := fn(ctx); err != nil {
			s.Log.ErrorContext(ctx, name+" failed", "error", err.Error())
			writeJSON(w, http.StatusNotFound, failBody(strings.ToLower(name)+"_failed", err.Error()), true)
			return
		}
	}
	writeJSON(w, http.StatusOK, []byte(`{"status":"ok"}`), false)
}

// preStop waits for the invocations in flight (their counts belong in the
// flush), then runs the PreStop hook; the instance keeps serving.
func (s *Server) preStop(ctx context.Context) error {
	s.inflight.Wait(ctx)
	if s.Hooks.PreStop == nil {
		return nil
	}
	// The wait may have used up ctx; the flush must still get its chance.
	return s.Hooks.PreStop(context.WithoutCancel(ctx))
}

// shutdown waits for the invocations in flight, then closes the clients,
// once.
func (s *Server) shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() {
		s.inflight.Wait(ctx)
		if s.Hooks.Shutdown != nil {
			s.shutdownErr = s.Hooks.Shutdown(context.WithoutCancel(ctx))
		}
	})
	return s.shutdownErr
}

func failBody(typ, msg string) []byte {
	return fmt.Appendf(nil, `{"errorType":%s,"errorMessage":%s}`, strconv.Quote(typ), strconv.Quote(msg))
}

// jsonType is every answer's Content-Type, shared: net/http only reads it.
var jsonType = []string{"application/json"}

func writeJSON(w http.ResponseWriter, status int, body []byte, failed bool) {
	h := w.Header()
	h["Content-Type"] = jsonType
	if failed {
		h.Set("X-Fc-Status", strconv.Itoa(status))
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// ListenAndServe serves on addr until ctx ends (SIGTERM), then drains the
// invocations in flight and runs the Shutdown hook. ready, if not nil, receives
// the bound address once the socket listens.
func (s *Server) ListenAndServe(ctx context.Context, addr string, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) }}
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdown)
	if serr := s.shutdown(shutdown); err == nil {
		err = serr
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
