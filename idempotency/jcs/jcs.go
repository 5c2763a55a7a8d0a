// Package jcs implements the JSON Canonicalization Scheme (JCS) of RFC 8785.
//
// Canonical bytes are what idempotency keys and fingerprints are hashed over
// (docs/design.md §4), so two JSON texts that mean the same value must produce
// identical bytes, and anything whose meaning is ambiguous (duplicate member
// names, lone surrogates, invalid UTF-8, numbers outside IEEE-754 doubles) is
// rejected rather than silently normalised into a colliding key.
//
// The canonical form is jsontext's (Value.Canonicalize), which already
// refuses duplicate names, invalid UTF-8 and lone surrogates. This package
// adds the two rules jsontext does not have: a number that overflows a
// double is an error (jsontext clamps it to the largest double, so 1e400
// and 1.7976931348623157e308 would share a key), and nesting is bounded by
// MaxDepth (jsontext allows 10000). A third rule is the project's own: a
// number whose exact value its canonical form does not keep (a double
// cannot hold 12345678901234567890) is an error, so that two different
// inputs never share a key (exact.go, docs/design.md §4). It also sorts every failure into one of
// the sentinels below.
package jcs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// MaxDepth is the deepest nesting of arrays and objects Canonicalize accepts;
// real task inputs are nowhere near this deep, and the pipeline answers a
// deeper input with its own error code (input_too_deep).
const MaxDepth = 64

// Sentinel errors; every error returned by Canonicalize wraps exactly one of
// them so callers can classify failures with errors.Is.
var (
	// ErrInvalidJSON reports a syntax error, including trailing data after
	// the top-level value and empty input.
	ErrInvalidJSON = errors.New("jcs: invalid JSON")
	// ErrInvalidString reports a string (value or member name) holding
	// invalid UTF-8 or an unpaired UTF-16 surrogate escape.
	ErrInvalidString = errors.New("jcs: invalid string")
	// ErrNumber reports a number that is not a finite IEEE-754 double, or
	// whose exact value is not that of its canonical form (exact.go); the
	// error is then a *NumberError, which says where.
	ErrNumber = errors.New("jcs: number out of range")
	// ErrDuplicateKey reports an object with two members of the same name.
	ErrDuplicateKey = errors.New("jcs: duplicate object member name")
	// ErrTooDeep reports nesting deeper than MaxDepth.
	ErrTooDeep = errors.New("jcs: nesting too deep")
)

// clampedMax is how jsontext writes the largest double, and also what it
// writes for a number that overflows; only then must the input be read again.
var clampedMax = []byte("1.7976931348623157e+308")

// Canonicalize parses raw as a single JSON value (surrounding whitespace
// allowed) and returns its RFC 8785 canonical form.
//
// jsontext does the work in one pass, and a scan of the input's numbers
// (numbersExact) checks that each has the value its canonical form names;
// the input is walked a second time (inspect) only when one of them fails,
// when the output holds the largest double (which may be a clamped
// overflow), or when the output nests deeper than MaxDepth.
func Canonicalize(raw []byte) ([]byte, error) {
	out := jsontext.Value(append(make([]byte, 0, len(raw)), raw...))
	if err := out.Canonicalize(); err != nil || bytes.Contains(out, clampedMax) || NestedDeeper(out, MaxDepth) || !numbersExact(raw) {
		if ierr := inspect(raw); ierr != nil {
			return nil, ierr
		}
		if err != nil { // inspect found nothing wrong, jsontext did: keep its word
			return nil, fmt.Errorf("%w: %w", ErrInvalidJSON, err)
		}
	}
	return out, nil
}

// NestedDeeper reports whether the JSON text b nests more than limit arrays
// and objects. Counting brackets settles most texts at once; otherwise b is
// walked outside its strings (in JSON a backslash in a string always escapes
// the next byte). On text that is not JSON the answer means nothing.
func NestedDeeper(b []byte, limit int) bool {
	if bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) <= limit {
		return false
	}
	depth, inString := 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			if depth++; depth > limit {
				return true
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return false
}

// Marshal encodes v with encoding/json and canonicalizes the result.
// HTML escaping is turned off only to keep the intermediate text readable;
// Canonicalize would undo it anyway.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("jcs: marshal: %w", err)
	}
	return Canonicalize(buf.Bytes())
}

// AppendStringObject appends the canonical form of a flat object whose
// members are all strings, given as name, value pairs: the bytes Marshal
// would produce for the same map[string]string, without its encoding/json
// round trip (keys derive three such documents for every delivery). Names
// and values must be valid UTF-8 (invalid bytes would come out as U+FFFD),
// and names distinct; an odd trailing name is ignored.
func AppendStringObject(out []byte, kv ...string) []byte {
	n := len(kv) / 2
	var small [8]int
	order := small[:0]
	if n > len(small) {
		order = make([]int, 0, n)
	}
	for i := 0; i < n; i++ {
		order = append(order, 2*i)
	}
	slices.SortFunc(order, func(a, b int) int { return compareUTF16(kv[a], kv[b]) })
	out = append(out, '{')
	for i, at := range order {
		if i > 0 {
			out = append(out, ',')
		}
		// jsontext quotes as RFC 8785 §3.2.2.2 demands; its only error is
		// invalid UTF-8, which the contract above excludes.
		out, _ = jsontext.AppendQuote(out, kv[at])
		out = append(out, ':')
		out, _ = jsontext.AppendQuote(out, kv[at+1])
	}
	return append(out, '}')
}

// compareUTF16 orders valid UTF-8 strings by their UTF-16 code units, as
// RFC 8785 §3.2.3 requires. UTF-8 byte order equals code point order, which
// differs from UTF-16 order only in that U+E000..U+FFFF sort after the
// supplementary planes (whose surrogates are D800..DFFF); weight lifts that
// range above them instead of transcoding every name.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			if weight(ra) < weight(rb) {
				return -1
			}
			return 1
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

func weight(r rune) rune {
	if r >= 0xE000 && r <= 0xFFFF {
		return r + 0x200000
	}
	return r
}
