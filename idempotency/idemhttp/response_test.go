package idemhttp_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/idemhttp"
	"github.com/idemgate/idemgate/idempotency/idemtest"
)

// pattern's bytes count modulo a prime, so a chunk lost or sent twice
// (32 KiB, no multiple of the period) changes the body.
type pattern struct{ n byte }

func (p *pattern) Read(b []byte) (int, error) {
	for i := range b {
		b[i], p.n = p.n, (p.n+1)%251
	}
	return len(b), nil
}

func exportBody(size int) io.Reader { return io.LimitReader(&pattern{}, int64(size)) }

// postSum posts with the key and reads the answer's body into a hash, not
// into memory: the test measures what the server holds.
func postSum(t *testing.T, url, key string) (*http.Response, [sha256.Size]byte, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("x"))
	req.Header.Set(idemhttp.HeaderKey, `"`+key+`"`)
	resp, err := rawClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	h := sha256.New()
	var head bytes.Buffer // enough of it to read a problem
	if _, err := io.Copy(io.MultiWriter(h, &limitedBuffer{&head, 4096}), resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp, [sha256.Size]byte(h.Sum(nil)), head.Bytes()
}

type limitedBuffer struct {
	b *bytes.Buffer
	n int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.b.Write(p[:min(len(p), max(l.n-l.b.Len(), 0))])
	return len(p), nil
}

func sumOf(r io.Reader) [sha256.Size]byte {
	h := sha256.New()
	_, _ = io.Copy(h, r)
	return [sha256.Size]byte(h.Sum(nil))
}

// A response within WithMaxResponse is stored and replayed. One that
// outgrows it reaches the client whole, as the handler writes it, while the
// request holds no more than the bound; it is not stored, and since the
// action ran, a repeat is response-not-stored and runs nothing. A retryable
// status past the bound runs again, as any retryable answer does.
func TestMaxResponse(t *testing.T) {
	const limit = 64 << 10
	cases := []struct {
		name      string
		status    int
		size      int
		repeat    int // the repeat's status
		notStored bool
		runs      int64
	}{
		{"at the bound: stored and replayed", http.StatusCreated, limit, http.StatusCreated, false, 1},
		{"past the bound: answered whole, a repeat is response-not-stored", http.StatusCreated, 256 * limit,
			http.StatusInternalServerError, true, 1},
		{"a 503 past the bound: answered whole, a retry runs again", http.StatusServiceUnavailable, 4 * limit,
			http.StatusServiceUnavailable, false, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var runs atomic.Int64
			srv := newServerOn(t, []idempotency.Option{idempotency.WithBlobStore(&idemtest.MemBlobs{}), idempotency.WithRetryBackoff(0)},
				map[string]http.HandlerFunc{"POST /export": func(w http.ResponseWriter, _ *http.Request) {
					runs.Add(1)
					w.Header().Set("Content-Type", "text/csv")
					w.WriteHeader(c.status)
					_, _ = io.CopyBuffer(w, exportBody(c.size), make([]byte, 32<<10))
				}}, idemhttp.WithMaxResponse(limit))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			first, sum, _ := postSum(t, srv.URL+"/export", "export-1")
			runtime.ReadMemStats(&after)
			if first.StatusCode != c.status || first.Header.Get("Content-Type") != "text/csv" || sum != sumOf(exportBody(c.size)) {
				t.Fatalf("first: %d %v, not the handler's body", first.StatusCode, first.Header)
			}
			// Whatever the body's size, the request allocates about the bound
			// (its buffer and the stored copies of at most that): not the body.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32*limit {
				t.Errorf("the request allocated %d bytes for a body of %d, bound %d", alloc, c.size, limit)
			}
			again, againSum, b := postSum(t, srv.URL+"/export", "export-1")
			if again.StatusCode != c.repeat || runs.Load() != c.runs {
				t.Fatalf("repeat: %d, %d runs: %s", again.StatusCode, runs.Load(), b)
			}
			if !c.notStored {
				if againSum != sum {
					t.Fatal("repeat: another body")
				}
				return
			}
			var p idemhttp.Problem
			if err := json.Unmarshal(b, &p); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			if p.Type != idemhttp.TypeNotStored || p.Code != "response_too_large" || p.Retryable || again.Header.Get(idemhttp.HeaderReplayed) != "true" {
				t.Fatalf("repeat: %v %s", again.Header, b)
			}
		})
	}
}
