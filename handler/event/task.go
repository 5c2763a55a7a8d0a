package event

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/idemgate/idemgate/idempotency/jcs"
)

// Task is one task event: the data of docs/design.md §4 plus the envelope fields the
// durable record keeps.
type Task struct {
	TenantID  string
	TaskType  string
	Operation string
	// Input is the "input" JSON object exactly as received.
	Input json.RawMessage
	// InputVersion, RequestID and IdempotencyKey are "" when the event omits them
	// (input_version then defaults to sha256 of JCS(input), done by the caller).
	InputVersion   string
	RequestID      string
	IdempotencyKey string
	Notify         *Notify
	// Data is the whole data object, unknown fields included, for the layer-3
	// fingerprint. When EventBridge delivered data as a JSON string holding the
	// object, or as data_base64, Data is the decoded object, so the fingerprint
	// does not depend on how the event was transported.
	Data json.RawMessage

	// Envelope fields kept for the record.
	EventSource string
	EventID     string
	EventType   string
	Subject     string
	// Time is the event's time attribute as sent ("" when absent).
	Time            string
	DataContentType string
	// Extensions holds extension attributes (aliyunaccountid, aliyunpublishtime,
	// aliyuneventbusname, aliyunregionid, ...) in their canonical string form.
	Extensions map[string]string
	// Index is the event's position in a batch body; 0 for a single event.
	Index int
	// Raw is the event's own JSON bytes, for dead-lettering or storing as received.
	Raw json.RawMessage
}

// Notify is the optional notify side effect (docs/design.md §13).
type Notify struct {
	URL string `json:"url"`
}

// taskFromEnvelope extracts the task from a validated CloudEvent.
//
// Accepted forms of data, decided here once:
//   - a JSON object (the normal EventBridge delivery);
//   - a JSON string whose content is a JSON object, when datacontenttype is
//     JSON or absent: EventBridge stringifies data that was put as a string,
//     so a producer that serialised its payload itself still works;
//   - data_base64 whose decoded bytes are a JSON object, when datacontenttype is
//     JSON or absent (event streams with Base64 encoding enabled).
//
// Anything else (absent, null, an array, a number, text/plain content, binary
// that is not JSON) is invalid_request on field "data".
func taskFromEnvelope(env *envelope, o Options) (*Task, error) {
	data, fields, err := dataObject(env)
	if err != nil {
		return nil, err
	}
	t, err := taskFromData(data, fields, o)
	if err != nil {
		return nil, err
	}
	t.EventSource, t.EventID, t.EventType = env.Source, env.ID, env.Type
	t.Subject, t.Time, t.DataContentType, t.Extensions = env.Subject, env.Time, env.DataContentType, env.Extensions
	return t, nil
}

// TaskFromData builds a task from the bytes of a task data object alone
// (docs/events.md, The task data), with the rules Parse applies to the data
// of a CloudEvent: for an entry that receives the data without an envelope.
// The envelope fields of the Task are empty; every error is an *Error.
func TaskFromData(data []byte, o Options) (*Task, error) {
	dec, err := decode(data)
	if err != nil {
		return nil, err
	}
	if dec.kind != '{' {
		return nil, newError(TypeInvalidRequest, "data", "must be a JSON object")
	}
	if err := exactNumbers(data); err != nil {
		return nil, err
	}
	return taskFromData(json.RawMessage(trimJSONSpace(data)), dec.obj.members, o)
}

// taskFromData reads the fields of a data object (its text and its
// members) whose text is strict JSON and whose numbers are exact.
func taskFromData(data json.RawMessage, fields map[string]json.RawMessage, o Options) (*Task, error) {
	t := &Task{Data: data}
	for _, f := range []struct {
		name     string
		dst      *string
		required bool
	}{
		{"tenant_id", &t.TenantID, !o.KeyFallback},
		{"task_type", &t.TaskType, true},
		{"operation", &t.Operation, !o.KeyFallback},
		{"input_version", &t.InputVersion, false},
		{"request_id", &t.RequestID, false},
		{"idempotency_key", &t.IdempotencyKey, false},
	} {
		var err error
		if *f.dst, err = identifier(fields, f.name, f.required); err != nil {
			return nil, err
		}
	}
	in, ok := fields["input"]
	if !ok || isNull(in) {
		return nil, newError(TypeInvalidRequest, "input", "required field is missing")
	}
	if jsonKind(in) != '{' {
		return nil, newError(TypeInvalidRequest, "input", "must be a JSON object")
	}
	t.Input = in
	if present(fields, "notify") {
		n, err := notifyOf(fields["notify"])
		if err != nil {
			return nil, err
		}
		t.Notify = n
	}
	return t, nil
}

func notifyOf(raw json.RawMessage) (*Notify, error) {
	// Members by exact name, as docs/schema reads them: a struct's
	// case-insensitive match would post to {"URL": …} (or to the later of
	// "url" and "URL").
	var m map[string]json.RawMessage
	if jsonKind(raw) != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, newError(TypeInvalidRequest, "notify", `must be an object {"url": "https://..."}`)
	}
	if !present(m, "url") {
		return nil, newError(TypeInvalidRequest, "notify.url", "required when notify is given")
	}
	s, ok := stringValue(m["url"])
	if !ok {
		return nil, newError(TypeInvalidRequest, "notify", `must be an object {"url": "https://..."}`)
	}
	if problem := urlProblem(s); problem != "" {
		return nil, newError(TypeInvalidRequest, "notify.url", "must be an absolute http(s) URL: %s", problem)
	}
	return &Notify{URL: s}, nil
}

// urlProblem says what is wrong with a notify URL without quoting it, as
// notify.checkURL does: its query or user info may hold a token, and the
// refusal reaches the answer, the log and the dead letter.
func urlProblem(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "it does not parse"
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("the scheme is %q", u.Scheme)
	case u.Host == "":
		return "it has no host"
	}
	return ""
}

// dataObject returns the task data of a validated CloudEvent, its text and
// its members.
func dataObject(env *envelope) (json.RawMessage, map[string]json.RawMessage, error) {
	jsonCT := isJSONMediaType(env.DataContentType)
	switch {
	case present(env.attrs, "data_base64"):
		if !jsonCT {
			return nil, nil, newError(TypeInvalidRequest, "data", "task data must be JSON, but datacontenttype is %q", env.DataContentType)
		}
		s, _ := stringValue(env.attrs["data_base64"]) // checked by parseEnvelope
		b, derr := base64.StdEncoding.DecodeString(s)
		if derr != nil {
			return nil, nil, newError(TypeInvalidEnvelope, "data_base64", "not valid base64: %v", derr)
		}
		return embeddedObject(b, "data_base64")
	case present(env.attrs, "data"):
		raw := env.attrs["data"]
		switch jsonKind(raw) {
		case '{':
			if !jsonCT {
				return nil, nil, newError(TypeInvalidRequest, "data", "task data must be JSON, but datacontenttype is %q", env.DataContentType)
			}
			return raw, env.data, nil // read by the strict pass, numbers checked by parseEnvelope
		case '"':
			if !jsonCT {
				return nil, nil, newError(TypeInvalidRequest, "data", "task data must be a JSON object, but datacontenttype is %q", env.DataContentType)
			}
			s, ok := stringValue(raw)
			if !ok {
				return nil, nil, newError(TypeInvalidRequest, "data", "not a valid JSON string")
			}
			return embeddedObject([]byte(s), "data")
		default:
			return nil, nil, newError(TypeInvalidRequest, "data", "must be a JSON object")
		}
	default:
		return nil, nil, newError(TypeInvalidRequest, "data", "required: a task event carries its task in data")
	}
}

// embeddedObject accepts JSON carried inside a string or base64 only when it
// is itself strict JSON and an object (read in one pass of its own: they
// are other bytes than the body's).
func embeddedObject(b []byte, field string) (json.RawMessage, map[string]json.RawMessage, error) {
	dec, err := decode(b)
	if err != nil {
		return nil, nil, newError(TypeInvalidRequest, field, "does not hold a JSON object: %s", asError(err).Msg)
	}
	if dec.kind != '{' {
		return nil, nil, newError(TypeInvalidRequest, field, "does not hold a JSON object")
	}
	if err := exactNumbers(b); err != nil {
		return nil, nil, err
	}
	return json.RawMessage(trimJSONSpace(b)), dec.obj.members, nil
}

// identifier reads a string field that feeds the business key. Null counts as
// absent. Values are never trimmed or rewritten: " t1" and "t1" would derive
// different keys and defeat double-submit detection, so surrounding white
// space is refused instead.
func identifier(fields map[string]json.RawMessage, name string, required bool) (string, error) {
	if !present(fields, name) {
		if required {
			return "", newError(TypeInvalidRequest, name, "required field is missing")
		}
		return "", nil
	}
	s, ok := stringValue(fields[name])
	if !ok {
		return "", newError(TypeInvalidRequest, name, "must be a string")
	}
	if s == "" {
		return "", newError(TypeInvalidRequest, name, "must be non-empty when present")
	}
	if strings.TrimSpace(s) != s {
		return "", newError(TypeInvalidRequest, name, "must not start or end with white space")
	}
	return s, nil
}

// exactNumbers refuses a number in the task data that a double cannot hold
// exactly (docs/design.md §4: it would share its key with its neighbours),
// naming its path from data, the same whichever way data came.
func exactNumbers(data []byte) error {
	err := jcs.CheckNumbers(data)
	if err == nil {
		return nil
	}
	var ne *jcs.NumberError
	if errors.As(err, &ne) {
		return newError(TypeInvalidRequest, "data"+ne.Path, "%s", ne.Reason())
	}
	return nil
}
