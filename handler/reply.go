package handler

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/idemgate/idemgate/handler/event"
	"github.com/idemgate/idemgate/idempotency"
)

// Outcome is the answer for one task (docs/design.md §9), with the error fields of
// the FC failure body when it failed.
type Outcome struct {
	IdempotencyKey string `json:"idempotency_key"`
	Status         string `json:"status"`
	Duplicate      bool   `json:"duplicate"`
	Decision       string `json:"decision"`
	Attempt        int    `json:"attempt"`
	ResultRef      string `json:"result_ref"`
	RequestID      string `json:"request_id"`
	ErrorType      string `json:"errorType,omitempty"`
	ErrorMessage   string `json:"errorMessage,omitempty"`
	// Retryable is set on failures: true when FC should deliver again.
	Retryable *bool `json:"retryable,omitempty"`
}

// StatusRejected / DecisionRejected mark an event refused before any claim
// (malformed, invalid envelope or task data): nothing was recorded or run.
const (
	StatusRejected   = "REJECTED"
	DecisionRejected = "REJECTED"
)

// Failed reports whether FC must see this outcome as a failed invocation.
func (o Outcome) Failed() bool { return o.ErrorType != "" }

// Reply is what an adapter sends back: HTTP 200 with the outcome, or 404 (with
// x-fc-status: 404 in the custom runtime) with an errorMessage/errorType body.
type Reply struct {
	Status    int
	Body      []byte
	ErrorType string
}

func reply(v any, failed bool, errType string) Reply {
	body, err := json.Marshal(v)
	if err != nil { // the outcome types always encode; keep the contract anyway
		body = []byte(`{"errorType":"internal","errorMessage":"outcome encoding failed"}`)
		failed, errType = true, "internal"
	}
	if failed {
		return Reply{Status: http.StatusNotFound, Body: body, ErrorType: errType}
	}
	return Reply{Status: http.StatusOK, Body: body}
}

// ErrorReply is the answer to an invocation refused before its body is
// read (`main invoke` of a body over the limit): the outcome of
// docs/design.md §9 with err's class and code, which `main invoke` prints
// as it prints every other answer. A store that cannot be used is
// answered by Unavailable, which keys the events first.
func ErrorReply(requestID string, err error) Reply {
	o := failure(Outcome{RequestID: requestID}, err)
	return reply(o, true, o.ErrorType)
}

// failure fills the error fields of o from err.
func failure(o Outcome, err error) Outcome {
	class, code := idempotency.Classify(err)
	var ee *event.Error
	if errors.As(err, &ee) {
		class, code = idempotency.ClassFinal, ee.Type
	}
	if code == "" { // an error without a code must still answer as a failure
		code = "unknown"
	}
	retry := class != idempotency.ClassFinal
	o.ErrorType, o.ErrorMessage, o.Retryable = code, err.Error(), &retry
	if o.Status == "" {
		o.Status = StatusRejected
	}
	if o.Decision == "" {
		o.Decision = DecisionRejected
	}
	return o
}
