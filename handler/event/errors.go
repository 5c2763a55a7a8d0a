package event

import (
	"errors"
	"fmt"
	"strings"
)

// Error types (the outcome's errorType). Every one of them is FINAL (docs/design.md §10):
// the same bytes will be rejected the same way on every delivery, so retrying
// cannot help and the event belongs in the dead-letter queue.
const (
	// TypeMalformedEvent: the body (or a payload inside it) is not one JSON
	// value, is not valid UTF-8, repeats an object key, or is neither a JSON
	// object nor an array.
	TypeMalformedEvent = "malformed_event"
	// TypeInvalidEnvelope: a CloudEvents 1.0 rule is broken; Field names the attribute.
	TypeInvalidEnvelope = "invalid_envelope"
	// TypeInvalidBatch: at least one member of an event-streaming batch was rejected.
	TypeInvalidBatch = "invalid_batch"
	// TypeInvalidRequest: the task data, timer event or failure-destination
	// message lacks a field or has a bad one; Field names it.
	TypeInvalidRequest = "invalid_request"
	// TypeUnsupportedEvent: well-formed JSON of no kind this function handles.
	TypeUnsupportedEvent = "unsupported_event"
	// TypeBatchTooLarge: a batch of more than MaxBatch events.
	TypeBatchTooLarge = "batch_too_large"
)

// Error is a rejected body, batch member or field. It is always FINAL.
// Functions hand it out as an error (errors_test.go keeps it so, because a
// nil *Error returned as an error is not nil); read it with errors.As.
type Error struct {
	// Type is one of the Type* constants.
	Type string
	// Field is the offending attribute or data field ("" when not about one field).
	Field string
	// Msg says what is wrong, for logs and the outcome's errorMessage.
	Msg string
	// Index is the member's position in a batch body; -1 when the error is not
	// about a batch member (a single event, a timer, a whole batch...).
	Index int
	// EventSource and EventID identify the rejected event when they could be
	// read (they may be empty), so a batch outcome can say which event failed.
	EventSource string
	EventID     string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("event: ")
	b.WriteString(e.Type)
	if e.Index >= 0 {
		fmt.Fprintf(&b, ": member %d", e.Index)
		if e.EventID != "" {
			fmt.Fprintf(&b, " (id %q)", e.EventID)
		}
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": %s", e.Field)
	}
	if e.Msg != "" {
		b.WriteString(": ")
		b.WriteString(e.Msg)
	}
	return b.String()
}

// Is lets errors.Is match an *Error against the Err* sentinels by Type alone.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok || t == nil {
		return false
	}
	if t.Field == "" && t.Msg == "" {
		return t.Type == e.Type
	}
	return *t == *e
}

// Sentinels for errors.Is; they match any *Error of the same Type.
var (
	ErrMalformedEvent   = &Error{Type: TypeMalformedEvent, Index: -1}
	ErrInvalidEnvelope  = &Error{Type: TypeInvalidEnvelope, Index: -1}
	ErrInvalidBatch     = &Error{Type: TypeInvalidBatch, Index: -1}
	ErrInvalidRequest   = &Error{Type: TypeInvalidRequest, Index: -1}
	ErrUnsupportedEvent = &Error{Type: TypeUnsupportedEvent, Index: -1}
	ErrBatchTooLarge    = &Error{Type: TypeBatchTooLarge, Index: -1}
)

// IsFinal reports whether err (or an error it wraps) is a rejection from this
// package. All of them are FINAL: redelivering the same bytes cannot succeed.
func IsFinal(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// asError returns the *Error in err's chain, or nil. Every error this
// package's functions return is an *Error; they are declared as error all
// the same, so that a nil *Error can never become a non-nil error.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

func newError(typ, field, format string, args ...any) error {
	return &Error{Type: typ, Field: field, Msg: fmt.Sprintf(format, args...), Index: -1}
}
