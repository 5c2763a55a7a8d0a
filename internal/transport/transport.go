// Package transport is what the function's HTTP clients (the model, a
// webhook) share: their connection pools, and the classification of
// failures to reach the peer into the retry classes of docs/design.md §10.
package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"syscall"

	"github.com/idemgate/idemgate/idempotency"
)

// IdlePerHost is how many idle connections a client keeps per host: as
// many as invocations may run at once on an instance (the MySQL pool is
// sized the same; s.yaml sets instanceConcurrency 10). net/http's default of
// 2 would close, and later re-dial with a new TLS handshake, every
// connection beyond the second after each concurrent call.
const IdlePerHost = 16

// NewTransport returns a connection pool of the caller's own: net/http's
// defaults with IdlePerHost. It is deliberately not http.DefaultTransport,
// whose idle connections any code in the process may close at any time
// (httptest.Server.Close does, which broke a request in flight in a test).
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = IdlePerHost
	return t
}

// Codes shared by the HTTP clients.
const (
	CodeTimeout              = "timeout"
	CodeTemporaryUnavailable = "temporary_unavailable"
)

// Classify maps a failed HTTP exchange to a RETRYABLE error: "timeout" when
// the call ran out of time (ctxErr is the call context's error, so both our
// deadline and the caller's count), "temporary_unavailable" otherwise
// (refused, reset, EOF, DNS, TLS — nothing says the next delivery fails the
// same way, and the attempt budget bounds it). The *url.Error layer is
// dropped: it repeats the URL, which may carry a secret in its path.
func Classify(prefix string, err, ctxErr error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	wrapped := fmt.Errorf("%s: %w", prefix, err)
	var ne net.Error
	switch {
	case ctxErr != nil:
		if !errors.Is(err, ctxErr) {
			wrapped = fmt.Errorf("%s: %w (%w)", prefix, ctxErr, err)
		}
		return idempotency.Retryable(CodeTimeout, wrapped)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return idempotency.Retryable(CodeTimeout, wrapped)
	case errors.Is(err, syscall.ECONNREFUSED):
		return idempotency.Retryable(CodeTemporaryUnavailable, wrapped)
	default:
		return idempotency.Retryable(CodeTemporaryUnavailable, wrapped)
	}
}
