package idemhttp

import (
	"math"
	"net/http"
	"time"
)

// stored is a response as the key's record keeps it (JSON, by reference
// through the engine's blob store when large: idempotency.Run).
type stored struct {
	Status int                 `json:"status"`
	Header map[string][]string `json:"header,omitempty"`
	Body   []byte              `json:"body,omitempty"`
	all    http.Header         // every header the handler set: a fresh answer sends them all
	sent   bool                // the recorder passed it to the client already: it outgrew the limit
}

// write answers s; a replay sends the stored headers only, and marks itself.
func (s stored) write(w http.ResponseWriter, replayed bool) {
	h := w.Header()
	src := s.all // set only where the handler ran: a decoded record has the stored headers alone
	if src == nil {
		src = s.Header
	}
	for k, v := range src {
		h[k] = append([]string(nil), v...)
	}
	if replayed {
		h.Set(HeaderReplayed, "true")
	}
	w.WriteHeader(s.Status)
	_, _ = w.Write(s.Body)
}

// recorder captures the handler's response instead of sending it: it is
// sent once the outcome is known (stored or not). It holds at most limit
// bytes of body; a response that outgrows them cannot be stored, so the
// recorder sends what it holds and passes the rest straight to the client
// (memory stays within the limit whatever the handler streams).
type recorder struct {
	w      http.ResponseWriter // the client's
	limit  int
	header http.Header
	status int
	body   []byte
	passed bool // the body outgrew limit: sent as written, not stored
}

func newRecorder(w http.ResponseWriter, limit int64) *recorder {
	return &recorder{w: w, limit: int(min(limit, math.MaxInt)), header: http.Header{}}
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 && status >= 200 { // 1xx are informational; the first final status counts
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if !r.passed && len(r.body)+len(b) <= r.limit {
		r.keep(b)
		return len(b), nil
	}
	if !r.passed {
		r.pass(b)
	}
	return r.w.Write(b)
}

// FlushError flushes the client's writer once the response passes through.
// While it is held, nothing can be sent: whether it will be stored, and so
// what a repeat gets, is not known until the handler returns or outgrows the
// limit. It then does nothing and succeeds, so a handler that streams works
// either way; what it wrote goes when the handler returns.
func (r *recorder) FlushError() error {
	if !r.passed {
		return nil
	}
	return http.NewResponseController(r.w).Flush()
}

// Flush is FlushError for http.Flusher.
func (r *recorder) Flush() { _ = r.FlushError() }

// SetWriteDeadline reaches the client's connection, as a handler streaming a
// long answer past the server's WriteTimeout needs. The recorder has no
// Unwrap: through it http.ResponseController would let a handler Hijack the
// connection and answer around the record, an answer no repeat gets.
func (r *recorder) SetWriteDeadline(t time.Time) error {
	return http.NewResponseController(r.w).SetWriteDeadline(t)
}

// keep appends b, doubling the buffer but never past limit: the limit
// bounds what a request holds, not only what it stores.
func (r *recorder) keep(b []byte) {
	if n := len(r.body) + len(b); n > cap(r.body) {
		grown := make([]byte, len(r.body), min(max(2*cap(r.body), n, 512), r.limit))
		copy(grown, r.body)
		r.body = grown
	}
	r.body = append(r.body, b...)
}

// pass sends the status, the headers and the body held so far, before next,
// the write that outgrew the limit, and lets go of the buffer. Later header
// changes reach the client's header map, so trailers work as net/http has them.
func (r *recorder) pass(next []byte) {
	r.passed = true
	head := r.body
	if len(head) < sniffLen { // what net/http would sniff: the first 512 bytes sent
		head = append(head[:len(head):len(head)], next[:min(len(next), sniffLen-len(head))]...)
	}
	sniff(r.header, head)
	stored{Status: r.status, Body: r.body, all: r.header}.write(r.w, false)
	r.header, r.body = r.w.Header(), nil
}

// sniffLen is how much of a body http.DetectContentType reads.
const sniffLen = 512

// sniff sets the Content-Type net/http would have sniffed from body, when
// the handler set none: a replay must say the same as the first answer.
func sniff(h http.Header, body []byte) {
	if _, ok := h["Content-Type"]; !ok && len(body) > 0 {
		h.Set("Content-Type", http.DetectContentType(body))
	}
}

// result is the captured response with the named headers kept; sent when
// it outgrew the limit (its body is then not held).
func (r *recorder) result(names []string) stored {
	s := stored{Status: r.status, Body: r.body, all: r.header, Header: map[string][]string{}, sent: r.passed}
	if s.Status == 0 {
		s.Status = http.StatusOK
	}
	if !r.passed {
		sniff(r.header, s.Body)
	}
	for _, n := range names {
		if v, ok := r.header[n]; ok {
			s.Header[n] = v
		}
	}
	return s
}
