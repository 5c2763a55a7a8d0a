package idempotency

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemgate/idemgate/idempotency/driver"
)

// Errors a caller tests with errors.Is. Every error the engine returns for
// a failed claim or completion is classified (see [Classify]).
var (
	// ErrInProgress: another owner holds a live lease on the key; the
	// delivery should be retried later (or wait: [WithWaitInFlight]).
	ErrInProgress = errors.New("idempotency: in progress elsewhere")
	// ErrRetryLater: nobody else carries the delivery's work, and it may not
	// run now: the key is its own live lease (a copy of its try, or a retry
	// of a try that may have died) or a retryable failure in its back-off.
	// It is answered as a RETRYABLE retry_later failure, never acknowledged:
	// the delivery must come again (docs/design.md §6).
	ErrRetryLater = errors.New("idempotency: not now: deliver again later")
	// ErrPayloadMismatch: the key exists with another payload hash; the
	// delivery is refused FINAL (payload_mismatch).
	ErrPayloadMismatch = driver.ErrPayloadMismatch
	// ErrStoreUnavailable: the durable store could not be reached. Nothing
	// was executed; the invocation should fail retryably.
	ErrStoreUnavailable = errors.New("idempotency: durable store unavailable")
	// ErrLeaseLost: the fence moved on (another worker took over) or the
	// record left RUNNING. The caller must stop and publish nothing.
	ErrLeaseLost = driver.ErrLeaseLost
)

// Class is the retry class of a failure (docs/design.md §10).
type Class string

const (
	// ClassRetryable failures are retried while the attempt budget lasts.
	ClassRetryable Class = "RETRYABLE"
	// ClassFinal failures are recorded FAILED_FINAL at once.
	ClassFinal Class = "FINAL"
	// ClassUnknown failures are treated as retryable within the budget.
	ClassUnknown Class = "UNKNOWN"
)

// Error is a classified failure: a class, a short snake_case code that is
// stored and answered as errorType, and the cause.
type Error struct {
	Class Class
	Code  string
	Err   error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Code
	}
	return e.Code + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// message is err's text without its own code: records keep the code apart
// (LastErrorCode) and an *Error rebuilt from them says it once again.
func message(err error) string {
	if e, ok := err.(*Error); ok && e.Err != nil {
		return e.Err.Error()
	}
	return err.Error()
}

// Retryable reports whether FC should deliver again.
func (e *Error) Retryable() bool { return e.Class != ClassFinal }

// Retryable wraps err as a RETRYABLE failure with the given code.
func Retryable(code string, err error) error {
	return &Error{Class: ClassRetryable, Code: code, Err: err}
}

// Final wraps err as a FINAL failure with the given code.
func Final(code string, err error) error { return &Error{Class: ClassFinal, Code: code, Err: err} }

// Classify returns the class and code of err. Unclassified errors are
// UNKNOWN, except deadlines (RETRYABLE timeout) and a lost lease.
func Classify(err error) (Class, string) {
	var e *Error
	switch {
	case err == nil:
		return "", ""
	case errors.As(err, &e):
		return e.Class, e.Code
	case errors.Is(err, context.DeadlineExceeded):
		return ClassRetryable, "timeout"
	case errors.Is(err, ErrLeaseLost):
		return ClassRetryable, "lease_lost"
	case errors.Is(err, ErrStoreUnavailable):
		return ClassRetryable, "store_unavailable"
	case errors.Is(err, driver.ErrInvalid):
		return ClassFinal, "invalid_request"
	case errors.Is(err, driver.ErrMalformedTombstone):
		// Delivering again cannot mend it: an operator must (docs/operations.md).
		return ClassFinal, "malformed_tombstone"
	case errors.Is(err, driver.ErrPurged):
		return ClassFinal, "purged"
	default:
		return ClassUnknown, "unknown"
	}
}

// storeErr marks a store failure as ErrStoreUnavailable unless it is one of
// the package's own sentinels, keeping the cause for logs.
func storeErr(op string, err error) error {
	if err == nil {
		return nil
	}
	for _, s := range []error{ErrLeaseLost, driver.ErrNotFound, ErrPayloadMismatch, driver.ErrNotReplayable, driver.ErrInvalid,
		driver.ErrMalformedTombstone, driver.ErrPurged, ErrInProgress, ErrRetryLater, ErrStoreUnavailable} {
		if errors.Is(err, s) {
			return err
		}
	}
	return fmt.Errorf("%s: %w: %w", op, ErrStoreUnavailable, err)
}
