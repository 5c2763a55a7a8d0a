package idemhttp

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/idemgate/idemgate/internal/sleep"
)

// Transport is a client http.RoundTripper that makes a retry safe by
// construction: each request of a non-safe method gets one Idempotency-Key
// (unless it carries one), kept for every retry of it, and is retried with
// backoff on network errors, 408, 409, 429 and 5xx — except an answer marked
// Idempotency-Replayed, which is the key's stored outcome and will not
// change. Retry-After is honoured up to MaxBackoff.
type Transport struct {
	Base        http.RoundTripper // nil: http.DefaultTransport
	MaxAttempts int               // requests per logical request (default 5)
	MinBackoff  time.Duration     // first pause (default 100 ms), doubling, with full jitter
	MaxBackoff  time.Duration     // longest pause (default 5 s)
	// NewKey makes a key per logical request (default: a random UUID v4).
	NewKey func() string
}

// NewClient is an http.Client on a Transport over base (nil:
// http.DefaultTransport).
func NewClient(base http.RoundTripper) *http.Client {
	return &http.Client{Transport: &Transport{Base: base}}
}

// RoundTrip sends req, retrying as the Transport says. The body is buffered
// (or re-read through req.GetBody) so that every attempt sends the same one.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return base.RoundTrip(req)
	}
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	key := req.Header.Get(HeaderKey)
	if key == "" {
		newKey := t.NewKey
		if newKey == nil {
			newKey = uuid4
		}
		if key, err = FormatKey(newKey()); err != nil {
			return nil, fmt.Errorf("idemhttp: %w", err)
		}
	}
	attempts := t.MaxAttempts
	if attempts <= 0 {
		attempts = 5
	}
	for n := 1; ; n++ {
		r := req.Clone(req.Context())
		r.Header.Set(HeaderKey, key)
		withBody(r, body)
		resp, err := base.RoundTrip(r)
		if n >= attempts || !retry(resp, err) || req.Context().Err() != nil {
			return resp, err
		}
		pause := t.backoff(n, resp)
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection
			resp.Body.Close()
		}
		if !sleep.For(req.Context(), pause) {
			return nil, req.Context().Err()
		}
	}
}

// retry: a network error, or a status a later attempt may change that is not
// a stored outcome.
func retry(resp *http.Response, err error) bool {
	if err != nil {
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}
	if resp.Header.Get(HeaderReplayed) == "true" {
		return false
	}
	s := resp.StatusCode // 408: the server did not get the whole request (BodyIncompleteProblem)
	return s == http.StatusRequestTimeout || s == http.StatusConflict || s == http.StatusTooManyRequests || s >= 500
}

func (t *Transport) backoff(n int, resp *http.Response) time.Duration {
	lo, hi := t.MinBackoff, t.MaxBackoff
	if lo <= 0 {
		lo = 100 * time.Millisecond
	}
	if hi <= 0 {
		hi = 5 * time.Second
	}
	if resp != nil {
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			return min(time.Duration(s)*time.Second, hi)
		}
	}
	d := min(lo<<min(n-1, 20), hi)
	return lo/2 + rand.N(d) // full jitter above a floor: many clients do not retry in step
}

// readBody reads req's body once, so that every attempt sends the same bytes.
func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, fmt.Errorf("idemhttp: read the request body: %w", err)
	}
	return b, nil
}

// withBody gives r a fresh copy of body.
func withBody(r *http.Request, body []byte) {
	if body == nil {
		r.Body, r.GetBody, r.ContentLength = http.NoBody, nil, 0
		return
	}
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	r.Body, _ = r.GetBody()
	r.ContentLength = int64(len(body))
}

func uuid4() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
