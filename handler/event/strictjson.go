package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/idemgate/idemgate/idempotency/jcs"
)

// maxDepth bounds JSON nesting; real events are a few levels deep. jsontext
// alone would allow 10000, so the bound is checked here.
const maxDepth = 512

// checkStrictJSON accepts exactly one JSON value (RFC 8259) in valid UTF-8
// with no object that repeats a key, nested at most maxDepth deep. Repeated
// keys are refused because parsers disagree on which copy wins (encoding/json
// keeps the last, others the first), so the event this package validates
// could differ from the one another component fingerprints or replays;
// RFC 8785 (JCS) also assumes I-JSON, which forbids them. Keys are compared
// decoded ("a" and "\u0061" are the same key).
//
// jsontext's defaults are exactly these rules, with one addition this
// package takes on purpose: a \u escape of an unpaired UTF-16 surrogate
// ("\ud800") is refused here as malformed_event. encoding/json would read it
// as U+FFFD, and the key derivation (package jcs) refuses it anyway, so
// accepting it only moved the same FINAL rejection later, to an
// invalid_request per task, while a surrogate outside the task data slipped
// through as U+FFFD.
func checkStrictJSON(b []byte) error { return strictJSON(b, nil) }

// strictJSON is checkStrictJSON handing the outermost members (of an
// object) or elements (of an array, key "") to collect as it goes, so that
// the caller needs no second pass to split them. The raw values are slices
// of b.
func strictJSON(b []byte, collect func(key string, raw json.RawMessage)) error {
	switch {
	case len(bytes.TrimSpace(b)) == 0:
		return newError(TypeMalformedEvent, "", "empty body")
	case !utf8.Valid(b):
		return newError(TypeMalformedEvent, "", "body is not valid UTF-8")
	case jcs.NestedDeeper(b, maxDepth): // before jsontext, which would stop only at 10000
		return newError(TypeMalformedEvent, "", "JSON nested deeper than %d levels", maxDepth)
	}
	switch err := read(b, collect); {
	case err == errSecondValue:
		return newError(TypeMalformedEvent, "", "more than one JSON value in the body")
	case err != nil:
		return syntaxError(b, err)
	}
	return nil
}

// errSecondValue: read found another value after the first.
var errSecondValue = errors.New("more than one JSON value")

// read reads b as exactly one JSON value with jsontext's rules, relaxed by
// opts, handing the outermost members or elements to collect when set.
func read(b []byte, collect func(key string, raw json.RawMessage), opts ...jsontext.Options) error {
	d := decoders.Get().(*decoder)
	defer d.release()
	d.buf = *bytes.NewBuffer(b)
	d.dec.Reset(&d.buf, opts...)
	var err error
	if k := jsonKind(b); collect != nil && (k == '{' || k == '[') {
		err = d.split(b, collect)
	} else {
		_, err = d.dec.ReadValue()
	}
	if err != nil {
		return err
	}
	switch _, err := d.dec.ReadToken(); {
	case err == nil:
		return errSecondValue
	case err != io.EOF:
		return err
	}
	return nil
}

// decoder is a jsontext.Decoder reading a body in place, pooled because
// the strict pass runs on every delivery, duplicates included.
type decoder struct {
	buf bytes.Buffer
	dec jsontext.Decoder
}

var decoders = sync.Pool{New: func() any { return new(decoder) }}

// release drops the body before the decoder goes back to the pool.
func (d *decoder) release() {
	d.buf = bytes.Buffer{}
	d.dec.Reset(&d.buf)
	decoders.Put(d)
}

// split reads the outermost object or array of b member by member.
func (d *decoder) split(b []byte, collect func(key string, raw json.RawMessage)) error {
	open, err := d.dec.ReadToken()
	if err != nil {
		return err
	}
	closing := jsontext.Kind('}')
	if open.Kind() == '[' {
		closing = ']'
	}
	for d.dec.PeekKind() != closing { // 0 on an error, which the next read returns
		var key string
		if open.Kind() == '{' {
			name, err := d.dec.ReadToken()
			if err != nil {
				return err
			}
			key = name.String()
		}
		v, err := d.dec.ReadValue()
		if err != nil {
			return err
		}
		end := d.dec.InputOffset()
		collect(key, b[end-int64(len(v)):end])
	}
	_, err = d.dec.ReadToken()
	return err
}

// syntaxError words a jsontext error as a malformed_event; a repeated key is
// named in Field.
func syntaxError(b []byte, err error) error {
	var serr *jsontext.SyntacticError
	if !errors.As(err, &serr) {
		return newError(TypeMalformedEvent, "", "not valid JSON: %v", err)
	}
	if errors.Is(err, jsontext.ErrDuplicateName) {
		key := serr.JSONPointer.LastToken()
		return newError(TypeMalformedEvent, key, "object repeats the key %q", key)
	}
	if at := serr.ByteOffset; at >= 0 && at < int64(len(b)) {
		if r, ok := escapedUnit(b[at:]); ok && utf16.IsSurrogate(r) {
			return newError(TypeMalformedEvent, "", "not valid JSON: the escape %s at offset %d is a UTF-16 surrogate without a valid pair (it names no character)", b[at:at+6], at)
		}
	}
	return newError(TypeMalformedEvent, "", "not valid JSON: %s", strings.TrimPrefix(err.Error(), "jsontext: "))
}

// escapedUnit decodes the \uXXXX escape s begins with.
func escapedUnit(s []byte) (rune, bool) {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return 0, false
	}
	u, err := strconv.ParseUint(string(s[2:6]), 16, 16)
	return rune(u), err == nil
}

// trusted skips the repeated-key and UTF-8 checks on text already checked.
var trusted = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// members splits a JSON object into its members, as json.Unmarshal into a
// map[string]json.RawMessage would, for text checkStrictJSON accepted (so
// no key repeats); ok is false when raw is not such an object. The text is
// read without checking again what the strict pass checked (trusted).
func members(raw []byte) (m map[string]json.RawMessage, ok bool) {
	if jsonKind(raw) != '{' {
		return nil, false
	}
	m = make(map[string]json.RawMessage, 16)
	if read(raw, func(key string, v json.RawMessage) { m[key] = v }, trusted...) != nil {
		return nil, false
	}
	return m, true
}

// stringValue decodes a JSON string literal; null reads as "" (as
// json.Unmarshal into a string leaves it), and anything else is not ok.
func stringValue(raw json.RawMessage) (string, bool) {
	raw = trimJSONSpace(raw)
	switch {
	case len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' && bytes.IndexByte(raw, '\\') < 0 &&
		bytes.IndexByte(raw[1:len(raw)-1], '"') < 0 && utf8.Valid(raw) && noControl(raw):
		return string(raw[1 : len(raw)-1]), true
	case bytes.Equal(raw, []byte("null")):
		return "", true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

func noControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 {
			return false
		}
	}
	return true
}

// jsonKind returns the first byte of a JSON value ('{', '[', '"', 'n', 't',
// 'f', or a digit/'-'), or 0 for an empty value.
func jsonKind(raw []byte) byte {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 {
		return 0
	}
	return t[0]
}

func isNull(raw json.RawMessage) bool {
	return bytes.Equal(trimJSONSpace(raw), []byte("null"))
}

// trimJSONSpace trims the white space JSON allows around a value, and no
// other (bytes.TrimSpace would also take Unicode spaces).
func trimJSONSpace(raw []byte) []byte {
	return bytes.Trim(raw, " \t\r\n")
}

// present reports whether key exists with a non-null value: CloudEvents JSON
// treats a null attribute as absent (corpus case validMinimalWithNullForOptional).
func present(m map[string]json.RawMessage, key string) bool {
	raw, ok := m[key]
	return ok && !isNull(raw)
}
