package idemhttp_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency/idemhttp"
)

// What http.ResponseController offers a handler behind the middleware:
// Flush in both modes (a no-op while the response is held, a flush once it
// passes through), the write deadline; never Hijack, which would answer
// past the recorder.
func TestResponseController(t *testing.T) {
	const limit = 1 << 10
	big := bytes.Repeat([]byte("b"), 2*limit)
	cases := []struct {
		name string
		body []byte // written before the call
		call func(w http.ResponseWriter) error
		want error
	}{
		{"Flush while held", []byte("held"), func(w http.ResponseWriter) error { return http.NewResponseController(w).Flush() }, nil},
		{"Flush passing through", big, func(w http.ResponseWriter) error { return http.NewResponseController(w).Flush() }, nil},
		{"an http.Flusher", []byte("held"), func(w http.ResponseWriter) error {
			f, ok := w.(http.Flusher)
			if !ok {
				return http.ErrNotSupported
			}
			f.Flush()
			return nil
		}, nil},
		{"SetWriteDeadline", nil, func(w http.ResponseWriter) error {
			return http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Minute))
		}, nil},
		{"Hijack is refused", nil, func(w http.ResponseWriter) error {
			if _, ok := w.(http.Hijacker); ok {
				return errors.New("an http.Hijacker")
			}
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
				return errors.New("hijacked")
			}
			return err
		}, http.ErrNotSupported},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			calls := make(chan error, 2)
			srv := newServer(t, map[string]http.HandlerFunc{"POST /stream": func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write(c.body)
				calls <- c.call(w)
				_, _ = w.Write([]byte("end"))
			}}, idemhttp.WithMaxResponse(limit))
			resp, b := postKey(t, srv.URL+"/stream", "controller", "x")
			if got := <-calls; !errors.Is(got, c.want) || (c.want == nil && got != nil) {
				t.Fatalf("the handler's call: %v, want %v", got, c.want)
			}
			if resp.StatusCode != http.StatusOK || string(b) != string(c.body)+"end" {
				t.Fatalf("%d %.40s", resp.StatusCode, b)
			}
			// Held, the answer is stored as any other; passed through, it is not.
			again, replayed := postKey(t, srv.URL+"/stream", "controller", "x")
			stored := len(c.body) <= limit
			if again.Header.Get(idemhttp.HeaderReplayed) != "true" || (again.StatusCode == http.StatusOK) != stored ||
				(stored && !bytes.Equal(replayed, b)) || len(calls) > 0 {
				t.Fatalf("repeat: %d %.40s", again.StatusCode, replayed)
			}
		})
	}
}

// Past the bound, a Flush reaches the client: it reads what the handler
// wrote while the handler still runs, as a stream's reader must.
func TestFlushPastTheBoundStreams(t *testing.T) {
	const limit = 1 << 10
	first := bytes.Repeat([]byte("s"), 3*limit) // more than the bound, less than net/http's buffers
	read, ended := make(chan struct{}), make(chan bool, 1)
	srv := newServer(t, map[string]http.HandlerFunc{"POST /stream": func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(first)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-read:
			ended <- false
		case <-time.After(5 * time.Second):
			ended <- true
		}
		_, _ = w.Write([]byte("end"))
	}}, idemhttp.WithMaxResponse(limit))
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/stream", strings.NewReader("x"))
	req.Header.Set(idemhttp.HeaderKey, `"stream"`)
	resp, err := rawClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := make([]byte, len(first))
	_, err = io.ReadFull(resp.Body, got)
	close(read)
	if err != nil || !bytes.Equal(got, first) {
		t.Fatalf("%v: %.40s", err, got)
	}
	if <-ended {
		t.Fatal("the client read the flushed part only when the handler ended")
	}
}
