package idemhttp

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/jcs"
	"github.com/idemgate/idemgate/idempotency/keys"
)

// Middleware makes POST-like routes safe to retry with an Idempotency-Key.
// Build one per process on the engine the rest of the service uses.
type Middleware struct {
	eng         *idempotency.Engine
	principal   func(*http.Request) (string, error)
	challenge   string
	fingerprint func(*http.Request, []byte) ([]byte, error)
	headers     []string
	maxBody     int64
	maxResponse int64
	retryAfter  time.Duration
	log         *slog.Logger
}

// Option configures a Middleware.
type Option func(*Middleware)

// WithPrincipal scopes keys by the caller: fn names the tenant or principal
// a request acts for (from its verified credentials, never from a field the
// caller may choose freely). Two principals' identical keys are two keys. An
// error answers 401 without running, with WithChallenge's challenge.
// Default: one principal for everyone.
func WithPrincipal(fn func(*http.Request) (string, error)) Option {
	return func(m *Middleware) { m.principal = fn }
}

// WithChallenge sets the WWW-Authenticate of the 401 for a request
// WithPrincipal refuses (RFC 9110 requires one on every 401), e.g.
// `Bearer realm="orders"`. Default: DefaultChallenge.
func WithChallenge(challenge string) Option { return func(m *Middleware) { m.challenge = challenge } }

// DefaultChallenge is the 401's WWW-Authenticate without WithChallenge: the
// scheme most APIs take, with no parameters.
const DefaultChallenge = "Bearer"

// WithFingerprint chooses what of the body must be the same for a repeat to
// be a repeat (default: all of it, JSON bodies in RFC 8785 canonical form);
// the request target (path and query) always counts besides, whatever fn
// returns, since a route with a wildcard (POST /accounts/{id}/charge) is one
// key scope. A reuse of the key with another fingerprint or target is 422.
// fn may select fields (keys.FromPaths, a JMESPath) to ignore volatile ones;
// its error answers 400.
func WithFingerprint(fn func(r *http.Request, body []byte) ([]byte, error)) Option {
	return func(m *Middleware) { m.fingerprint = fn }
}

// WithStoredHeaders names the response headers stored and replayed besides
// DefaultStoredHeaders. Never name one that carries a secret (Set-Cookie):
// it would be answered to every repeat.
func WithStoredHeaders(names ...string) Option {
	return func(m *Middleware) {
		for _, n := range names {
			m.headers = append(m.headers, http.CanonicalHeaderKey(n))
		}
	}
}

// WithMaxBody bounds the request body (default DefaultMaxBody); a larger one
// is 413 without running.
func WithMaxBody(n int64) Option { return func(m *Middleware) { m.maxBody = n } }

// WithMaxResponse bounds the response body the middleware holds to store
// (default DefaultMaxResponse; n <= 0 is the default). A handler that writes
// more is answered as it writes, past the bound, and its response is not
// stored: the key answers every repeat response-not-stored (code
// response_too_large), never a second run.
func WithMaxResponse(n int64) Option {
	return func(m *Middleware) {
		if n > 0 {
			m.maxResponse = n
		}
	}
}

// DefaultMaxResponse bounds a stored response body (1 MiB, as DefaultMaxBody
// a request's). Storing holds a response about ten times over for a moment
// (measured: the buffer, its JSON, base64 and so a third larger, and the
// copies encoding it and decoding it back make): 10 MiB a request, 100 MB
// for the template's 10 concurrent requests on a 512 MB FC instance, which
// leaves the garbage collector its headroom. A larger answer (an export)
// belongs in an object the response names.
const DefaultMaxResponse = 1 << 20

// WithRetryAfter sets the Retry-After of a 409 in flight and a 503 (default
// 1 s).
func WithRetryAfter(d time.Duration) Option { return func(m *Middleware) { m.retryAfter = d } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(m *Middleware) { m.log = l } }

// DefaultStoredHeaders are replayed with a stored response: those that
// describe its body (without Content-Encoding a gzip body is unreadable) or
// that its status requires (Allow on a 405, WWW-Authenticate on a 401).
// Never a cookie or a credential.
var DefaultStoredHeaders = []string{"Content-Type", "Content-Encoding", "Content-Language", "Content-Location",
	"Location", "Etag", "Last-Modified", "Cache-Control", "Vary", "Allow", "WWW-Authenticate", "Retry-After"}

// New builds the middleware. To let a repeat that meets the first request in
// flight wait for its response instead of answering 409 at once, give the
// engine idempotency.WithWaitInFlight; for responses larger than a record
// holds (about 1.5 KiB of body) and up to WithMaxResponse,
// idempotency.WithBlobStore.
func New(eng *idempotency.Engine, opts ...Option) *Middleware {
	m := &Middleware{eng: eng, principal: func(*http.Request) (string, error) { return "", nil }, challenge: DefaultChallenge,
		fingerprint: defaultFingerprint, maxBody: DefaultMaxBody, maxResponse: DefaultMaxResponse, retryAfter: time.Second, log: slog.Default()}
	WithStoredHeaders(DefaultStoredHeaders...)(m) // canonical: the recorder looks them up as net/http keys them
	for _, o := range opts {
		o(m)
	}
	return m
}

// RouteOption configures one wrapped route.
type RouteOption func(*route)

// Route names the route in the key (default: the ServeMux pattern that
// matched, else the URL path). Keys of two routes never meet.
func Route(name string) RouteOption { return func(r *route) { r.name = name } }

// Optional lets a request without Idempotency-Key run without idempotency
// (default: required, 400).
func Optional() RouteOption { return func(r *route) { r.optional = true } }

// JSONBody requires an application/json body holding valid JSON (415, 400).
func JSONBody() RouteOption { return func(r *route) { r.json = true } }

type route struct {
	m        *Middleware
	h        http.Handler
	name     string
	optional bool
	json     bool
}

// Handler wraps h. Safe methods (GET, HEAD, OPTIONS, TRACE) pass through:
// they are idempotent already.
func (m *Middleware) Handler(h http.Handler, opts ...RouteOption) http.Handler {
	rt := &route{m: m, h: h}
	for _, o := range opts {
		o(rt)
	}
	return rt
}

func (rt *route) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		rt.h.ServeHTTP(w, r)
		return
	}
	key, present, err := ParseKey(r.Header.Values(HeaderKey))
	switch {
	case err != nil:
		WriteProblem(w, KeyProblem(err))
		return
	case !present && rt.optional:
		rt.h.ServeHTTP(w, r)
		return
	case !present:
		WriteProblem(w, KeyProblem(nil))
		return
	}
	body, p := ReadBody(r, rt.m.maxBody, rt.json)
	if p != nil {
		WriteProblem(w, *p)
		return
	}
	req, p := rt.claimRequest(r, key, body)
	if p != nil {
		WriteProblem(w, *p)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rt.serve(w, r, req)
}

// claimRequest scopes the client's key by principal, method and route.
func (rt *route) claimRequest(r *http.Request, key string, body []byte) (idempotency.ClaimRequest, *Problem) {
	principal, err := rt.m.principal(r)
	if err != nil {
		return idempotency.ClaimRequest{}, &Problem{Type: TypeUnauthenticated, Title: "Unauthenticated",
			Status: http.StatusUnauthorized, Challenge: rt.m.challenge,
			Detail: "the request names no principal this service accepts"}
	}
	name := rt.name
	if name == "" {
		name = r.Pattern
	}
	if name == "" {
		name = r.URL.Path
	}
	k, err := keys.HTTPRequest(principal, r.Method, name, key)
	if err != nil {
		p := MalformedBodyProblem("the request cannot be keyed: " + err.Error())
		return idempotency.ClaimRequest{}, &p
	}
	fp, err := rt.m.fingerprint(r, body)
	if err != nil {
		p := MalformedBodyProblem("the request cannot be fingerprinted: " + err.Error())
		return idempotency.ClaimRequest{}, &p
	}
	// The target is escaped (no newline in it), so the two never run together.
	h := sha256.Sum256(append([]byte(r.URL.RequestURI()+"\n"), fp...))
	// Each HTTP request is a delivery of its own: no retry of it comes back
	// under the same owner, so a live lease is always another's (409).
	return idempotency.ClaimRequest{Key: k, PayloadHash: hex.EncodeToString(h[:]), Owner: newOwner(), Try: -1}, nil
}

// serve runs the handler under the key's lease, or answers from its record.
func (rt *route) serve(w http.ResponseWriter, r *http.Request, req idempotency.ClaimRequest) {
	var fresh *stored
	// Detached from the client's connection: a client that gives up must not
	// leave the action half done; its retry meets the lease (409) or the
	// stored response. The server's deadline stays (the lease is clamped to
	// it), and the lease still ends the work if it is lost.
	ctx := context.WithoutCancel(r.Context())
	if dl, ok := r.Context().Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl)
		defer cancel()
	}
	resp, out, err := idempotency.Run(ctx, rt.m.eng, req, func(ctx context.Context, _ *idempotency.Lease) (stored, error) {
		rec := newRecorder(w, rt.m.maxResponse)
		rt.h.ServeHTTP(rec, r.WithContext(ctx))
		s := rec.result(rt.m.headers)
		fresh = &s
		switch {
		case !Storable(s.Status):
			return stored{}, idempotency.Retryable("http_"+strconv.Itoa(s.Status),
				fmt.Errorf("the handler answered %d, which a retry may change: not stored", s.Status))
		case s.sent: // it ran and was answered: FINAL, so that no repeat runs it again
			return stored{}, idempotency.Final(codeResponseTooLarge,
				fmt.Errorf("the response outgrew %d bytes (WithMaxResponse): answered, not stored", rt.m.maxResponse))
		}
		return s, nil
	})
	switch {
	case fresh != nil: // it ran here: its own answer, stored or not
		if err != nil && !isHTTPRetry(err) {
			rt.m.log.ErrorContext(ctx, "the response was answered but could not be stored", "request_id", req.Owner,
				"idempotency_key", req.Key, "error", err.Error())
		}
		if !fresh.sent {
			fresh.write(w, false)
		}
	case err == nil:
		resp.write(w, true)
	default:
		rt.m.log.InfoContext(ctx, "answered without running", "request_id", req.Owner, "idempotency_key", req.Key,
			"decision", string(out.Decision), "error", err.Error())
		p := rt.m.problemOf(err, out)
		if errors.Is(err, idempotency.ErrRetryLater) {
			p.RetryAfter = rt.m.backoffLeft(ctx, req.Key)
		}
		WriteProblem(w, p)
	}
}

// codeTooLarge is the engine's code for a result over what a record holds,
// without a blob store (idempotency.WithBlobStore).
const codeTooLarge = "result_too_large"

// codeResponseTooLarge is the key's code for a response over WithMaxResponse.
const codeResponseTooLarge = "response_too_large"

func isHTTPRetry(err error) bool {
	_, code := idempotency.Classify(err)
	return len(code) == 8 && code[:5] == "http_"
}

// problemOf answers an error from the claim or the key's record.
func (m *Middleware) problemOf(err error, out idempotency.Outcome) Problem {
	switch {
	case errors.Is(err, idempotency.ErrInProgress):
		return InFlightProblem(m.retryAfter)
	case errors.Is(err, idempotency.ErrPayloadMismatch):
		return ProblemKeyReused
	case errors.Is(err, idempotency.ErrStoreUnavailable):
		return UnavailableProblem("the idempotency store is unreachable; nothing ran", m.retryAfter)
	}
	class, code := idempotency.Classify(err)
	if code == codeTooLarge || code == codeResponseTooLarge { // it ran: "failed, use a new key" would run it twice
		p := NotStoredProblem(code)
		p.Replayed = out.Duplicate
		return p
	}
	if out.Status == driver.StatusFailedFinal || class == idempotency.ClassFinal {
		// The key's first request failed for good (its retries ran out): this
		// key will always answer so.
		return Problem{Type: TypeFailed, Title: "The request with this Idempotency-Key failed", Code: code,
			Status: http.StatusInternalServerError, Replayed: out.Duplicate,
			Detail: "the key's request failed for good (" + code + "); send a new request with a new key"}
	}
	if code == "retry_later" {
		p := UnavailableProblem("the key's last try failed in a way a retry may fix; retry the same request with the same key after Retry-After", m.retryAfter)
		p.Code = code
		return p
	}
	p := UnavailableProblem("the request could not be completed ("+code+"); retry it with the same key", m.retryAfter)
	p.Code = code
	return p
}

// backoffLeft is how long the key's retryable failure is in its back-off
// (idempotency.WithRetryBackoff): a retry sooner is answered retry_later
// again. At least the middleware's Retry-After.
func (m *Middleware) backoffLeft(ctx context.Context, key string) time.Duration {
	rec, err := m.eng.Get(ctx, key)
	if err != nil {
		return m.retryAfter
	}
	return max(time.Until(rec.RetryAfter), m.retryAfter)
}

// Storable reports whether a response of this status is the request's
// outcome (stored and replayed): 2xx, 3xx and 4xx, except the statuses that
// say a retry may succeed (408, 425, 429), which are answered but not
// stored, as 5xx are.
func Storable(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	}
	return status >= 200 && status < 500
}

// defaultFingerprint: the body, JSON canonical (member order and white
// space are not a different request).
func defaultFingerprint(_ *http.Request, body []byte) ([]byte, error) {
	if c, err := jcs.Canonicalize(body); err == nil && len(body) > 0 {
		return c, nil
	}
	return body, nil
}

func newOwner() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "http-" + hex.EncodeToString(b)
}
