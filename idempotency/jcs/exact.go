package jcs

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Numbers (docs/design.md §4). RFC 8785 writes a number as the shortest
// form of the IEEE-754 double it parses to, so 12345678901234567890 and
// 12345678901234567891 would both be written 12345678901234567000 and
// share a key: two actions merged into one. Canonicalize therefore accepts
// a number only when its exact decimal value is the exact value of its
// canonical form; then equal canonical forms mean equal values, and the
// key is injective over what it accepts, while every accepted number is
// still written as RFC 8785 says (1, 1.0 and 1e0 are all 1; 0.1 is 0.1).

// NumberError is a number Canonicalize refuses: one a double cannot hold
// exactly as written (Overflow: one beyond the largest double). It wraps
// ErrNumber.
type NumberError struct {
	// Path is where the number is, from the document's root: "" for the
	// root itself, else member names and indexes (".items[1].qty",
	// `["a b"]`), ready to follow a field name.
	Path string
	// Literal is the number as written, shortened when very long.
	Literal string
	// Canonical is what RFC 8785 would write for it ("" on overflow).
	Canonical string
	Overflow  bool
}

func (e *NumberError) Error() string { return "jcs: " + e.Describe("$") }

// Unwrap makes the error match ErrNumber.
func (e *NumberError) Unwrap() error { return ErrNumber }

// Describe says what is wrong with the number at field+Path and what the
// producer should send instead.
func (e *NumberError) Describe(field string) string { return field + e.Path + ": " + e.Reason() }

// Reason is Describe without the place.
func (e *NumberError) Reason() string {
	if e.Overflow {
		return fmt.Sprintf("%s is beyond the largest IEEE-754 double; send it as a string", e.Literal)
	}
	return fmt.Sprintf("%s is more precise than an IEEE-754 double: RFC 8785 would write it as %s, like every number that rounds there; send it as a string",
		e.Literal, e.Canonical)
}

// CheckNumbers returns a *NumberError for the first number of the JSON
// text raw (in text order) that Canonicalize would refuse, or nil: the
// number rule alone, for a reader that must refuse such a number before it
// canonicalises anything (handler/event). On text that is not JSON the
// answer means nothing.
func CheckNumbers(raw []byte) error {
	if numbersExact(raw) {
		return nil
	}
	var ne *NumberError
	if errors.As(inspect(raw), &ne) {
		return ne
	}
	return nil
}

// numberError describes the number literal lit at path, or returns nil
// when Canonicalize accepts it.
func numberError(path, lit string) *NumberError {
	if exactNumber(lit) {
		return nil
	}
	short := lit
	if len(short) > 40 {
		short = short[:37] + "..."
	}
	f, _ := strconv.ParseFloat(lit, 64)
	if math.IsInf(f, 0) {
		return &NumberError{Path: path, Literal: short, Overflow: true}
	}
	return &NumberError{Path: path, Literal: short, Canonical: string(appendES6(nil, f))}
}

// exactNumber reports whether the JSON number literal lit has the exact
// value of the RFC 8785 form of the double it parses to.
func exactNumber(lit string) bool {
	if exact, sure := quickExact(lit); sure {
		return exact
	}
	neg, digits, exp, ok := decimal(lit)
	if !ok {
		return false
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) || f == 0 {
		return false // overflow, or a value that underflows to zero
	}
	fneg, fdigits, fexp, _ := decimal(strconv.FormatFloat(f, 'e', -1, 64))
	return neg == fneg && digits == fdigits && exp == fexp
}

// quickExact settles most literals without allocating: zero, however
// written, is exact (-0 is 0 too), and so is a literal of at most 15
// significant digits within the normal range (two such decimals always
// parse to different doubles, and the shortest form is one of them).
// sure is false when the digits must be compared.
func quickExact[T string | []byte](lit T) (exact, sure bool) {
	sig, lead, point, i := 0, -1, -1, 0
	last := 0 // position (among the mantissa's digits) after the last non-zero one
	n := 0    // mantissa digits read
	for ; i < len(lit); i++ {
		c := lit[i]
		switch {
		case c == '-' && i == 0:
		case c == '.':
			point = n
		case c >= '0' && c <= '9':
			n++
			if c != '0' {
				if lead < 0 {
					lead = n - 1
				}
				last = n
			}
		default:
			goto exponent
		}
	}
exponent:
	if lead < 0 {
		return true, true
	}
	sig = last - lead
	if point < 0 {
		point = n
	}
	e := 0
	if i < len(lit) { // 'e' or 'E'
		rest := lit[i+1:]
		if len(rest) > 6 {
			return false, false
		}
		v, ok := smallInt(rest)
		if !ok {
			return false, false
		}
		e = v
	}
	mag := point - lead + e // the value is 0.d…×10^mag
	return true, sig <= 15 && mag > -300 && mag < 300
}

// decimal reads a JSON number literal as sign, significant digits (no
// leading or trailing zeros; "" for zero) and the power of ten of the last
// one: the value is ±digits×10^exp. ok is false for an exponent too large to
// be a double's, whatever the digits.
func decimal(lit string) (neg bool, digits string, exp int, ok bool) {
	if strings.HasPrefix(lit, "-") {
		neg, lit = true, lit[1:]
	}
	mant, e, hasExp := strings.Cut(strings.ToLower(lit), "e")
	if hasExp {
		if len(strings.TrimLeft(strings.TrimLeft(e, "+-"), "0")) > 9 {
			return neg, "", 0, strings.Trim(strings.ReplaceAll(mant, ".", ""), "0") == ""
		}
		n, err := strconv.Atoi(e)
		if err != nil {
			return neg, "", 0, false
		}
		exp = n
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	all := intPart + frac
	exp -= len(frac)
	trimmed := strings.TrimRight(all, "0")
	exp += len(all) - len(trimmed)
	digits = strings.TrimLeft(trimmed, "0")
	if digits == "" {
		return neg, "", 0, true
	}
	return neg, digits, exp, true
}

// appendES6 appends the RFC 8785 form of the finite double f (the
// serialisation of ECMAScript's Number.prototype.toString): jsontext's, so
// the message names what Canonicalize would really write.
func appendES6(out []byte, f float64) []byte {
	v := jsontext.Value(strconv.AppendFloat(nil, f, 'g', -1, 64))
	if v.Canonicalize() != nil {
		return strconv.AppendFloat(out, f, 'g', -1, 64)
	}
	return append(out, v...)
}

// numbersExact reports whether every number in the JSON text b passes
// exactNumber. It is the fast path's scan: b is walked outside its strings
// (a backslash in a string always escapes the next byte). On text that is
// not JSON the answer means nothing.
func numbersExact(b []byte) bool {
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			i = stringEnd(b, i)
		case c == '-' || (c >= '0' && c <= '9'):
			j := i + 1
			for j < len(b) && isNumberByte(b[j]) {
				j++
			}
			if exact, sure := quickExact(b[i:j]); !exact || !sure && !exactNumber(string(b[i:j])) {
				return false
			}
			i = j - 1
		}
	}
	return true
}

// smallInt reads an exponent of at most 6 characters: [+-]digits.
func smallInt[T string | []byte](s T) (int, bool) {
	neg, i := false, 0
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		neg, i = s[0] == '-', 1
	}
	if i == len(s) {
		return 0, false
	}
	n := 0
	for ; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// stringEnd is the index of the quote that closes the string opening at
// b[at], or len(b).
func stringEnd(b []byte, at int) int {
	for i := at + 1; i < len(b); {
		k := bytes.IndexByte(b[i:], '"')
		if k < 0 {
			return len(b)
		}
		q := i + k
		back := 0
		for j := q - 1; j > at && b[j] == '\\'; j-- {
			back++
		}
		if back%2 == 0 {
			return q
		}
		i = q + 1
	}
	return len(b)
}

func isNumberByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}
