package keys

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/idemgate/idemgate/idempotency/jcs"
)

// Key helpers for functions whose events carry no task fields: each returns
// K, 64 lowercase hex, as the hash of an RFC 8785 document that names what
// went into it.

// ErrNoSuchPath: a selected path is absent from the event (or null).
var ErrNoSuchPath = errors.New("keys: no such path")

// FromPaths derives K from the values at paths in a JSON document: the
// selection {"<path>": <value>, …} in canonical form (Powertools'
// event_key_jmespath, for the dotted paths most events need: "data.order_id",
// "data.items.0.sku"). A missing or null value is ErrNoSuchPath: a key that
// silently ignored a missing field would merge unrelated events.
func FromPaths(doc []byte, paths ...string) (string, error) {
	if len(paths) == 0 {
		return "", errors.New("keys: FromPaths needs at least one path")
	}
	// Strict first: encoding/json reads every lone surrogate escape and
	// invalid UTF-8 byte as U+FFFD and keeps the last of two members of one
	// name, so distinct documents would share K.
	if _, err := jsontext.NewDecoder(bytes.NewReader(doc)).ReadValue(); err != nil {
		return "", fmt.Errorf("keys: %w", err)
	}
	// Numbers stay as written (json.Number): a float64 would merge
	// 12345678901234567890 with …891 before JCS could refuse either.
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return "", fmt.Errorf("keys: %w", err)
	}
	if dec.More() {
		return "", errors.New("keys: more than one JSON value")
	}
	sel := make(map[string]any, len(paths))
	for _, p := range paths {
		v, err := lookup(root, p)
		if err != nil {
			return "", err
		}
		sel[p] = v
	}
	return hashValue(sel)
}

// lookup follows a dotted path through objects (by member name) and arrays
// (by index).
func lookup(v any, path string) (any, error) {
	for _, seg := range strings.Split(path, ".") {
		switch c := v.(type) {
		case map[string]any:
			v = c[seg]
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(c) {
				return nil, fmt.Errorf("%w: %s", ErrNoSuchPath, path)
			}
			v = c[i]
		default:
			return nil, fmt.Errorf("%w: %s", ErrNoSuchPath, path)
		}
	}
	if v == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoSuchPath, path)
	}
	return v, nil
}

// Window derives K for action in the time window of length size that t
// falls in (windows start at the Unix epoch): one effective result per
// action per window, such as a daily digest. A size of 0 or less is one
// second.
func Window(action string, t time.Time, size time.Duration) string {
	if size <= 0 {
		size = time.Second
	}
	return hashStrings("action", action, "window", windowIndex(t, size).String(),
		"window_seconds", exactSeconds(size))
}

// exactSeconds writes d (positive) in seconds as an exact decimal. A
// float64's shortest form, which it replaces, is the same text for every
// size of at most 15 significant digits (every whole-second window), but
// merged sizes a nanosecond apart past 2^53 ns.
func exactSeconds(d time.Duration) string {
	whole, frac := strconv.FormatInt(int64(d/time.Second), 10), int64(d%time.Second)
	if frac == 0 {
		return whole
	}
	return whole + "." + strings.TrimRight(fmt.Sprintf("%09d", frac), "0")
}

// windowIndex is floor(nanoseconds since the epoch / size), counted in a
// big.Int: UnixNano overflows outside 1678–2262, and Go's division rounds
// toward zero, which put the windows either side of the epoch in one.
func windowIndex(t time.Time, size time.Duration) *big.Int {
	ns := new(big.Int).Mul(big.NewInt(t.Unix()), big.NewInt(int64(time.Second)))
	ns.Add(ns, big.NewInt(int64(t.Nanosecond())))
	return ns.Div(ns, big.NewInt(int64(size))) // Euclidean: floor for size > 0
}

// LLMRequest derives K for a model call: the model and its messages (any
// JSON value, canonicalised), so the same prompt to the same model is one
// call however its members are ordered.
func LLMRequest(model string, messages any) (string, error) {
	// encoding/json writes each invalid UTF-8 byte as the escape \ufffd (and
	// a real U+FFFD as itself): refused, or "hi\xff" and "hi\xfe" would be
	// one call.
	if !utf8.ValidString(model) {
		return "", errors.New("keys: model is not valid UTF-8")
	}
	b, err := json.Marshal(messages)
	if err != nil {
		return "", fmt.Errorf("keys: messages: %w", err)
	}
	if replacementEscape(b) {
		return "", errors.New("keys: messages hold a string that is not valid UTF-8 (or spell U+FFFD as an escape)")
	}
	return hashValue(map[string]any{"model": model, "messages": json.RawMessage(b)})
}

// FromFingerprint derives K from an event fingerprint (see Fingerprint): the
// fallback for events that lack business fields, when the deployment allows
// it (the template's KEY_FALLBACK=fingerprint). Two events are then the same
// action only when their data is the same.
func FromFingerprint(fingerprint string) string {
	return hashStrings("fingerprint", fingerprint)
}

// replacementEscape reports whether the JSON text b holds the escape
// \ufffd (one that a backslash starts, not an escaped backslash followed
// by "ufffd").
func replacementEscape(b []byte) bool {
	for i := 0; ; {
		k := bytes.Index(b[i:], []byte(`\ufffd`))
		if k < 0 {
			return false
		}
		at, back := i+k, 0
		for j := at - 1; j >= 0 && b[j] == '\\'; j-- {
			back++
		}
		if back%2 == 0 {
			return true
		}
		i = at + 1
	}
}

func hashValue(v any) (string, error) {
	canon, err := jcs.Marshal(v)
	var ne *jcs.NumberError
	if errors.As(err, &ne) {
		return "", &numberError{"keys: " + ne.Describe("$"), []error{ne}}
	}
	if err != nil {
		return "", fmt.Errorf("keys: %w", err)
	}
	return sum(canon), nil
}

// HTTPRequest derives K for an HTTP request carrying an Idempotency-Key: the
// client's key scoped by the principal it acts for, the method and the
// route (idempotency/idemhttp), so that two callers' keys, or one key on two
// routes, never meet. Values must be valid UTF-8.
func HTTPRequest(principal, method, route, idempotencyKey string) (string, error) {
	for _, v := range []string{principal, method, route, idempotencyKey} {
		if !utf8.ValidString(v) {
			return "", fmt.Errorf("keys: %q is not valid UTF-8", v)
		}
	}
	return hashStrings("principal", principal, "method", method, "route", route, "idempotency_key", idempotencyKey), nil
}

// Explicit is K of a task that names its idempotency_key: the key
// namespaced by its tenant (docs/design.md §4), exactly as Derive computes
// it, so an HTTP submission (whose Idempotency-Key is the task's
// idempotency_key) and an event naming the same key are one task. Both must
// be non-empty, valid UTF-8.
func Explicit(tenantID, idempotencyKey string) (string, error) {
	switch {
	case tenantID == "" || idempotencyKey == "":
		return "", fmt.Errorf("%w: tenant_id and idempotency_key", ErrMissingField)
	case !utf8.ValidString(tenantID) || !utf8.ValidString(idempotencyKey):
		return "", fmt.Errorf("%w: not valid UTF-8", ErrInvalidField)
	}
	return explicitKey(tenantID, idempotencyKey), nil
}

func explicitKey(tenantID, idempotencyKey string) string {
	return hashStrings("tenant_id", tenantID, "idempotency_key", idempotencyKey)
}
