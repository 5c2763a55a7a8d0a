package handler

import (
	"errors"
	"fmt"
	"math"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/idemgate/idemgate/handler/event"
	"github.com/idemgate/idemgate/idempotency"
)

// The task types read their input with json v2's rules: member names match
// exactly ("Content" is not content, as docs/schema says), and a value of
// the wrong type is named by its path.

// decodeInput reads a task's input into v; an input it cannot read is
// FINAL invalid_request naming the member.
func decodeInput(taskType string, raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return idempotency.Final("invalid_request", fmt.Errorf("%s: input%s", taskType, inputError(err)))
	}
	return nil
}

// inputError names the member of the input a decode error is about.
func inputError(err error) string {
	var se *json.SemanticError
	if errors.As(err, &se) && se.JSONPointer != "" {
		return pointerPath(string(se.JSONPointer)) + " must be " + kindName(se.GoType.Kind().String()) + ", got " + jsonKindName(se.JSONKind)
	}
	return ": " + err.Error()
}

func kindName(k string) string {
	if k == "string" {
		return "a string"
	}
	return "a " + k
}

// jsonKindName names a JSON value's kind as the messages say it.
func jsonKindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '0':
		return "a number"
	case 'n':
		return "null"
	}
	return "nothing"
}

// pointerPath writes a JSON Pointer as .name.name.
func pointerPath(p string) string {
	out := ""
	for tok := range jsontext.Pointer(p).Tokens() {
		out += "." + tok
	}
	return out
}

// wholeNumber reads an optional integer: absent or null is 0, and any
// spelling of a whole number is that number (60, 60.0 and 6e1 are one value,
// and one key: JCS writes each as 60), within int64.
func wholeNumber(v jsontext.Value) (int, error) {
	switch v.Kind() {
	case 0, 'n':
		return 0, nil
	case '0':
	default:
		return 0, fmt.Errorf("must be an integer, got %s", jsonKindName(v.Kind()))
	}
	n, ok := event.WholeNumber(string(v))
	if !ok || n < math.MinInt || n > math.MaxInt {
		return 0, fmt.Errorf("must be an integer (a whole number within int64), got %s", v)
	}
	return int(n), nil
}
