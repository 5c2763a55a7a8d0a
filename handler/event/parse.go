// Package event turns a Function Compute invocation body into typed work: task
// events (one CloudEvent or an event-streaming batch), the sweep timer, and
// async-invocation failure-destination messages (for replay).
//
// Parse decides the kind from the shape of the body, in this order:
//
//  1. The body must be exactly one JSON value, valid UTF-8, with no repeated
//     object key (see checkStrictJSON); otherwise malformed_event.
//  2. A JSON array is an event-streaming batch (KindBatch); every member is
//     judged as a CloudEvent. One of more than MaxBatch members is refused
//     whole (batch_too_large) as soon as member MaxBatch+1 begins.
//  3. A JSON object with a "specversion" member is a CloudEvent (KindSingle).
//  4. A JSON object with "requestContext" is an FC failure-destination message
//     (KindFailureDestination); one with "triggerTime" or "triggerName" is an
//     FC timer event (KindTimer). These camelCase names can never be
//     attributes of a valid CloudEvent (attribute names are lower-case), so
//     rule 3 never hides them; an object carrying markers of both is refused
//     as ambiguous (unsupported_event).
//  5. Any other object that has a CloudEvents member (id, source, type, data,
//     data_base64, ...) is judged as a CloudEvent, so a missing specversion is
//     an invalid_envelope naming it; an object with none of them, and any
//     scalar body, is unsupported_event / malformed_event.
//
// An EventBridge dead-letter event is not a kind of its own: EventBridge
// writes the undelivered event itself to the dead-letter queue, so it parses
// as KindSingle (or KindBatch) exactly like the first delivery, and replaying
// it derives the same business key.
//
// Every rejection is an *Error with a precise Type; all of them are FINAL
// (docs/design.md §10). Nothing is dropped silently: a batch keeps an error per
// rejected member next to the members that passed.
package event

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Kind says what an invocation body is.
type Kind string

const (
	// KindSingle is one CloudEvents 1.0 JSON object as EventBridge delivers it.
	KindSingle Kind = "single"
	// KindBatch is a JSON array of CloudEvents (event-streaming mode).
	KindBatch Kind = "batch"
	// KindTimer is an FC timer-trigger event.
	KindTimer Kind = "timer"
	// KindFailureDestination is an FC async-invocation failure-destination message.
	KindFailureDestination Kind = "failure_destination"
)

// Invocation is a parsed body.
type Invocation struct {
	Kind Kind
	// Size is the number of events in the body: 1 for KindSingle, the array
	// length for KindBatch, 0 for the other kinds.
	Size int
	// Tasks are the accepted task events in body order (Task.Index is the
	// position). For a batch, process each exactly once even when BatchErr is set.
	Tasks []*Task
	// Rejected holds one error per rejected event, in body order. For a batch,
	// Error.Index is the member's position; len(Tasks)+len(Rejected) == Size.
	Rejected []*Error
	// BatchErr is set when any batch member was rejected: the batch as a whole
	// is invalid and must be answered as a failure so it reaches the
	// dead-letter queue whole (docs/design.md §4). Parse also returns it.
	BatchErr *Error
	// Timer is set for KindTimer.
	Timer *Timer
	// Failure is set for KindFailureDestination.
	Failure *FailureDestination
}

// Parse parses an FC invocation body.
//
// A nil Invocation comes only with a malformed_event, unsupported_event or
// batch_too_large error: the body is refused whole. Otherwise Kind is set even when
// err is not nil, so the caller can label the failure; for KindBatch the
// accepted members are in Tasks and err is BatchErr. Every non-nil error is
// an *Error.
func Parse(body []byte) (*Invocation, error) { return ParseWith(body, Options{}) }

// Options loosen what Parse requires of a task event.
type Options struct {
	// KeyFallback: tenant_id and operation may be absent (the caller then
	// keys the task by its data's fingerprint, or by its idempotency_key
	// when only operation is absent; the template's KEY_FALLBACK=fingerprint). task_type and input stay required: they say
	// what to run.
	KeyFallback bool
}

// ParseWith is Parse with options.
func ParseWith(body []byte, o Options) (*Invocation, error) {
	// The one strict pass also splits the body: an object into its members,
	// an array (a batch) into its events, and each event's data object into
	// its members.
	dec, err := decodeBody(body)
	if err != nil {
		return nil, err
	}
	switch dec.kind {
	case '[':
		return parseBatch(dec.els, o)
	case '{':
	default:
		return nil, newError(TypeMalformedEvent, "", "the body must be a JSON object or array")
	}
	obj := dec.obj.members
	_, isCE := obj["specversion"]
	_, isDest := obj["requestContext"]
	_, hasTime := obj["triggerTime"]
	_, hasName := obj["triggerName"]
	isTimer := hasTime || hasName
	switch {
	case isCE:
		return parseSingle(body, dec.obj, o)
	case isDest && isTimer:
		return nil, newError(TypeUnsupportedEvent, "", "ambiguous body: has both failure-destination (requestContext) and timer (triggerTime/triggerName) members")
	case isDest:
		d, err := parseDestination(body)
		if err != nil {
			return &Invocation{Kind: KindFailureDestination}, err
		}
		return &Invocation{Kind: KindFailureDestination, Failure: d}, nil
	case isTimer:
		t, err := parseTimer(obj)
		if err != nil {
			return &Invocation{Kind: KindTimer}, err
		}
		return &Invocation{Kind: KindTimer, Timer: t}, nil
	case looksLikeCloudEvent(obj):
		return parseSingle(body, dec.obj, o)
	default:
		return nil, newError(TypeUnsupportedEvent, "", "unrecognised event: not a CloudEvent, timer or failure-destination message")
	}
}

// looksLikeCloudEvent: any CloudEvents member makes the object an (attempted)
// CloudEvent, so that e.g. a missing specversion is reported as such.
func looksLikeCloudEvent(obj map[string]json.RawMessage) bool {
	for k := range specAttrs {
		if _, ok := obj[k]; ok {
			return true
		}
	}
	return false
}

func parseSingle(body []byte, obj *object, o Options) (*Invocation, error) {
	inv := &Invocation{Kind: KindSingle, Size: 1}
	t, err := parseMember(body, -1, obj, o)
	if err != nil {
		inv.Rejected = []*Error{asError(err)}
		return inv, err
	}
	inv.Tasks = []*Task{t}
	return inv, nil
}

func parseBatch(els []element, o Options) (*Invocation, error) {
	inv := &Invocation{Kind: KindBatch, Size: len(els)}
	for i, m := range els {
		t, err := parseMember(m.raw, i, m.obj, o)
		if err != nil {
			inv.Rejected = append(inv.Rejected, asError(err))
			continue
		}
		inv.Tasks = append(inv.Tasks, t)
	}
	if len(inv.Rejected) == 0 {
		return inv, nil
	}
	inv.BatchErr = batchError(inv)
	return inv, inv.BatchErr
}

// parseMember validates one CloudEvent, the object obj whose text is raw,
// and extracts its task. index is the batch position, -1 for a single
// event; obj is nil when the member is not an object.
func parseMember(raw []byte, index int, obj *object, o Options) (*Task, error) {
	var (
		env *envelope
		err error
	)
	if obj == nil {
		err = newError(TypeInvalidEnvelope, "", "a batch member must be a CloudEvent JSON object")
	} else if env, err = parseEnvelope(raw, obj); err == nil {
		var t *Task
		if t, err = taskFromEnvelope(env, o); err == nil {
			t.Index = max(index, 0)
			t.Raw = json.RawMessage(raw)
			return t, nil
		}
	}
	e := asError(err)
	e.Index = index
	if env != nil {
		e.EventSource, e.EventID = env.Source, env.ID
	}
	return nil, e
}

func batchError(inv *Invocation) *Error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d events rejected", len(inv.Rejected), inv.Size)
	for i, r := range inv.Rejected {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(inv.Rejected)-i)
			break
		}
		fmt.Fprintf(&b, "; [%d] %s", r.Index, r.Type)
		if r.Field != "" {
			fmt.Fprintf(&b, " %s", r.Field)
		}
		fmt.Fprintf(&b, ": %s", r.Msg)
	}
	return &Error{Type: TypeInvalidBatch, Msg: b.String(), Index: -1}
}
