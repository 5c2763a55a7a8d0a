package notify

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/transport"
)

// BenchmarkPost: one notify to a loopback receiver over a kept-alive
// connection. "raw" is the floor (a plain client with the same pool); the
// others add the allow-list match and, signed, the HMAC.
func BenchmarkPost(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	target := srv.URL + "/hook"
	allow := MustParseAllowList("hooks.example.com,*.example.net,http://" + strings.TrimPrefix(srv.URL, "http://") + ";loopback")
	body := []byte(outcome)

	b.Run("raw", func(b *testing.B) {
		hc := &http.Client{Transport: transport.NewTransport()}
		for b.Loop() {
			res, err := hc.Post(target, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	})
	for _, tc := range []struct {
		name   string
		secret string
	}{{"notify", ""}, {"notify-signed", testSecret}} {
		b.Run(tc.name, func(b *testing.B) {
			c := New(Options{Allow: allow, SigningSecret: tc.secret})
			for b.Loop() {
				if err := c.Post(context.Background(), target, "K1", "req-1", body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkChecks(b *testing.B) {
	allow := MustParseAllowList("hooks.example.com,api.example.com:8443,*.example.net,http://hooks.internal:8080;private")
	u, _ := url.Parse("https://a.b.example.net/hook")
	ip := netip.MustParseAddr("2606:4700::1111")
	b.Run("permit", func(b *testing.B) {
		for b.Loop() {
			if _, ok := allow.permit(u); !ok {
				b.Fatal("not allowed")
			}
		}
	})
	b.Run("classify", func(b *testing.B) {
		for b.Loop() {
			if ClassifyAddr(ip) != AddrPublic {
				b.Fatal("not public")
			}
		}
	})
}
