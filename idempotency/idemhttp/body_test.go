package idemhttp_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/idemgate/idemgate/idempotency/idemhttp"
)

// failingBody yields its text, then err: a body cut off in transit.
type failingBody struct {
	r   io.Reader
	err error
}

func (b *failingBody) Read(p []byte) (int, error) {
	if n, _ := b.r.Read(p); n > 0 {
		return n, nil
	}
	return 0, b.err
}

func (b *failingBody) Close() error { return nil }

// A body that could not be read to its end is the transport's failure, not
// the request's: 408 and retryable, so that the client sends it again with
// the same key, never the 400 that tells it the request is wrong for good.
func TestReadBodyTellsATransportFailureFromABadBody(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	cases := []struct {
		name      string
		body      io.ReadCloser
		status    int // 0: the body is usable
		typ       string
		retryable bool
	}{
		{name: "a whole JSON body", body: io.NopCloser(strings.NewReader(`{"a":1}`))},
		{name: "truncated", body: &failingBody{strings.NewReader(`{"a":`), io.ErrUnexpectedEOF},
			status: 408, typ: idemhttp.TypeBodyIncomplete, retryable: true},
		{name: "connection reset mid-body", body: &failingBody{strings.NewReader(`{"a":`), reset},
			status: 408, typ: idemhttp.TypeBodyIncomplete, retryable: true},
		{name: "the server's read deadline", body: &failingBody{strings.NewReader(``), os.ErrDeadlineExceeded},
			status: 408, typ: idemhttp.TypeBodyIncomplete, retryable: true},
		{name: "over http.MaxBytesReader's limit", body: http.MaxBytesReader(nil, io.NopCloser(strings.NewReader(`{"a":12345}`)), 4),
			status: 413, typ: idemhttp.TypeBodyTooLarge},
		{name: "whole but not JSON", body: io.NopCloser(strings.NewReader(`{"a":`)), status: 400, typ: idemhttp.TypeMalformedBody},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/orders", nil)
			r.Body, r.ContentLength = c.body, -1
			r.Header.Set("Content-Type", "application/json")
			body, p := idemhttp.ReadBody(r, 1<<10, true)
			switch {
			case c.status == 0 && (p != nil || len(body) == 0):
				t.Fatalf("a usable body: %q, %+v", body, p)
			case c.status == 0:
			case p == nil:
				t.Fatalf("read %q, want %d %s", body, c.status, c.typ)
			case p.Status != c.status || p.Type != c.typ || p.Retryable != c.retryable:
				t.Fatalf("%+v, want %d %s retryable %v", *p, c.status, c.typ, c.retryable)
			}
		})
	}
}

// The middleware records nothing for a key whose body was cut off in
// transit (fewer bytes than its Content-Length, then the client closed its
// side): the handler does not run, and the retry with the same key runs it once.
func TestCutOffBodyRecordsNothing(t *testing.T) {
	var runs atomic.Int64
	srv := newServer(t, map[string]http.HandlerFunc{"POST /orders": func(http.ResponseWriter, *http.Request) { runs.Add(1) }})
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /orders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: \"cut-1\"\r\nContent-Length: 10\r\n\r\norder"); err != nil {
		t.Fatal(err)
	}
	_ = conn.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || runs.Load() != 0 {
		t.Fatalf("a cut-off body: %d, %d runs", resp.StatusCode, runs.Load())
	}
	if !resp.Close { // what is left of the body is no request: the connection ends with the answer
		t.Fatalf("a cut-off body answered without Connection: close: %v", resp.Header)
	}
	if resp, b := postKey(t, srv.URL+"/orders", "cut-1", "order-one"); resp.StatusCode != 200 ||
		resp.Header.Get(idemhttp.HeaderReplayed) != "" || runs.Load() != 1 {
		t.Fatalf("its retry: %d %v, %d runs: %s", resp.StatusCode, resp.Header, runs.Load(), b)
	}
}

// A body over the bound is not read: the 413 ends the connection, whose
// unread rest is no next request, and the handler never runs.
func TestOversizedBodyEndsTheConnection(t *testing.T) {
	var runs atomic.Int64
	srv := newServer(t, map[string]http.HandlerFunc{"POST /orders": func(http.ResponseWriter, *http.Request) { runs.Add(1) }},
		idemhttp.WithMaxBody(8))
	resp, b := postKey(t, srv.URL+"/orders", "big-1", "an order of more than eight bytes")
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close || runs.Load() != 0 {
		t.Fatalf("%d close %v, %d runs: %s", resp.StatusCode, resp.Close, runs.Load(), b)
	}
}
