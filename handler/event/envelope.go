package event

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"mime"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	ce "github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-json-experiment/json/jsontext"
)

// envelope is a CloudEvent reduced to what the task pipeline keeps. Next to
// a rejection it holds whatever could be read, to name the event.
type envelope struct {
	ID, Source, Type, Subject, Time string
	DataContentType                 string
	Extensions                      map[string]string
	attrs                           map[string]json.RawMessage
	data                            map[string]json.RawMessage // data's members, when it is an object
	source                          *url.URL                   // Source parsed, once requiredAttrs has read it
}

// specAttrs are the context attributes and data members CloudEvents 1.0 defines;
// every other member is an extension attribute.
var specAttrs = map[string]bool{
	"specversion": true, "id": true, "source": true, "type": true,
	"datacontenttype": true, "dataschema": true, "subject": true, "time": true,
	"data": true, "data_base64": true,
}

// parseEnvelope validates one CloudEvent in JSON format. Our own checks run
// first because the SDK is laxer than the conformance corpus: it turns "" into
// an absent subject/datacontenttype/dataschema, accepts "xyz" as a media type,
// upper-case extension names and 1.5 as an integer (truncating it). The SDK
// then parses and validates as well, so anything it refuses is refused too;
// an event sdkAccepts vouches for is spared that second reading, because the
// SDK is sure to accept it.
//
// obj is raw as the strict pass read it; the SDK reads raw itself.
func parseEnvelope(raw []byte, obj *object) (*envelope, error) {
	env, err := ownChecks(obj)
	if err != nil || sdkAccepts(env) {
		return env, err
	}
	return env, sdkCheck(raw, env.attrs)
}

// ownChecks are parseEnvelope's checks before the SDK's.
func ownChecks(obj *object) (*envelope, error) {
	attrs := obj.members
	env := &envelope{attrs: attrs, data: obj.data}
	// Best effort, so that even a rejected event can be named in the outcome.
	env.ID, _ = stringValue(attrs["id"])
	env.Source, _ = stringValue(attrs["source"])
	for _, check := range []func(*envelope) error{requiredAttrs, optionalAttrs, dataAttrs, extensionAttrs} {
		if err := check(env); err != nil {
			return env, err
		}
	}
	// The task data's numbers, after the envelope (so the same error comes
	// first whether data is an object or a string) and before the SDK, whose
	// reader refuses 1e400 with a dump of its own.
	if jsonKind(attrs["data"]) == '{' {
		if err := exactNumbers(attrs["data"]); err != nil {
			return env, err
		}
	}
	return env, nil
}

// requiredAttrs reads the required attributes, in the order the spec lists
// them.
func requiredAttrs(env *envelope) error {
	attrs := env.attrs
	specversion, err := requiredString(attrs, "specversion")
	if err != nil {
		return err
	}
	if specversion != ce.CloudEventsVersionV1 {
		return newError(TypeInvalidEnvelope, "specversion", "unsupported specversion %q: only %q is accepted", specversion, ce.CloudEventsVersionV1)
	}
	if env.ID, err = requiredString(attrs, "id"); err != nil {
		return err
	}
	if env.Source, err = requiredString(attrs, "source"); err != nil {
		return err
	}
	if env.source, err = url.Parse(env.Source); err != nil {
		return newError(TypeInvalidEnvelope, "source", "not a URI-reference: %v", err)
	}
	env.Type, err = requiredString(attrs, "type")
	return err
}

// optionalAttrs reads the optional attributes: absent or null, else a
// non-empty, well-formed string.
func optionalAttrs(env *envelope) error {
	attrs := env.attrs
	var err error
	if env.DataContentType, err = optionalString(attrs, "datacontenttype"); err != nil {
		return err
	}
	if env.DataContentType != "" {
		if msg := checkMediaType(env.DataContentType); msg != "" {
			return newError(TypeInvalidEnvelope, "datacontenttype", "%s", msg)
		}
	}
	schema, err := optionalString(attrs, "dataschema")
	if err != nil {
		return err
	}
	if schema != "" {
		if u, perr := url.Parse(schema); perr != nil || !u.IsAbs() {
			return newError(TypeInvalidEnvelope, "dataschema", "must be an absolute URI, got %q", schema)
		}
	}
	if env.Subject, err = optionalString(attrs, "subject"); err != nil {
		return err
	}
	if env.Time, err = optionalString(attrs, "time"); err != nil {
		return err
	}
	if env.Time != "" {
		if _, perr := time.Parse(time.RFC3339Nano, env.Time); perr != nil {
			return newError(TypeInvalidEnvelope, "time", "not an RFC 3339 timestamp: %q", env.Time)
		}
	}
	return nil
}

// dataAttrs: data and data_base64 are mutually exclusive (JSON format §3.1).
func dataAttrs(env *envelope) error {
	attrs := env.attrs
	if present(attrs, "data") && present(attrs, "data_base64") {
		return newError(TypeInvalidEnvelope, "data_base64", "an event must not carry both data and data_base64")
	}
	// A non-JSON content type makes data a string to the JSON format (the
	// SDK's reader refuses anything else with a dump of its own): said here
	// as the task's rule, before the SDK reads it.
	if present(attrs, "data") && jsonKind(attrs["data"]) != '"' && !isJSONMediaType(env.DataContentType) {
		return newError(TypeInvalidRequest, "data", "task data must be JSON, but datacontenttype is %q", env.DataContentType)
	}
	if present(attrs, "data_base64") {
		s, ok := stringValue(attrs["data_base64"])
		if !ok {
			return newError(TypeInvalidEnvelope, "data_base64", "must be a JSON string")
		}
		if _, derr := base64.StdEncoding.DecodeString(s); derr != nil {
			return newError(TypeInvalidEnvelope, "data_base64", "not valid base64: %v", derr)
		}
	}
	return nil
}

// extensionAttrs reads the extensions, in name order so the first error
// reported is deterministic.
func extensionAttrs(env *envelope) error {
	names := make([]string, 0, len(env.attrs))
	for k := range env.attrs {
		if !specAttrs[k] {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		if !validAttrName(name) {
			return newError(TypeInvalidEnvelope, name, "attribute names must consist of lower-case ASCII letters and digits only")
		}
		v, verr := extensionValue(env.attrs[name])
		if verr != "" {
			return newError(TypeInvalidEnvelope, name, "%s", verr)
		}
		if v == "" && isNull(env.attrs[name]) {
			continue // null means absent
		}
		if env.Extensions == nil {
			env.Extensions = map[string]string{}
		}
		env.Extensions[name] = v
	}
	return nil
}

// sdkCheck gives the SDK the last word: it parses with its own reader and
// validates, the event's own bytes as a rule. Two shapes its reader misreads
// get an equivalent copy instead (sdkCopy): a null member (the JSON format
// treats null as absent, but the SDK reads a null datacontenttype that
// follows specversion as "" and then refuses it: corpus
// validMinimalWithNullForOptional), and data_base64 (a value it holds back
// until it knows datacontenttype is cut out by position, so white space
// before it or an escape inside it, as jq . writes, made "illegal base64").
func sdkCheck(raw []byte, attrs map[string]json.RawMessage) error {
	sdkRaw := raw
	if needsCopy(attrs) {
		sdkRaw = sdkCopy(attrs)
	}
	var e ce.Event
	if uerr := e.UnmarshalJSON(sdkRaw); uerr != nil {
		return sdkError(uerr)
	}
	if verr := e.Validate(); verr != nil {
		return sdkError(verr)
	}
	return nil
}

func needsCopy(attrs map[string]json.RawMessage) bool {
	if present(attrs, "data_base64") {
		return true
	}
	for _, v := range attrs {
		if isNull(v) {
			return true
		}
	}
	return false
}

// sdkCopy writes the members of attrs compactly, in name order, without
// the null ones, and data_base64 as its decoded string with no escapes
// (base64 needs none).
func sdkCopy(attrs map[string]json.RawMessage) []byte {
	names := slices.Sorted(maps.Keys(attrs))
	out := make([]byte, 0, 512)
	out = append(out, '{')
	for _, k := range names {
		v := trimJSONSpace(attrs[k])
		if isNull(v) {
			continue
		}
		if k == "data_base64" {
			if s, ok := stringValue(v); ok {
				v, _ = jsontext.AppendQuote(nil, s)
			}
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out, _ = jsontext.AppendQuote(out, k) // k came from valid JSON
		out = append(out, ':')
		out = append(out, v...)
	}
	return append(out, '}')
}

// sdkError turns an SDK error into an envelope error, naming the attribute
// when the SDK says which one (a ValidationError is a map attribute → error).
func sdkError(err error) error {
	var ve ce.ValidationError
	if errors.As(err, &ve) && len(ve) > 0 {
		keys := make([]string, 0, len(ve))
		for k := range ve {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return newError(TypeInvalidEnvelope, keys[0], "rejected by the CloudEvents SDK: %v", ve[keys[0]])
	}
	return newError(TypeInvalidEnvelope, "", "rejected by the CloudEvents SDK: %v", err)
}

func requiredString(attrs map[string]json.RawMessage, name string) (string, error) {
	raw, ok := attrs[name]
	if !ok || isNull(raw) {
		return "", newError(TypeInvalidEnvelope, name, "required attribute is missing")
	}
	s, ok := stringValue(raw)
	if !ok {
		return "", newError(TypeInvalidEnvelope, name, "must be a JSON string")
	}
	if s == "" {
		return "", newError(TypeInvalidEnvelope, name, "must be a non-empty string")
	}
	return s, nil
}

// optionalString returns "" for an absent or null attribute; a present one
// must be a non-empty string (corpus: invalidEmptySubject and friends).
func optionalString(attrs map[string]json.RawMessage, name string) (string, error) {
	if !present(attrs, name) {
		return "", nil
	}
	s, ok := stringValue(attrs[name])
	if !ok {
		return "", newError(TypeInvalidEnvelope, name, "must be a JSON string or null")
	}
	if s == "" {
		return "", newError(TypeInvalidEnvelope, name, "must be non-empty when present")
	}
	return s, nil
}

// checkMediaType enforces RFC 2046 "type/subtype[; params]" and returns a
// reason, or "" when the value is fine. mime.ParseMediaType alone accepts "xyz".
func checkMediaType(v string) string {
	if goodMediaTypes[v] {
		return ""
	}
	return parseMediaType(v)
}

// parseMediaType is checkMediaType's parse.
func parseMediaType(v string) string {
	mt, _, err := mime.ParseMediaType(v)
	if err != nil {
		return "not an RFC 2046 media type: " + err.Error()
	}
	typ, sub, ok := strings.Cut(mt, "/")
	if !ok || typ == "" || sub == "" || strings.Contains(sub, "/") {
		return "not an RFC 2046 media type (want type/subtype): " + strconv.Quote(v)
	}
	return ""
}

// goodMediaTypes are datacontenttype values EventBridge sends, which
// checkMediaType would accept: every event carries one, and parsing it
// costs a map (TestGoodMediaTypes holds the list to the parse).
var goodMediaTypes = map[string]bool{"application/json": true, "application/json; charset=utf-8": true,
	"application/json;charset=utf-8": true}

func validAttrName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// extensionValue checks an extension's JSON value against the CloudEvents type
// system and returns its canonical string form, or a reason it is refused.
// JSON carries Boolean as true/false, Integer as a number in the signed 32-bit
// range, and String/URI/URI-reference/Timestamp/Binary as strings. Objects,
// arrays and non-integral numbers have no CloudEvents type.
func extensionValue(raw json.RawMessage) (string, string) {
	switch jsonKind(raw) {
	case 'n':
		return "", ""
	case 't', 'f':
		var b bool
		if json.Unmarshal(raw, &b) != nil {
			return "", "not a valid boolean"
		}
		return strconv.FormatBool(b), ""
	case '"':
		s, ok := stringValue(raw)
		if !ok {
			return "", "not a valid string"
		}
		return s, ""
	case '{', '[':
		return "", "extension values must be a string, boolean or integer, not an object or array"
	default: // any spelling of the integer: 10, 10.0 and 1e1 are one JSON number
		n, ok := WholeNumber(string(raw))
		if !ok || n < math.MinInt32 || n > math.MaxInt32 {
			return "", "extension numbers must be integers in the signed 32-bit range, got " + clip(strings.TrimSpace(string(raw)), 40)
		}
		return strconv.FormatInt(n, 10), ""
	}
}

// isJSONMediaType mirrors the SDK's notion of JSON data (absent, application/json,
// text/json, application/cloudevents[-batch]+json; parameters ignored), because
// the SDK decides whether a data member may be a JSON value or must be a string.
func isJSONMediaType(dct string) bool {
	mt, _, _ := strings.Cut(dct, ";")
	switch strings.TrimSpace(mt) {
	case "", ce.ApplicationJSON, ce.TextJSON, ce.ApplicationCloudEventsJSON, ce.ApplicationCloudEventsBatchJSON:
		return true
	}
	return false
}

// clip is s cut to at most n bytes, marked when cut: a refused literal of
// any length would otherwise be echoed whole into the answer and the log.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "… (" + strconv.Itoa(len(s)) + " bytes)"
}
