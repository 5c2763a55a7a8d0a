package idemhttp

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// ProblemBase is the prefix of every problem type: each case has a section of
// docs/api.md saying what it means and what a client does about it.
const ProblemBase = "https://github.com/idemgate/idemgate/blob/main/docs/api.md#"

// Problem types (RFC 9457), one per case; docs/api.md has a section for each.
const (
	TypeKeyMissing       = ProblemBase + "key-missing"            // 400: the route requires Idempotency-Key
	TypeKeyMalformed     = ProblemBase + "key-malformed"          // 400: not an sf-string, empty, too long, repeated
	TypeKeyReused        = ProblemBase + "key-reused"             // 422: the key was used with another request
	TypeInFlight         = ProblemBase + "in-flight"              // 409: the first request with the key is still running
	TypeBodyTooLarge     = ProblemBase + "body-too-large"         // 413
	TypeBodyIncomplete   = ProblemBase + "body-incomplete"        // 408: the body could not be read to its end; retry
	TypeUnsupportedMedia = ProblemBase + "unsupported-media-type" // 415: the route takes application/json
	TypeMalformedBody    = ProblemBase + "malformed-body"         // 400: the body is not what the route takes
	TypeUnauthenticated  = ProblemBase + "unauthenticated"        // 401: no principal for the request
	TypeUnavailable      = ProblemBase + "unavailable"            // 503: nothing ran; retry with the same key
	TypeFailed           = ProblemBase + "failed"                 // the key's stored FINAL failure
	TypeNotStored        = ProblemBase + "response-not-stored"    // 500: it ran, its response was too large to keep
	TypeNotFound         = ProblemBase + "not-found"              // 404: no such key
)

// Problem is an RFC 9457 problem details object. Detail never carries a
// secret or the request body: it says what was wrong with the request.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Code is the stored error code of a failed key (the errorType of an
	// event's outcome), when there is one.
	Code string `json:"code,omitempty"`
	// Retryable tells a client whether the same request with the same key
	// may succeed later.
	Retryable bool `json:"retryable"`
	// RetryAfter, when set, is sent as the Retry-After header (whole seconds).
	RetryAfter time.Duration `json:"-"`
	// Replayed marks an answer from the key's record (HeaderReplayed).
	Replayed bool `json:"-"`
	// Challenge, when set, is sent as WWW-Authenticate (a 401 must carry one).
	Challenge string `json:"-"`
}

// HeaderKey is the request header; HeaderReplayed marks a response that
// is a stored outcome answered again, not a new execution (Stripe calls
// it Idempotent-Replayed): the same request with the same key gets the
// same answer forever, so a client must not retry it.
const (
	HeaderKey      = "Idempotency-Key"
	HeaderReplayed = "Idempotency-Replayed"
)

// WriteProblem answers p as application/problem+json.
func WriteProblem(w http.ResponseWriter, p Problem) {
	body, _ := json.Marshal(p) // strings and ints: always encodes
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if p.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((p.RetryAfter+time.Second-1)/time.Second)))
	}
	if p.Replayed {
		h.Set(HeaderReplayed, "true")
	}
	if p.Challenge != "" {
		h.Set("WWW-Authenticate", p.Challenge)
	}
	if p.Status == http.StatusRequestTimeout || p.Status == http.StatusRequestEntityTooLarge {
		// The body was not read to its end: what is left of it on the
		// connection is no next request.
		h.Set("Connection", "close")
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

// KeyProblem is the 400 for a missing (err nil) or unusable Idempotency-Key.
func KeyProblem(err error) Problem {
	if err == nil {
		return Problem{Type: TypeKeyMissing, Title: "Idempotency-Key is missing", Status: http.StatusBadRequest,
			Detail: `this route requires the Idempotency-Key header, a quoted string such as "8e03978e-40d5-43e8-bc93-6894a57f9324"`}
	}
	return Problem{Type: TypeKeyMalformed, Title: "Idempotency-Key is malformed", Status: http.StatusBadRequest,
		Detail: err.Error()}
}

// Problems of the request and of the key's state, shared with the
// template's task API (handler/httpapi).
var (
	ProblemKeyReused = Problem{Type: TypeKeyReused, Title: "Idempotency-Key reused with another request",
		Status: http.StatusUnprocessableEntity,
		Detail: "this Idempotency-Key was first used with another request body (or target); use a new key for a new request"}
	ProblemUnsupportedMedia = Problem{Type: TypeUnsupportedMedia, Title: "Unsupported media type",
		Status: http.StatusUnsupportedMediaType, Detail: "the body must be application/json"}
)

// InFlightProblem is the 409 for a key whose first request still runs.
func InFlightProblem(retryAfter time.Duration) Problem {
	return Problem{Type: TypeInFlight, Title: "A request with this Idempotency-Key is in progress",
		Status: http.StatusConflict, Retryable: true, RetryAfter: retryAfter,
		Detail: "the first request with this key has not finished; retry the same request with the same key after Retry-After"}
}

// NotStoredProblem is the repeat's 500 when the key's request ran and
// completed but its response was too large to keep: a new key would run the
// action twice, so the answer says not to send one.
func NotStoredProblem(code string) Problem {
	return Problem{Type: TypeNotStored, Title: "The request with this Idempotency-Key completed; its response was not kept",
		Status: http.StatusInternalServerError, Code: code,
		Detail: "the key's request ran and completed, but its response was too large to store, so it cannot be answered again; " +
			"do not resend it (with this key or a new one, which would run it twice): look up its effect instead"}
}

// UnavailableProblem is the 503 for a request that ran nothing.
func UnavailableProblem(detail string, retryAfter time.Duration) Problem {
	return Problem{Type: TypeUnavailable, Title: "Temporarily unavailable", Status: http.StatusServiceUnavailable,
		Retryable: true, RetryAfter: retryAfter, Detail: detail}
}

// BodyTooLargeProblem is the 413 for a body over limit bytes.
func BodyTooLargeProblem(limit int64) Problem {
	return Problem{Type: TypeBodyTooLarge, Title: "Request body too large", Status: http.StatusRequestEntityTooLarge,
		Detail: "the body exceeds " + strconv.FormatInt(limit, 10) + " bytes"}
}

// BodyIncompleteProblem is the 408 for a body that could not be read to its
// end (cut off, the connection reset, the server's read deadline): the
// transport failed, not the request, and nothing ran, so the same request
// with the same key may be sent again.
func BodyIncompleteProblem() Problem {
	return Problem{Type: TypeBodyIncomplete, Title: "Request body incomplete", Status: http.StatusRequestTimeout,
		Retryable: true, Detail: "the body could not be read to its end; nothing ran: send the same request again with the same key"}
}

// MalformedBodyProblem is the 400 for a body the route cannot take.
func MalformedBodyProblem(detail string) Problem {
	return Problem{Type: TypeMalformedBody, Title: "Malformed request body", Status: http.StatusBadRequest, Detail: detail}
}
