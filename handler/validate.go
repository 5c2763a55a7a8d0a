package handler

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"

	"github.com/idemgate/idemgate/handler/event"
	"github.com/idemgate/idemgate/ossresult"
)

// Validation is what `main validate` reports of a body: what the function
// makes of it before it claims anything (docs/events.md).
type Validation struct {
	Kind  string `json:"kind,omitempty"`
	Valid bool   `json:"valid"`
	// ErrorType and ErrorMessage: the body as a whole is refused.
	ErrorType    string `json:"errorType,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
	// Events: one per task event, in body order.
	Events []EventValidation `json:"events,omitempty"`
}

// EventValidation is one task event's verdict and, once they could be
// derived, its identifiers (docs/design.md §4).
type EventValidation struct {
	Index          int    `json:"index"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	PayloadHash    string `json:"payload_hash,omitempty"`
	InputVersion   string `json:"input_version,omitempty"`
	Fingerprint    string `json:"fingerprint,omitempty"`
	RequestID      string `json:"request_id,omitempty"`
	ErrorType      string `json:"errorType,omitempty"`
	ErrorMessage   string `json:"errorMessage,omitempty"`
	// Schema is docs/schema's verdict on the event's data: "valid", the
	// schema's error, or "" when there is no data object to judge.
	Schema string `json:"schema,omitempty"`
}

// Validate parses body and checks each task event as Handle does up to
// the claim (limits, the key, the payload hash, the fingerprint, the task
// type, notify), without a store, a model or a result store; schema, when
// set, judges each event's data object. The task types' own input checks
// run with the task and are not made here.
func (p *Pipeline) Validate(ctx context.Context, body []byte, schema func(data []byte) error) Validation {
	inv, err := event.ParseWith(body, event.Options{KeyFallback: p.KeyFallback})
	var v Validation
	if inv != nil {
		v.Kind = string(inv.Kind)
	}
	if errors.Is(err, event.ErrBatchTooLarge) {
		v.Kind = string(event.KindBatch) // refused whole, before its members are read
	}
	switch {
	case inv == nil || err != nil && inv.Kind != event.KindSingle && inv.Kind != event.KindBatch:
		v.ErrorType, v.ErrorMessage = failure(Outcome{}, err).ErrorType, err.Error()
		return v
	case inv.Kind == event.KindFailureDestination:
		v.ErrorType, v.ErrorMessage = "dead_letter_message", "an FC failure-destination message is not a task: re-drive it with `main replay --dlq FILE`"
		return v
	case inv.Kind == event.KindTimer:
		v.Valid = true
		return v
	}
	v.Events = make([]EventValidation, inv.Size)
	members := splitMembers(body, inv)
	for _, e := range inv.Rejected {
		i := max(e.Index, 0)
		v.Events[i] = EventValidation{Index: i, ErrorType: e.Type, ErrorMessage: e.Error()}
	}
	vp := *p // judged offline: the result store is never opened
	vp.Results = func(context.Context, Credentials) (ResultStore, error) { return noResults{}, nil }
	for _, ev := range inv.Tasks {
		v.Events[ev.Index] = vp.validateTask(ctx, ev)
	}
	v.Valid = true
	for i := range v.Events {
		v.Events[i].Index = i
		if schema != nil && i < len(members) {
			v.Events[i].Schema = schemaVerdict(schema, members[i], inv.Tasks)
		}
		v.Valid = v.Valid && v.Events[i].ErrorType == ""
	}
	return v
}

func (p *Pipeline) validateTask(ctx context.Context, ev *event.Task) EventValidation {
	t, o, err := p.prepare(ctx, ev, Meta{})
	r := EventValidation{IdempotencyKey: o.IdempotencyKey, RequestID: o.RequestID}
	if t != nil {
		r.PayloadHash, r.InputVersion, r.Fingerprint = t.d.PayloadHash, t.d.InputVersion, t.fp
	}
	if err != nil {
		f := failure(o, err)
		r.ErrorType, r.ErrorMessage = f.ErrorType, f.ErrorMessage
	}
	return r
}

// splitMembers returns the events of body: the body itself, or a batch's
// elements.
func splitMembers(body []byte, inv *event.Invocation) []json.RawMessage {
	if inv.Kind == event.KindSingle {
		return []json.RawMessage{body}
	}
	var els []json.RawMessage
	_ = json.Unmarshal(body, &els) // Parse has read it as an array
	return els
}

// schemaVerdict judges the data of one event: the data the parser read
// when it accepted the event, else the data member as sent (an object, a
// string holding one, or data_base64).
func schemaVerdict(schema func([]byte) error, member json.RawMessage, tasks []*event.Task) string {
	data := dataOf(member, tasks)
	if data == nil {
		return ""
	}
	if err := schema(data); err != nil {
		return err.Error()
	}
	return "valid"
}

func dataOf(member json.RawMessage, tasks []*event.Task) []byte {
	for _, t := range tasks {
		if string(t.Raw) == string(member) {
			return t.Data
		}
	}
	var ev struct {
		Data       json.RawMessage `json:"data"`
		DataBase64 *string         `json:"data_base64"`
	}
	if json.Unmarshal(member, &ev) != nil {
		return nil
	}
	var s string
	switch {
	case len(ev.Data) > 0 && ev.Data[0] == '{':
		return ev.Data
	case len(ev.Data) > 0 && json.Unmarshal(ev.Data, &s) == nil:
		return []byte(s)
	case ev.DataBase64 != nil:
		b, _ := base64.StdEncoding.DecodeString(*ev.DataBase64)
		return b
	}
	return nil
}

// noResults is the result store of a validation: nothing is read or written.
type noResults struct{}

var errNoResults = errors.New("validate: no result store")

func (noResults) PutOnce(context.Context, string, []byte, string, ossresult.Meta) (string, error) {
	return "", errNoResults
}
func (noResults) Get(context.Context, string) ([]byte, ossresult.Meta, error) {
	return nil, ossresult.Meta{}, errNoResults
}
func (noResults) Ref(key string) string { return "validate://" + key }
