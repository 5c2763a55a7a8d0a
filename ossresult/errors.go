package ossresult

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
)

// Sentinels; test with errors.Is.
var (
	// ErrConflict: a create-once object already exists with different bytes.
	// Never retryable; the caller decides its class (a stale writer, a reused
	// key with another payload).
	ErrConflict = errors.New("ossresult: object exists with different content")
	// ErrNotFound: no such object.
	ErrNotFound = errors.New("ossresult: object not found")
	// ErrPermission: the store refused the credentials or the operation
	// (HTTP 401/403, EACCES). Never retryable with the same credentials.
	ErrPermission = errors.New("ossresult: permission denied")
	// ErrInvalid: a malformed key, business key, attempt number or metadata.
	ErrInvalid = errors.New("ossresult: invalid argument")
)

// Error is a failed store operation. errors.Is matches its sentinel, if it
// has one, and its cause; [Retryable] tells whether trying again may help.
type Error struct {
	Op        string // "put", "get", "with"
	Key       string // object key
	Status    int    // HTTP status from OSS, 0 if none
	Code      string // OSS error code, e.g. "SignatureDoesNotMatch"
	RequestID string // OSS x-oss-request-id, for support tickets
	Err       error  // cause

	kind      error // sentinel or nil
	retryable bool
}

func (e *Error) Error() string {
	msg := "ossresult: " + e.Op
	if e.Key != "" {
		msg += " " + e.Key
	}
	if e.kind != nil && e.Err == nil {
		return msg + ": " + e.kind.Error()
	}
	if e.Status != 0 {
		msg += fmt.Sprintf(": HTTP %d %s", e.Status, e.Code)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap exposes both the sentinel and the cause to errors.Is/As.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.kind != nil {
		errs = append(errs, e.kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// Retryable reports whether err is worth another try later: server errors
// (5xx, 408, 429), network failures, timeouts and integrity (CRC) mismatches
// are; bad credentials (401/403), conflicts, not-found, bad requests (400)
// and invalid arguments are not.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.retryable
	}
	return transient(err)
}

// transient recognises failures of the transport rather than of the request.
func transient(err error) bool {
	switch {
	case errors.Is(err, ErrConflict), errors.Is(err, ErrNotFound),
		errors.Is(err, ErrPermission), errors.Is(err, ErrInvalid):
		return false
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE):
		return true
	}
	// *url.Error wraps every client failure, bad requests included (it
	// satisfies net.Error itself), so judge what it wraps.
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Timeout() || transient(ue.Err)
	}
	_, isNet := errors.AsType[net.Error](err)
	return isNet
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
