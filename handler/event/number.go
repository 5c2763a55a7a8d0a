package event

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// WholeNumber reads a JSON number literal that is a whole number within
// int64, whatever its spelling: 60, 60.0, 6e1 and 600e-1 are one value
// (RFC 8785 writes each as 60, so they derive one key) and read as one.
// The literal is scanned, never evaluated: its length (the body bounds it)
// and its exponent (1e999999999) cost nothing but the scan.
func WholeNumber(lit string) (int64, bool) {
	lit = strings.TrimSpace(lit)
	if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
		return n, true
	}
	neg, digits, scale, ok := scanNumber(lit)
	if !ok {
		return 0, false
	}
	digits = strings.TrimLeft(digits, "0")
	trimmed := strings.TrimRight(digits, "0")
	if trimmed == "" {
		return 0, true // any spelling of zero
	}
	scale += int64(len(digits) - len(trimmed)) // value = trimmed × 10^scale
	if scale < 0 || int64(len(trimmed))+scale > 19 {
		return 0, false // a fraction, or more digits than any int64
	}
	s := trimmed + strings.Repeat("0", int(scale))
	if neg {
		s = "-" + s
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false // beyond int64
	}
	return n, true
}

// scanNumber splits a JSON number literal into its sign, its digits
// (integer and fraction part together) and the power of ten they are
// scaled by.
func scanNumber(lit string) (neg bool, digits string, scale int64, ok bool) {
	neg = strings.HasPrefix(lit, "-")
	if neg {
		lit = lit[1:]
	}
	mant, exp, hasExp := strings.Cut(strings.ToLower(lit), "e")
	intPart, frac, dot := strings.Cut(mant, ".")
	if !allDigits(intPart) || dot && !allDigits(frac) {
		return false, "", 0, false
	}
	if hasExp {
		if scale, ok = exponent(exp); !ok {
			return false, "", 0, false
		}
	}
	return neg, intPart + frac, scale - int64(len(frac)), true
}

// exponent reads a JSON exponent ([+-]digits), clamped to ±1<<40: no
// literal a body holds has digits enough to make up for more.
func exponent(s string) (int64, bool) {
	neg := strings.HasPrefix(s, "-")
	if neg || strings.HasPrefix(s, "+") {
		s = s[1:]
	}
	if !allDigits(s) {
		return 0, false
	}
	var e int64
	for _, c := range strings.TrimLeft(s, "0") {
		if e = e*10 + int64(c-'0'); e > 1<<40 {
			break
		}
	}
	if neg {
		e = -e
	}
	return e, true
}

// allDigits: s is one or more ASCII digits.
func allDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// wholeInt is an integer member of a message FC writes (the
// failure-destination message): any spelling of a whole number.
type wholeInt int64

// UnmarshalJSON reports a value it cannot read as encoding/json reports a
// mistyped int, so that the caller's message names the member.
func (w *wholeInt) UnmarshalJSON(b []byte) error {
	s := string(trimJSONSpace(b))
	if s == "null" {
		return nil
	}
	n, ok := WholeNumber(s)
	if !ok {
		got := "number " + s
		if k := jsonKind(b); k < '0' || k > '9' && k != '-' {
			got = map[byte]string{'"': "string", 't': "bool", 'f': "bool", '{': "object", '[': "array"}[k]
		}
		return &json.UnmarshalTypeError{Value: got, Type: reflect.TypeFor[int]()}
	}
	*w = wholeInt(n)
	return nil
}
