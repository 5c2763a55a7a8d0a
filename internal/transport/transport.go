// Package transport classifies failures to reach an HTTP peer (the model,
// a webhook) into the retry classes of DESIGN §4.9, in one place.
package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"

	"github.com/idemgate/idemgate/idempotency"
)

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
