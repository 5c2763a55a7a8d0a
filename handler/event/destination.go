package event

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"
)

// FailureDestination is the message Function Compute 3.0 sends to an async
// invocation's failure destination (MNS, RocketMQ or another function) once
// the retries are spent. Shape, as documented under "异步调用目标的事件内容"
// ("Event payload sent to the destination") in the FC 3.0 result-callback
// guide (help.aliyun.com/zh/functioncompute/user-guide/result-callback):
//
//	{"timestamp":1660120276975,
//	 "requestContext":{"requestId":"xxx","functionArn":"acs:fc:{region}:{account}:functions/xxx",
//	                   "condition":"FunctionResourceExhausted","approximateInvokeCount":3},
//	 "requestPayload":"<the original event, as a string>",
//	 "responseContext":{"statusCode":200,"functionError":""},
//	 "responsePayload":""}
//
// The FC 3.0 page shows timestamp as Unix milliseconds; the older FC 2.0 page
// (alibabacloud.com/help/zh/function-compute/latest/result-callback) shows an
// RFC 3339 string, so both are accepted.
//
// A success destination sends the same shape; telling them apart is the
// caller's business (Condition, StatusCode, FunctionError are all here).
type FailureDestination struct {
	// Timestamp is the invocation time (zero when absent).
	Timestamp              time.Time
	RequestID              string
	FunctionARN            string
	Condition              string
	ApproximateInvokeCount int
	StatusCode             int
	FunctionError          string
	// RequestPayload is the original invocation body ("" when FC left it out).
	RequestPayload string
	// ResponsePayload is kept as the raw JSON value sent, for the record only.
	ResponsePayload json.RawMessage
}

type destinationWire struct {
	Timestamp      json.RawMessage `json:"timestamp"`
	RequestContext *struct {
		RequestID              string   `json:"requestId"`
		FunctionARN            string   `json:"functionArn"`
		Condition              string   `json:"condition"`
		ApproximateInvokeCount wholeInt `json:"approximateInvokeCount"`
	} `json:"requestContext"`
	RequestPayload  *string `json:"requestPayload"`
	ResponseContext *struct {
		StatusCode    wholeInt `json:"statusCode"`
		FunctionError string   `json:"functionError"`
	} `json:"responseContext"`
	ResponsePayload json.RawMessage `json:"responsePayload"`
}

func parseDestination(body []byte) (*FailureDestination, error) {
	if err := caseVariants(body, ""); err != nil {
		return nil, err
	}
	var w destinationWire
	if err := json.Unmarshal(body, &w); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, newError(TypeInvalidRequest, te.Field, "failure-destination message: %s must be %s, got %s", te.Field, te.Type, te.Value)
		}

		return nil, newError(TypeInvalidRequest, "", "failure-destination message: %v", err)
	}
	if w.RequestContext == nil {
		return nil, newError(TypeInvalidRequest, "requestContext", "failure-destination message needs a requestContext object")
	}
	d := &FailureDestination{
		RequestID:              w.RequestContext.RequestID,
		FunctionARN:            w.RequestContext.FunctionARN,
		Condition:              w.RequestContext.Condition,
		ApproximateInvokeCount: int(w.RequestContext.ApproximateInvokeCount),
		ResponsePayload:        w.ResponsePayload,
	}
	ts, terr := destinationTime(w.Timestamp)
	if terr != nil {
		return nil, terr
	}
	d.Timestamp = ts
	if w.RequestPayload != nil {
		d.RequestPayload = *w.RequestPayload
	}
	if w.ResponseContext != nil {
		d.StatusCode = int(w.ResponseContext.StatusCode)
		d.FunctionError = w.ResponseContext.FunctionError
	}
	return d, nil
}

// destinationNames are the members of destinationWire, by object ("" the
// message itself).
var destinationNames = map[string][]string{
	"":                {"timestamp", "requestContext", "requestPayload", "responseContext", "responsePayload"},
	"requestContext":  {"requestId", "functionArn", "condition", "approximateInvokeCount"},
	"responseContext": {"statusCode", "functionError"},
}

// caseVariants refuses a member whose name matches one of destinationWire's
// only case-insensitively: encoding/json would read it as that member, so
// {"requestPayload":A,"REQUESTPAYLOAD":B} would replay B while a reader of
// requestPayload sees A.
func caseVariants(raw []byte, at string) error {
	var obj map[string]json.RawMessage
	if jsonKind(raw) != '{' || json.Unmarshal(raw, &obj) != nil {
		return nil // not an object: the struct decode says so
	}
	for _, name := range slices.Sorted(maps.Keys(obj)) { // the first error, always the same
		for _, want := range destinationNames[at] {
			if name != want && strings.EqualFold(name, want) {
				field := strings.TrimPrefix(at+"."+name, ".")
				return newError(TypeInvalidRequest, field, "failure-destination message: %s is not a member FC writes (%s is)", field, want)
			}
		}
		if _, nested := destinationNames[name]; nested && at == "" {
			if err := caseVariants(obj[name], name); err != nil {
				return err
			}
		}
	}
	return nil
}

// OriginalEvent returns the original invocation body carried in a
// failure-destination message's requestPayload, so replay can re-drive it
// with the original business key. It fails when inv is not a
// failure-destination message or the payload is missing or not strict JSON.
func (inv *Invocation) OriginalEvent() ([]byte, error) {
	if inv == nil || inv.Kind != KindFailureDestination || inv.Failure == nil {
		return nil, newError(TypeUnsupportedEvent, "", "not a failure-destination message")
	}
	p := []byte(inv.Failure.RequestPayload)
	if len(p) == 0 {
		return nil, newError(TypeInvalidRequest, "requestPayload", "the failure-destination message carries no original event (FC drops payloads too large for the destination)")
	}
	if err := checkStrictJSON(p); err != nil {
		asError(err).Field = "requestPayload"
		return nil, err
	}
	return p, nil
}

// Original parses the original event of a failure-destination message. A
// payload that is itself a failure-destination message is refused, so a
// destination wired back to this function cannot replay in a loop.
func (inv *Invocation) Original() (*Invocation, error) { return inv.OriginalWith(Options{}) }

// OriginalWith is Original, parsed with o.
func (inv *Invocation) OriginalWith(o Options) (*Invocation, error) {
	p, err := inv.OriginalEvent()
	if err != nil {
		return nil, err
	}
	orig, err := ParseWith(p, o)
	if orig != nil && orig.Kind == KindFailureDestination {
		return nil, newError(TypeUnsupportedEvent, "requestPayload", "the original event is itself a failure-destination message")
	}
	return orig, err
}

// destinationTime reads timestamp as Unix milliseconds or an RFC 3339 string.
func destinationTime(raw json.RawMessage) (time.Time, error) {
	if len(raw) == 0 || isNull(raw) {
		return time.Time{}, nil
	}
	if jsonKind(raw) == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
				return t, nil
			}
		}
	} else if ms, ok := WholeNumber(string(raw)); ok {
		return time.UnixMilli(ms).UTC(), nil
	}
	return time.Time{}, newError(TypeInvalidRequest, "timestamp", "must be Unix milliseconds or an RFC 3339 string, got %s", raw)
}
