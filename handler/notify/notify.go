// Package notify posts a task's outcome JSON to the URL the task named
// (docs/design.md §13).
//
// One [Client.Post] is one HTTP request, with Idempotency-Key "<K>:notify" so
// that the receiver can drop the duplicate that a crash between the POST and
// its record can cause. It never retries: the caller's record and retry policy
// decide. Every error is classified with [idempotency.Retryable] or
// [idempotency.Final], and error messages name only the URL's scheme and host,
// because webhook URLs often carry a secret in their path or query.
//
// The URL comes from the event, i.e. from any upstream, and is posted from
// inside the VPC, so a Post reaches only what the operator allowed: the URL
// must match the [AllowList] (NOTIFY_ALLOWED_HOSTS) before anything is sent,
// and every address actually dialed is checked against its class
// ([ClassifyAddr]) at connect time. With a signing secret, every POST
// carries [SignatureHeader], which a receiver checks with [Verify].
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

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/internal/trace"
	"github.com/idemgate/idemgate/internal/transport"
)

// DefaultTimeout bounds one Post when Options.Timeout is not set.
const DefaultTimeout = 10 * time.Second

// Error codes (the outcome's errorType, docs/design.md §10).
const (
	CodeTimeout              = "timeout"               // RETRYABLE
	CodeRateLimited          = "rate_limited"          // RETRYABLE
	CodeTemporaryUnavailable = "temporary_unavailable" // RETRYABLE
	CodeRejected             = "notify_rejected"       // FINAL: the receiver refused (4xx, 3xx)
	CodeForbidden            = "notify_forbidden"      // FINAL: the URL or the address it resolves to is not allowed
	CodeInvalidRequest       = "invalid_request"       // FINAL: bad URL, key or body
)

// KeySuffix is appended to the business key K: notify is its own operation
// with its own record, so its key must differ from the LLM call's.
const KeySuffix = ":notify"

const (
	maxDrain   = 64 << 10 // read at most this much of an answer, so the connection can be reused
	maxSnippet = 200      // bytes of the receiver's answer kept in an error
)

// Options configure a Client.
type Options struct {
	// Timeout bounds one Post (DefaultTimeout when <= 0).
	Timeout time.Duration
	// Allow is NOTIFY_ALLOWED_HOSTS; empty refuses every URL.
	Allow AllowList
	// SigningSecret is NOTIFY_SIGNING_SECRET; empty sends no signature.
	SigningSecret string
	// Lookup resolves host names (default: the system resolver). Tests use
	// it to point a name at a loopback address.
	Lookup LookupFunc
}

// Client posts outcomes. It is safe for concurrent use.
type Client struct {
	hc      *http.Client
	timeout time.Duration
	allow   AllowList
	secret  string
}

// New returns a Client with a connection pool of its own
// (transport.NewTransport) whose dials are checked, no proxy (a proxy would
// connect where the check cannot see), and no redirects followed: following
// one would re-send or drop the body, and to a place the allow list has not
// vetted.
func New(o Options) *Client {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	tr := transport.NewTransport()
	tr.Proxy = nil
	tr.DialContext = newDialer(o.Lookup).DialContext
	hc := &http.Client{Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &Client{hc: hc, timeout: o.Timeout, allow: o.Allow, secret: o.SigningSecret}
}

// Allowed checks rawURL against the allow list without any network I/O, so
// that a caller can refuse a task before doing its work. Post checks again.
func (c *Client) Allowed(rawURL string) error {
	_, _, err := c.check(rawURL)
	return err
}

func (c *Client) check(rawURL string) (*url.URL, perm, error) {
	u, err := checkURL(rawURL)
	if err != nil {
		return nil, perm{}, err
	}
	if c.allow.Empty() {
		return nil, perm{}, idempotency.Final(CodeForbidden, errors.New(
			"notify: NOTIFY_ALLOWED_HOSTS is empty, so no notify URL is allowed; list the receivers' hosts there"))
	}
	p, ok := c.allow.permit(u)
	if !ok {
		return nil, perm{}, idempotency.Final(CodeForbidden, fmt.Errorf(
			"notify: %s://%s is not allowed by NOTIFY_ALLOWED_HOSTS (https only unless an entry says http://)", u.Scheme, u.Host))
	}
	return u, p, nil
}

// Post sends body (JSON) to rawURL with Idempotency-Key key+":notify",
// X-Request-Id requestID and, with a secret, SignatureHeader. A URL the allow
// list does not match, or whose every address is of a class its entry does
// not allow, is FINAL notify_forbidden, and nothing is sent. A 2xx answer is
// success; 408, 409 (the same key is still being processed), 425, 429, 5xx
// and network failures are RETRYABLE; any other answer, 3xx included, is
// FINAL notify_rejected.
func (c *Client) Post(ctx context.Context, rawURL, key, requestID string, body []byte) error {
	u, p, err := c.check(rawURL)
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

	ctx, cancel := context.WithTimeout(context.WithValue(ctx, permKey{}, p), c.timeout)
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
	if tc, ok := trace.FromContext(ctx); ok { // the invocation's trace (handler.TraceInvocation)
		req.Header.Set(trace.Header, tc.String())
	}
	if c.secret != "" {
		req.Header.Set(SignatureHeader, Sign(c.secret, time.Now(), body))
	}

	res, err := c.hc.Do(req)
	if fe, ok := errors.AsType[*forbiddenAddrError](err); ok {
		return idempotency.Final(CodeForbidden, fmt.Errorf("notify: POST %s: %w", where, fe))
	}
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
