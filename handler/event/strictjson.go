package event

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// maxDepth bounds JSON nesting; real events are a few levels deep, and
// encoding/json itself gives up at 10000 with a less helpful message.
const maxDepth = 512

// checkStrictJSON accepts exactly one JSON value (RFC 8259) in valid UTF-8
// with no object that repeats a key. Repeated keys are refused because
// parsers disagree on which copy wins (encoding/json keeps the last, others
// the first), so the event this package validates could differ from the one
// another component fingerprints or replays; RFC 8785 (JCS) also assumes
// I-JSON, which forbids them. Keys are compared decoded, as encoding/json
// decodes them ("a" and "\u0061" are the same key).
//
// It is a single hand-written pass that allocates nothing for ordinary
// events: it runs on every delivery, duplicates included, and the token
// decoder it replaced was a quarter of a duplicate answer's CPU.
func checkStrictJSON(b []byte) *Error { return strictJSON(b, nil) }

// strictJSON is checkStrictJSON handing the outermost members (of an
// object) or elements (of an array) to collect as it goes, so that the
// caller needs no second pass to split them.
func strictJSON(b []byte, collect func(key []byte, raw json.RawMessage)) *Error {
	if len(bytes.TrimSpace(b)) == 0 {
		return newError(TypeMalformedEvent, "", "empty body")
	}
	if !utf8.Valid(b) {
		return newError(TypeMalformedEvent, "", "body is not valid UTF-8")
	}
	s := scanner{b: b, collect: collect}
	s.space()
	if err := s.value(0); err != nil {
		return err
	}
	s.space()
	if s.i < len(b) {
		if startsValue(b[s.i]) {
			return newError(TypeMalformedEvent, "", "more than one JSON value in the body")
		}
		return s.fail("after the top-level value")
	}
	return nil
}

// scanner walks JSON text. With collect set, the members of the outermost
// object (or the elements of the outermost array) are handed to it as raw
// values, so that callers split an already checked text without decoding it
// into Go values first.
type scanner struct {
	b       []byte
	i       int
	collect func(key []byte, raw json.RawMessage)
}

func startsValue(c byte) bool {
	return c == '{' || c == '[' || c == '"' || c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n'
}

func (s *scanner) fail(where string) *Error {
	if s.i >= len(s.b) {
		return newError(TypeMalformedEvent, "", "not valid JSON: unexpected end of input")
	}
	return newError(TypeMalformedEvent, "", "not valid JSON: invalid character %q at offset %d %s", s.b[s.i], s.i, where)
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value checks one value at s.i; depth counts the containers around it.
func (s *scanner) value(depth int) *Error {
	if s.i >= len(s.b) {
		return s.fail("")
	}
	switch c := s.b[s.i]; {
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return newError(TypeMalformedEvent, "", "JSON nested deeper than %d levels", maxDepth)
		}
		if c == '{' {
			return s.object(depth + 1)
		}
		return s.array(depth + 1)
	case c == '"':
		_, err := s.str()
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	default:
		return s.fail("looking for the beginning of a value")
	}
}

func (s *scanner) literal(word string) *Error {
	if !bytes.HasPrefix(s.b[s.i:], []byte(word)) {
		return s.fail("in a literal (true, false or null)")
	}
	s.i += len(word)
	return nil
}

// number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() *Error {
	if s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.digits() == 0:
		return s.fail("in a number")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return s.fail("after the decimal point of a number")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return s.fail("in the exponent of a number")
		}
	}
	return nil
}

func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

// str checks a string at s.i (the opening quote) and reports whether it
// holds an escape. The text is already known to be valid UTF-8.
func (s *scanner) str() (escaped bool, err *Error) {
	s.i++
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return escaped, nil
		case c == '\\':
			escaped = true
			s.i++
			if s.i >= len(s.b) {
				return escaped, s.fail("")
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				s.i++
				for k := 0; k < 4; k++ {
					if s.i >= len(s.b) || !isHex(s.b[s.i]) {
						return escaped, s.fail(`in a \u escape`)
					}
					s.i++
				}
			default:
				return escaped, s.fail("in a string escape")
			}
		case c < 0x20:
			return escaped, s.fail("in a string (control characters must be escaped)")
		default:
			s.i++
		}
	}
	return escaped, s.fail("")
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func (s *scanner) array(depth int) *Error {
	s.i++ // '['
	s.space()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return nil
	}
	for {
		s.space()
		if err := s.member(depth, nil); err != nil {
			return err
		}
		if more, err := s.more(']', "after an array element"); !more {
			return err
		}
	}
}

// member checks one value and hands it to collect at the outermost level.
func (s *scanner) member(depth int, key []byte) *Error {
	start := s.i
	if err := s.value(depth); err != nil {
		return err
	}
	if depth == 1 && s.collect != nil {
		s.collect(key, s.b[start:s.i])
	}
	return nil
}

// more reads the ',' or the closing bracket after a member and reports
// whether another member follows.
func (s *scanner) more(closing byte, where string) (bool, *Error) {
	s.space()
	switch {
	case s.i >= len(s.b):
		return false, s.fail("")
	case s.b[s.i] == ',':
		s.i++
		return true, nil
	case s.b[s.i] == closing:
		s.i++
		return false, nil
	}
	return false, s.fail(where)
}

// smallObject is how many keys an object holds before duplicate detection
// switches from comparing against each earlier key to a set.
const smallObject = 16

func (s *scanner) object(depth int) *Error {
	s.i++ // '{'
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil
	}
	var (
		small [smallObject][]byte
		n     int
		set   map[string]struct{}
	)
	for {
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.fail("looking for an object key")
		}
		start := s.i
		escaped, err := s.str()
		if err != nil {
			return err
		}
		key := s.b[start+1 : s.i-1]
		if escaped {
			key = decodeKey(s.b[start:s.i])
		}
		switch {
		case set != nil:
			if _, dup := set[string(key)]; dup {
				return newError(TypeMalformedEvent, string(key), "object repeats the key %q", key)
			}
			set[string(key)] = struct{}{}
		default:
			for _, k := range small[:n] {
				if bytes.Equal(k, key) {
					return newError(TypeMalformedEvent, string(key), "object repeats the key %q", key)
				}
			}
			if n < smallObject {
				small[n], n = key, n+1
				break
			}
			set = make(map[string]struct{}, 2*smallObject)
			for _, k := range small {
				set[string(k)] = struct{}{}
			}
			set[string(key)] = struct{}{}
		}
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.fail("after an object key")
		}
		s.i++
		s.space()
		if err := s.member(depth, key); err != nil {
			return err
		}
		if more, err := s.more('}', "after an object member"); !more {
			return err
		}
	}
}

// decodeKey decodes a key holding escapes exactly as encoding/json does
// (including its replacement of unpaired surrogates), so that duplicates are
// judged on the names Go code will see.
func decodeKey(quoted []byte) []byte {
	var k string
	_ = json.Unmarshal(quoted, &k) // the scanner has checked the literal
	return []byte(k)
}

// members splits a JSON object into its members, as json.Unmarshal into a
// map[string]json.RawMessage would, for text checkStrictJSON accepted (so
// no key repeats); ok is false when raw is not such an object.
func members(raw []byte) (m map[string]json.RawMessage, ok bool) {
	if jsonKind(raw) != '{' {
		return nil, false
	}
	m = make(map[string]json.RawMessage, 16)
	s := scanner{b: raw, collect: func(key []byte, v json.RawMessage) { m[string(key)] = v }}
	s.space()
	if s.value(0) != nil {
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
