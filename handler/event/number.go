package event

import (
	"encoding/json"
	"math/big"
	"reflect"
	"strconv"
	"strings"
)

// WholeNumber reads a JSON number literal that is a whole number within
// int64, whatever its spelling: 60, 60.0, 6e1 and 600e-1 are one value
// (RFC 8785 writes each as 60, so they derive one key) and read as one.
func WholeNumber(lit string) (int64, bool) {
	lit = strings.TrimSpace(lit)
	if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
		return n, true
	}
	if len(lit) > 64 || lit == "" || (lit[0] != '-' && (lit[0] < '0' || lit[0] > '9')) {
		return 0, false // no JSON number, or one no int64 spells
	}
	if mant, e, ok := strings.Cut(strings.ToLower(lit), "e"); ok {
		if n, err := strconv.Atoi(e); err != nil || n < -90 || n > 90 {
			// 64 characters hold no int64 at such a power but 0, and
			// big.Rat would compute the power first (10^999999 takes
			// 70 ms and 400 KB; a body can hold thousands of them).
			return 0, strings.Trim(mant, "-0.") == ""
		}
	}
	r, ok := new(big.Rat).SetString(lit)
	if !ok || !r.IsInt() || !r.Num().IsInt64() {
		return 0, false
	}
	return r.Num().Int64(), true
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
