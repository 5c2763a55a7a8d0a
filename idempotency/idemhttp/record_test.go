package idemhttp

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The recorder's buffer never grows past its limit, however the handler
// writes: held whole within it, the rest passed to the client.
func TestRecorderHoldsAtMostItsLimit(t *testing.T) {
	const limit = 3000 // no power of two: doubling would overshoot it
	cases := []struct {
		name   string
		writes []int
		passed bool
	}{
		{"small writes up to the limit", []int{1, 100, 999, 1900}, false},
		{"small writes past the limit", []int{1000, 1000, 1000, 1, 1000}, true},
		{"one write past the limit", []int{limit + 1}, true},
		{"a held body, then one large write", []int{10, 10 * limit}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			client := httptest.NewRecorder()
			rec := newRecorder(client, limit)
			var want bytes.Buffer
			for i, n := range c.writes {
				b := bytes.Repeat([]byte{byte('a' + i)}, n)
				want.Write(b)
				if k, err := rec.Write(b); k != n || err != nil {
					t.Fatalf("write %d: %d, %v", i, k, err)
				}
				if cap(rec.body) > limit {
					t.Fatalf("write %d: a buffer of %d bytes", i, cap(rec.body))
				}
			}
			got := rec.body
			if rec.passed {
				got = client.Body.Bytes()
			}
			if rec.passed != c.passed || !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("passed %v, %d bytes of %d", rec.passed, len(got), want.Len())
			}
			// Passed through, it says the type net/http would have sniffed.
			if ct := client.Header().Get("Content-Type"); c.passed && ct != http.DetectContentType(want.Bytes()) {
				t.Fatalf("Content-Type %q", ct)
			}
		})
	}
}

// Flush sends nothing while the response is held (it may yet be stored),
// and flushes the client's writer once it passes through.
func TestRecorderFlush(t *testing.T) {
	const limit = 10
	cases := []struct {
		name    string
		write   int
		flushed bool
	}{
		{"held: nothing is sent", limit, false},
		{"passed through: the client's writer flushes", limit + 1, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			client := httptest.NewRecorder()
			rec := newRecorder(client, limit)
			_, _ = rec.Write(bytes.Repeat([]byte("x"), c.write))
			if err := rec.FlushError(); err != nil {
				t.Fatal(err)
			}
			if client.Flushed != c.flushed || (client.Body.Len() > 0) != c.flushed {
				t.Fatalf("flushed %v, %d bytes sent", client.Flushed, client.Body.Len())
			}
		})
	}
}

// WithMaxResponse sets the bound; none, or one not positive, is the default,
// as WithMaxBody's.
func TestWithMaxResponse(t *testing.T) {
	cases := []struct {
		name string
		opts []Option
		want int64
	}{
		{"unset", nil, DefaultMaxResponse},
		{"set", []Option{WithMaxResponse(5)}, 5},
		{"zero is the default", []Option{WithMaxResponse(0)}, DefaultMaxResponse},
		{"negative is the default", []Option{WithMaxResponse(-1)}, DefaultMaxResponse},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := New(nil, c.opts...).maxResponse; got != c.want {
				t.Fatalf("%d, want %d", got, c.want)
			}
		})
	}
}
