package testenv

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// Peer starts an HTTP server that counts its requests and answers with h,
// closed when the test ends. It reads each body first: that lets net/http
// notice a client that hung up, which ends r.Context() and so handlers that
// sleep on it.
func Peer(t testing.TB, h http.HandlerFunc) (url string, hits *atomic.Int64) {
	t.Helper()
	hits = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, hits
}
