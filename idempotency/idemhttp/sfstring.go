package idemhttp

import (
	"errors"
	"fmt"
	"strings"
)

// MaxKeyLength bounds the Idempotency-Key value (its characters after
// unquoting), as Stripe's API does: a key is an identifier, not a payload.
const MaxKeyLength = 255

// Errors ParseKey returns; every one is a 400 naming the header.
var (
	ErrKeyMalformed = errors.New("the Idempotency-Key header is not an RFC 8941 sf-string")
	ErrKeyEmpty     = errors.New("the Idempotency-Key header is an empty string")
	ErrKeyTooLong   = fmt.Errorf("the Idempotency-Key header is longer than %d characters", MaxKeyLength)
	ErrKeyRepeated  = errors.New("the Idempotency-Key header is sent more than once")
)

// ParseKey reads the Idempotency-Key field (all its lines, as
// http.Header.Values gives them). present is false when the field is absent.
// The value is an RFC 8941 Item whose bare item is an sf-string
// (draft-ietf-httpapi-idempotency-key-header); parameters are parsed and
// ignored, as RFC 8941 asks of a recipient that does not know them.
// Anything else — a token, two lines, trailing garbage — is refused: two
// clients must never reach the same key through two spellings of it.
func ParseKey(lines []string) (key string, present bool, err error) {
	switch len(lines) {
	case 0:
		return "", false, nil
	case 1:
	default:
		return "", true, ErrKeyRepeated
	}
	s := strings.Trim(lines[0], " \t") // OWS around a field value is not part of it
	v, rest, err := parseString(s)
	if err != nil {
		return "", true, err
	}
	if rest, err = skipParameters(rest); err != nil {
		return "", true, err
	}
	if rest != "" {
		return "", true, fmt.Errorf("%w: unexpected %q after the string", ErrKeyMalformed, first(rest))
	}
	switch {
	case v == "":
		return "", true, ErrKeyEmpty
	case len(v) > MaxKeyLength:
		return "", true, ErrKeyTooLong
	}
	return v, true, nil
}

// FormatKey is the sf-string of key, for a client to send; it fails for a
// key no sf-string can hold (outside printable ASCII) or an empty or
// overlong one.
func FormatKey(key string) (string, error) {
	switch {
	case key == "":
		return "", ErrKeyEmpty
	case len(key) > MaxKeyLength:
		return "", ErrKeyTooLong
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c < 0x20 || c > 0x7e {
			return "", fmt.Errorf("%w: byte 0x%02x cannot be sent", ErrKeyMalformed, c)
		}
		if c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String(), nil
}

// parseString parses an sf-string at the start of s (RFC 8941).
func parseString(s string) (string, string, error) {
	if s == "" || s[0] != '"' {
		return "", s, fmt.Errorf("%w: it must be a quoted string, e.g. \"8e03978e-40d5-43e8-bc93-6894a57f9324\"", ErrKeyMalformed)
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			i++
			if i == len(s) || (s[i] != '"' && s[i] != '\\') {
				return "", s, fmt.Errorf("%w: a backslash escapes only \" or \\", ErrKeyMalformed)
			}
			b.WriteByte(s[i])
		case c == '"':
			return b.String(), s[i+1:], nil
		case c < 0x20 || c > 0x7e:
			return "", s, fmt.Errorf("%w: byte 0x%02x is not allowed in a string", ErrKeyMalformed, c)
		default:
			b.WriteByte(c)
		}
	}
	return "", s, fmt.Errorf("%w: the closing quote is missing", ErrKeyMalformed)
}

// skipParameters consumes *( ";" *SP key [ "=" bare-item ] ), the parameters of an RFC 8941 Item.
func skipParameters(s string) (string, error) {
	for s != "" && s[0] == ';' {
		s = strings.TrimLeft(s[1:], " ")
		n := 0
		for n < len(s) && isKeyChar(s[n], n == 0) {
			n++
		}
		if n == 0 {
			return s, fmt.Errorf("%w: a parameter needs a lower-case key", ErrKeyMalformed)
		}
		s = s[n:]
		if s == "" || s[0] != '=' {
			continue // a parameter without a value is true
		}
		var err error
		if s, err = skipBareItem(s[1:]); err != nil {
			return s, err
		}
	}
	return s, nil
}

func isKeyChar(c byte, first bool) bool {
	lower := c >= 'a' && c <= 'z' || c == '*'
	if first {
		return lower
	}
	return lower || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}

// skipBareItem consumes one bare item: integer or decimal, string, token,
// byte sequence or boolean.
func skipBareItem(s string) (string, error) {
	bad := fmt.Errorf("%w: a parameter's value is not a bare item", ErrKeyMalformed)
	if s == "" {
		return s, bad
	}
	switch c := s[0]; {
	case c == '"':
		_, rest, err := parseString(s)
		return rest, err
	case c == '-' || isDigit(c):
		return skipNumber(s, bad)
	case c == '?':
		if len(s) < 2 || (s[1] != '0' && s[1] != '1') {
			return s, bad
		}
		return s[2:], nil
	case c == ':':
		end := strings.IndexByte(s[1:], ':')
		if end < 0 {
			return s, bad
		}
		for _, b := range []byte(s[1 : 1+end]) {
			if !isDigit(b) && !isAlpha(b) && b != '+' && b != '/' && b != '=' {
				return s, bad
			}
		}
		return s[end+2:], nil
	case isAlpha(c) || c == '*':
		n := 1
		for n < len(s) && (isTchar(s[n]) || s[n] == ':' || s[n] == '/') {
			n++
		}
		return s[n:], nil
	}
	return s, bad
}

func skipNumber(s string, bad error) (string, error) {
	i := 0
	if s[0] == '-' {
		i++
	}
	start, dot := i, -1
	for ; i < len(s) && (isDigit(s[i]) || (s[i] == '.' && dot < 0 && i > start)); i++ {
		if s[i] == '.' {
			dot = i
		}
	}
	digits := i - start
	switch {
	case digits == 0 || (dot < 0 && digits > 15):
		return s, bad
	case dot >= 0 && (dot-start > 12 || i-dot-1 < 1 || i-dot-1 > 3):
		return s, bad
	}
	return s[i:], nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// isTchar: the token characters of RFC 9110.
func isTchar(c byte) bool {
	return isDigit(c) || isAlpha(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func first(s string) string {
	if len(s) > 8 {
		return s[:8] + "…"
	}
	return s
}
