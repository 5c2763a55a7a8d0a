package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"
)

// maxDepth bounds JSON nesting; real events are a few levels deep, and
// encoding/json itself gives up at 10000 with a less helpful message.
const maxDepth = 512

// checkStrictJSON accepts exactly one JSON value in valid UTF-8 with no object
// that repeats a key. Repeated keys are refused because parsers disagree on
// which copy wins (encoding/json keeps the last, others the first), so the
// event this package validates could differ from the one another component
// fingerprints or replays; RFC 8785 (JCS) also assumes I-JSON, which forbids
// them. It walks tokens iteratively and caps nesting at maxDepth, so a hostile
// body is refused with a reason before any recursive decoder sees it.
func checkStrictJSON(b []byte) *Error {
	if len(bytes.TrimSpace(b)) == 0 {
		return newError(TypeMalformedEvent, "", "empty body")
	}
	if !utf8.Valid(b) {
		return newError(TypeMalformedEvent, "", "body is not valid UTF-8")
	}
	type frame struct {
		object  bool
		wantKey bool
		keys    map[string]struct{}
	}
	var stack []*frame
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	values := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return newError(TypeMalformedEvent, "", "not valid JSON: %v", err)
		}
		if len(stack) == 0 {
			if values > 0 {
				return newError(TypeMalformedEvent, "", "more than one JSON value in the body")
			}
			values++
		}
		top := (*frame)(nil)
		if n := len(stack); n > 0 {
			top = stack[n-1]
		}
		if top != nil && top.object && top.wantKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				valueDone()
				continue
			}
			key, _ := tok.(string) // the decoder only yields strings here
			if _, dup := top.keys[key]; dup {
				return newError(TypeMalformedEvent, key, "object repeats the key %q", key)
			}
			top.keys[key] = struct{}{}
			top.wantKey = false
			continue
		}
		if d, ok := tok.(json.Delim); ok {
			if (d == '{' || d == '[') && len(stack) >= maxDepth {
				return newError(TypeMalformedEvent, "", "JSON nested deeper than %d levels", maxDepth)
			}
			switch d {
			case '{':
				stack = append(stack, &frame{object: true, wantKey: true, keys: map[string]struct{}{}})
			case '[':
				stack = append(stack, &frame{})
			case ']', '}':
				stack = stack[:len(stack)-1]
				valueDone()
			}
			continue
		}
		valueDone()
	}
	if values == 0 || len(stack) != 0 {
		return newError(TypeMalformedEvent, "", "not valid JSON: unexpected end of input")
	}
	return nil
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
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// present reports whether key exists with a non-null value: CloudEvents JSON
// treats a null attribute as absent (corpus case validMinimalWithNullForOptional).
func present(m map[string]json.RawMessage, key string) bool {
	raw, ok := m[key]
	return ok && !isNull(raw)
}
