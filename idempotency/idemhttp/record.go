package idemhttp

import (
	"bytes"
	"net/http"
)

// stored is a response as the key's record keeps it (JSON, by reference
// through the engine's blob store when large: idempotency.Run).
type stored struct {
	Status int                 `json:"status"`
	Header map[string][]string `json:"header,omitempty"`
	Body   []byte              `json:"body,omitempty"`
	all    http.Header         // every header the handler set: a fresh answer sends them all
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
// sent once the outcome is known (stored or not).
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

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
	return r.body.Write(b)
}

// result is the captured response with the named headers kept.
func (r *recorder) result(names []string) stored {
	s := stored{Status: r.status, Body: r.body.Bytes(), all: r.header, Header: map[string][]string{}}
	if s.Status == 0 {
		s.Status = http.StatusOK
	}
	if _, ok := r.header["Content-Type"]; !ok && len(s.Body) > 0 {
		// What net/http would have sniffed: a replay must say the same.
		r.header.Set("Content-Type", http.DetectContentType(s.Body))
	}
	for _, n := range names {
		if v, ok := r.header[n]; ok {
			s.Header[n] = v
		}
	}
	return s
}
