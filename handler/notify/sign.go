package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SignatureHeader carries "t=<unix seconds>,v1=<hex HMAC-SHA256>" over
// "<t>.<body>" keyed with NOTIFY_SIGNING_SECRET, the scheme of Stripe's
// webhooks: the timestamp inside the MAC lets a receiver refuse replays.
const SignatureHeader = "Idemgate-Signature"

// DefaultTolerance is how far a signature's time may be from the
// receiver's clock when Verify is given no tolerance.
const DefaultTolerance = 5 * time.Minute

// Verification failures, for errors.Is.
var (
	ErrNoSignature  = errors.New("notify: no valid signature header")
	ErrBadSignature = errors.New("notify: signature does not match")
	ErrStale        = errors.New("notify: signature timestamp outside the tolerance")
)

// Sign returns the SignatureHeader value for body sent at t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks a received notify: header is the SignatureHeader value,
// body the raw request body (before any JSON decoding). It accepts any of
// several v1 values (a sender rotating secrets may send one per secret) and
// a timestamp within tolerance of now, either way (DefaultTolerance when
// tolerance <= 0). Its errors never contain the secret.
func Verify(secret, header string, body []byte, tolerance time.Duration) error {
	return verifyAt(secret, header, body, tolerance, time.Now())
}

func verifyAt(secret, header string, body []byte, tolerance time.Duration, now time.Time) error {
	if secret == "" {
		return errors.New("notify: Verify needs the signing secret")
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	ts, sigs := parseSignature(header)
	sent, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrNoSignature
	}
	want := mac(secret, ts, body)
	ok := false
	for _, s := range sigs {
		got, err := hex.DecodeString(s)
		ok = ok || (err == nil && hmac.Equal(got, want))
	}
	if !ok {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(sent, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: signed %s from now", ErrStale, d.Round(time.Second))
	}
	return nil
}

// parseSignature reads "t=…,v1=…[,v1=…]"; unknown keys (future schemes)
// are skipped, and a repeated t makes the header invalid.
func parseSignature(header string) (ts string, sigs []string) {
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			if ts != "" {
				return "", nil
			}
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	return ts, sigs
}
