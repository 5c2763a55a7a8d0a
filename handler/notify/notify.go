// Package notify posts a task's outcome JSON to the URL the task named
// (DESIGN §4.12).
//
// One [Client.Post] is one HTTP request, with Idempotency-Key "<K>:notify" so
// that the receiver can drop the duplicate that a crash between the POST and
// its record can cause. It never retries: the caller's record and retry policy
// decide. Every error is classified with [idempotency.Retryable] or
// [idempotency.Final], and error messages name only the URL's scheme and host,
// because webhook URLs often carry a secret in their path or query.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemgate/idemgate/internal/transport"

	"github.com/idemgate/idemgate/idempotency"
)

// DefaultTimeout bounds one Post when New is given no timeout.
const DefaultTimeout = 10 * time.Second

// Error codes (the outcome's errorType, DESIGN §4.9).
const (
	CodeTimeout              = "timeout"               // RETRYABLE
	CodeRateLimited          = "rate_limited"          // RETRYABLE
	CodeTemporaryUnavailable = "temporary_unavailable" // RETRYABLE
	CodeRejected             = "notify_rejected"       // FINAL: the receiver refused (4xx, 3xx)
	CodeInvalidRequest       = "invalid_request"       // FINAL: bad URL, key or body
)

// KeySuffix is appended to the business key K: notify is its own operation
// with its own record, so its key must differ from the LLM call's.
const KeySuffix = ":notify"

const (
	maxDrain   = 64 << 10 // read at most this much of an answer, so the connection can be reused
	maxSnippet = 200      // bytes of the receiver's answer kept in an error
)

// Client posts outcomes. It is safe for concurrent use.
type Client struct {
	hc      *http.Client
	timeout time.Duration
}

// New returns a Client whose Posts last at most timeout (DefaultTimeout when
// timeout <= 0). hc is used as a template (nil: a fresh client with a pool
// of its own, transport.NewTransport); redirects are never followed, since
// following one would re-send or drop the body.
func New(timeout time.Duration, hc *http.Client) *Client {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	var c http.Client
	if hc != nil {
		c = *hc // a copy, so the caller's client keeps its redirect policy
	}
	if c.Transport == nil {
		c.Transport = transport.NewTransport()
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{hc: &c, timeout: timeout}
}

// Post sends body (JSON) to rawURL with Idempotency-Key key+":notify" and
// X-Request-Id requestID. A 2xx answer is success; 408, 409 (the same key is
// still being processed), 425, 429, 5xx and network failures are RETRYABLE;
// any other answer is FINAL notify_rejected.
func (c *Client) Post(ctx context.Context, rawURL, key, requestID string, body []byte) error {
	u, err := checkURL(rawURL)
	if err != nil {
		return err
	}
	where := u.Scheme + "://" + u.Host
	switch {
	case key == "" || !validHeaderValue(key) || !validHeaderValue(requestID):
		return idempotency.Final(CodeInvalidRequest, errors.New("notify: key must be non-empty and key and request id free of control characters"))
	case !json.Valid(body):
		return idempotency.Final(CodeInvalidRequest, errors.New("notify: body is not valid JSON"))
	}

	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return idempotency.Final(CodeInvalidRequest, fmt.Errorf("notify: POST %s: cannot build request", where))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key+KeySuffix)
	if requestID != "" {
		req.Header.Set("X-Request-Id", requestID)
	}

	res, err := c.hc.Do(req)
	if err != nil {
		return classifyTransport(where, err, ctx.Err())
	}
	defer res.Body.Close()
	// Drain (bounded) so the connection can be reused; keep a snippet for the error.
	data, _ := io.ReadAll(io.LimitReader(res.Body, maxDrain))

	s := res.StatusCode
	if s >= 200 && s <= 299 {
		return nil
	}
	e := fmt.Errorf("notify: POST %s: HTTP %d%s", where, s, snippet(data))
	switch {
	case s == http.StatusTooManyRequests:
		return idempotency.Retryable(CodeRateLimited, e)
	case s >= 500:
		return idempotency.Retryable(CodeTemporaryUnavailable, e)
	case s == http.StatusRequestTimeout:
		return idempotency.Retryable(CodeTimeout, e)
	case s == http.StatusConflict || s == http.StatusTooEarly:
		// 409: a request with this Idempotency-Key is still in flight at the
		// receiver (IETF httpapi-idempotency-key-header); later it answers.
		return idempotency.Retryable(CodeTemporaryUnavailable, e)
	default:
		// Other 4xx, and 3xx (not followed): the receiver will refuse again.
		return idempotency.Final(CodeRejected, e)
	}
}

// checkURL accepts only absolute http(s) URLs with a host. Its error names
// no part of the URL but the scheme, which cannot hold a secret.
func checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	switch {
	case err != nil:
		return nil, idempotency.Final(CodeInvalidRequest, errors.New("notify: url does not parse"))
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, idempotency.Final(CodeInvalidRequest, fmt.Errorf("notify: url scheme %q is not http or https", u.Scheme))
	case u.Hostname() == "":
		return nil, idempotency.Final(CodeInvalidRequest, errors.New("notify: url has no host"))
	}
	return u, nil
}

// classifyTransport maps a failure to reach the peer (internal/transport).
func classifyTransport(where string, err, ctxErr error) error {
	return transport.Classify("notify: POST "+where, err, ctxErr)
}

// snippet renders the start of the receiver's answer on one line.
func snippet(data []byte) string {
	s := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(string(data), "?"))
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if len(s) > maxSnippet {
		cut := maxSnippet
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return ": " + s
}

// validHeaderValue rejects control characters, which would split or break
// the header line.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b == 0x7f {
			return false
		}
	}
	return true
}
