package notify

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const testSecret = "test-signing-secret-0123456789abcdef"

// The scheme pinned by an independent implementation:
//
//	printf '%s' '1700000000.{"status":"SUCCEEDED","idempotencyKey":"K1"}' |
//	  openssl dgst -sha256 -hmac test-signing-secret-0123456789abcdef
func TestSignKnownVector(t *testing.T) {
	got := Sign(testSecret, time.Unix(1700000000, 0), []byte(outcome))
	want := "t=1700000000,v1=a83d0fc5a26851567c68c4df09fee3ea5c58837f4d9343e36ef28b6c1c07edf4"
	if got != want {
		t.Fatalf("Sign = %q, want %q", got, want)
	}
}

func TestVerify(t *testing.T) {
	now := time.Unix(1700000000, 0)
	body := []byte(outcome)
	good := Sign(testSecret, now, body)
	v1 := strings.TrimPrefix(good, "t=1700000000,")
	for _, tc := range []struct {
		name      string
		secret    string
		header    string
		body      string
		at        time.Time
		tolerance time.Duration
		want      error // nil: valid
	}{
		{name: "valid", header: good},
		{name: "valid, spaces after commas", header: "t=1700000000, " + v1},
		{name: "valid among rotated signatures", header: "t=1700000000,v1=00ff," + v1 + ",v0=legacy"},
		{name: "4 minutes late, default tolerance", header: good, at: now.Add(4 * time.Minute)},
		{name: "6 minutes late, default tolerance", header: good, at: now.Add(6 * time.Minute), want: ErrStale},
		{name: "from the future", header: good, at: now.Add(-6 * time.Minute), want: ErrStale},
		{name: "custom tolerance", header: good, at: now.Add(6 * time.Minute), tolerance: 10 * time.Minute},
		{name: "body changed", header: good, body: `{"status":"FAILED_FINAL","idempotencyKey":"K1"}`, want: ErrBadSignature},
		{name: "body re-encoded", header: good, body: `{"idempotencyKey":"K1","status":"SUCCEEDED"}`, want: ErrBadSignature},
		{name: "timestamp changed", header: "t=1700000001," + v1, at: now, want: ErrBadSignature},
		{name: "wrong secret", header: good, secret: "another-secret-0123456789abcdef012", want: ErrBadSignature},
		{name: "signature not hex", header: "t=1700000000,v1=zz", want: ErrBadSignature},
		{name: "missing header", header: "", want: ErrNoSignature},
		{name: "no v1", header: "t=1700000000", want: ErrNoSignature},
		{name: "no timestamp", header: v1, want: ErrNoSignature},
		{name: "timestamp not a number", header: "t=soon," + v1, want: ErrNoSignature},
		{name: "two timestamps", header: "t=1700000000,t=1700000000," + v1, want: ErrNoSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secret, b, at := testSecret, body, now
			if tc.secret != "" {
				secret = tc.secret
			}
			if tc.body != "" {
				b = []byte(tc.body)
			}
			if !tc.at.IsZero() {
				at = tc.at
			}
			err := verifyAt(secret, tc.header, b, tc.tolerance, at)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
			if err != nil && (strings.Contains(err.Error(), testSecret) || strings.Contains(err.Error(), secret)) {
				t.Errorf("error shows the secret: %v", err)
			}
		})
	}
	if err := Verify("", good, body, 0); err == nil {
		t.Error("Verify with an empty secret accepted a signature")
	}
}

// What a receiver sees: the header on every POST when a secret is set,
// verifiable over the raw body with the exported Verify; none without one.
func TestPostSigns(t *testing.T) {
	type got struct{ sig, body string }
	seen := make(chan got, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen <- got{r.Header.Get(SignatureHeader), string(b)}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	allow := MustParseAllowList("http://" + strings.TrimPrefix(srv.URL, "http://") + ";loopback")

	signed := New(Options{Allow: allow, SigningSecret: testSecret})
	if err := signed.Post(context.Background(), srv.URL+"/h", "K1", "req-1", []byte(outcome)); err != nil {
		t.Fatal(err)
	}
	g := <-seen
	if err := Verify(testSecret, g.sig, []byte(g.body), time.Minute); err != nil {
		t.Fatalf("receiver cannot verify %q: %v", g.sig, err)
	}
	if err := Verify("not-the-secret-0123456789abcdef0123", g.sig, []byte(g.body), time.Minute); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("another secret verifies: %v", err)
	}

	if err := New(Options{Allow: allow}).Post(context.Background(), srv.URL+"/h", "K1", "req-1", []byte(outcome)); err != nil {
		t.Fatal(err)
	}
	if g := <-seen; g.sig != "" {
		t.Fatalf("unsigned client sent %s: %q", SignatureHeader, g.sig)
	}
}
