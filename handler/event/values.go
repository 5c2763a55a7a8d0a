package event

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Readers of single JSON values the strict pass (strictjson.go) has
// already checked: no second pass over the body.

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
