package idemhttp_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/idemhttp"
	"github.com/idemgate/idemgate/idempotency/idemtest"
)

// newServer serves mux's routes, wrapped by m, on a fresh embedded store.
func newServer(t *testing.T, routes map[string]http.HandlerFunc, opts ...idemhttp.Option) *httptest.Server {
	t.Helper()
	return newServerOn(t, nil, routes, opts...)
}

// newServerOn is newServer with the engine's options.
func newServerOn(t *testing.T, engOpts []idempotency.Option, routes map[string]http.HandlerFunc, opts ...idemhttp.Option) *httptest.Server {
	t.Helper()
	s, err := boltstore.Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	m := idemhttp.New(idempotency.New(s, append([]idempotency.Option{idempotency.WithLogger(idemtest.TestLogger(t))}, engOpts...)...),
		append([]idemhttp.Option{idemhttp.WithLogger(idemtest.TestLogger(t))}, opts...)...)
	mux := http.NewServeMux()
	for pattern, h := range routes {
		mux.Handle(pattern, m.Handler(h))
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// rawClient shows the response as sent: no redirects followed, no gzip undone.
var rawClient = &http.Client{
	Transport:     &http.Transport{DisableCompression: true},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func postKey(t *testing.T, url, key, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set(idemhttp.HeaderKey, `"`+key+`"`)
	resp, err := rawClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// A replay carries the headers its body and status depend on, and never a
// cookie: each case's repeat must say what its first answer said.
func TestReplayKeepsTheHeadersOfItsBodyAndStatus(t *testing.T) {
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = zw.Write([]byte("charged"))
	_ = zw.Close()
	srv := newServer(t, map[string]http.HandlerFunc{
		"POST /gzip": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Vary", "Accept-Encoding")
			w.Header().Set("Set-Cookie", "session=secret")
			_, _ = w.Write(zipped.Bytes())
		},
		"POST /method": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Allow", "GET, HEAD")
			w.WriteHeader(http.StatusMethodNotAllowed)
		},
		"POST /auth": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="orders"`)
			w.WriteHeader(http.StatusUnauthorized)
		},
		"POST /moved": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Location", "/elsewhere")
			w.Header().Set("Retry-After", "5")
			w.Header().Set("Content-Language", "en")
			w.WriteHeader(http.StatusSeeOther)
		},
	})
	cases := []struct {
		name, path string
		headers    []string
	}{
		{"a gzip body keeps its Content-Encoding and Vary", "/gzip", []string{"Content-Encoding", "Vary"}},
		{"a 405 keeps its Allow", "/method", []string{"Allow"}},
		{"a 401 keeps its WWW-Authenticate", "/auth", []string{"WWW-Authenticate"}},
		{"a 303 keeps its Location, Retry-After and Content-Language", "/moved", []string{"Location", "Retry-After", "Content-Language"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			first, body := postKey(t, srv.URL+c.path, "replay"+c.path, "x")
			again, replayed := postKey(t, srv.URL+c.path, "replay"+c.path, "x")
			if again.Header.Get(idemhttp.HeaderReplayed) != "true" || again.StatusCode != first.StatusCode || !bytes.Equal(body, replayed) {
				t.Fatalf("not a replay: %d %v", again.StatusCode, again.Header)
			}
			for _, h := range c.headers {
				if first.Header.Get(h) == "" || again.Header.Get(h) != first.Header.Get(h) {
					t.Errorf("%s replayed as %q, was %q", h, again.Header.Get(h), first.Header.Get(h))
				}
			}
			if again.Header.Get("Set-Cookie") != "" {
				t.Error("a cookie was replayed")
			}
		})
	}
}

// The middleware's own 401 (WithPrincipal refused the request) carries a
// challenge, as RFC 9110 requires of every 401, and runs nothing.
func TestUnauthenticatedCarriesAChallenge(t *testing.T) {
	refuse := idemhttp.WithPrincipal(func(*http.Request) (string, error) { return "", io.EOF })
	cases := []struct {
		name, want string
		opts       []idemhttp.Option
	}{
		{"the default challenge", idemhttp.DefaultChallenge, []idemhttp.Option{refuse}},
		{"WithChallenge's", `Basic realm="orders"`, []idemhttp.Option{refuse, idemhttp.WithChallenge(`Basic realm="orders"`)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var ran atomic.Bool
			srv := newServer(t, map[string]http.HandlerFunc{"POST /orders": func(http.ResponseWriter, *http.Request) { ran.Store(true) }}, c.opts...)
			resp, b := postKey(t, srv.URL+"/orders", "auth-1", "x")
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != c.want || ran.Load() {
				t.Fatalf("%d %v %s, ran %v", resp.StatusCode, resp.Header, b, ran.Load())
			}
		})
	}
}

// Without a blob store, a success too large for the record is answered once
// and not kept; a repeat says the action completed and must not be sent
// again under a new key (it would run twice), rather than "failed".
func TestTooLargeToKeepSaysItRan(t *testing.T) {
	var runs atomic.Int64
	srv := newServer(t, map[string]http.HandlerFunc{"POST /reports": func(w http.ResponseWriter, _ *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(bytes.Repeat([]byte("r"), 4<<10))
	}})
	first, _ := postKey(t, srv.URL+"/reports", "report-1", "x")
	again, b := postKey(t, srv.URL+"/reports", "report-1", "x")
	var p idemhttp.Problem
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	switch {
	case first.StatusCode != http.StatusCreated:
		t.Fatalf("first: %d", first.StatusCode)
	case again.StatusCode != http.StatusInternalServerError || p.Type != idemhttp.TypeNotStored || p.Code != "result_too_large" ||
		p.Retryable || again.Header.Get(idemhttp.HeaderReplayed) != "true":
		t.Fatalf("repeat: %d %v %s", again.StatusCode, again.Header, b)
	case runs.Load() != 1:
		t.Fatalf("%d runs", runs.Load())
	}
}
