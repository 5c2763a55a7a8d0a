package idemhttp_test

import (
	"context"
	"fmt"
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
	"github.com/idemgate/idemgate/idempotency/keys"
)

// WithFingerprint plugs a field selection in: a repeat that differs only in
// an unselected field is a repeat; one that differs in a selected field is
// 422; a body the selection cannot read is 400.
func TestWithFingerprint(t *testing.T) {
	s, err := boltstore.Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var runs atomic.Int64
	m := idemhttp.New(idempotency.New(s, idempotency.WithLogger(idemtest.TestLogger(t))),
		idemhttp.WithFingerprint(func(_ *http.Request, body []byte) ([]byte, error) {
			k, err := keys.FromPaths(body, "sku", "quantity")
			return []byte(k), err
		}))
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "order %d", runs.Add(1))
	})))
	t.Cleanup(srv.Close)
	post := func(body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header.Set(idemhttp.HeaderKey, `"fp-1"`)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	cases := []struct {
		name, body string
		status     int
		answer     string
	}{
		{"first", `{"sku":"a","quantity":1,"trace":"t1"}`, 200, "order 1"},
		{"only an unselected field differs", `{"trace":"t2","quantity":1,"sku":"a"}`, 200, "order 1"},
		{"a selected field differs", `{"sku":"a","quantity":2,"trace":"t1"}`, 422, ""},
		{"the selection cannot read it", `{"sku":"a"}`, 400, ""},
	}
	for _, c := range cases {
		status, answer := post(c.body)
		if status != c.status || (c.answer != "" && answer != c.answer) {
			t.Fatalf("%s: %d %s", c.name, status, answer)
		}
	}
	if runs.Load() != 1 {
		t.Fatalf("%d runs", runs.Load())
	}
}

// Whatever WithFingerprint selects, the request target counts: one key on
// a wildcard route, reused with the same body on another account or query,
// is 422 and charges nothing, never the first account's replay.
func TestWithFingerprintKeepsTheTarget(t *testing.T) {
	var runs atomic.Int64
	srv := newServer(t, map[string]http.HandlerFunc{
		"POST /accounts/{id}/charge": func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			fmt.Fprintf(w, "charged account %s", r.PathValue("id"))
		},
	}, idemhttp.WithFingerprint(func(_ *http.Request, body []byte) ([]byte, error) {
		k, err := keys.FromPaths(body, "amount")
		return []byte(k), err
	}))
	cases := []struct {
		name, target string
		status       int
		answer       string
	}{
		{"first", "/accounts/a/charge", 200, "charged account a"},
		{"the same target is a repeat", "/accounts/a/charge", 200, "charged account a"},
		{"another account is 422", "/accounts/b/charge", 422, ""},
		{"another query is 422", "/accounts/a/charge?currency=eur", 422, ""},
	}
	for _, c := range cases {
		resp, b := postKey(t, srv.URL+c.target, "charge-1", `{"amount":5}`)
		if resp.StatusCode != c.status || (c.answer != "" && string(b) != c.answer) {
			t.Fatalf("%s: %d %s", c.name, resp.StatusCode, b)
		}
	}
	if runs.Load() != 1 {
		t.Fatalf("%d runs", runs.Load())
	}
}

// The server's deadline reaches the handler (a client's hang-up does not):
// a handler cut short by it answers 504, which is not stored, and the retry
// runs again.
func TestServerDeadlineReachesTheHandler(t *testing.T) {
	s, err := boltstore.Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var runs atomic.Int64
	h := idemhttp.New(idempotency.New(s, idempotency.WithLogger(idemtest.TestLogger(t)), idempotency.WithRetryBackoff(0))).Handler(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			select {
			case <-r.Context().Done():
				w.WriteHeader(http.StatusGatewayTimeout)
			case <-time.After(5 * time.Second):
				fmt.Fprint(w, "finished")
			}
		}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 50*time.Millisecond) // the server's bound on a request
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	}))
	t.Cleanup(srv.Close)
	for i := 1; i <= 2; i++ {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
		req.Header.Set(idemhttp.HeaderKey, `"deadline"`)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusGatewayTimeout || runs.Load() != int64(i) {
			t.Fatalf("try %d: %d, %d runs", i, resp.StatusCode, runs.Load())
		}
	}
}
