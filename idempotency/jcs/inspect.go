package jcs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// inspect reads raw token by token and returns its first fault in text
// order, wrapped in its sentinel, or nil when raw is canonicalizable. It
// runs only off the fast path (see Canonicalize), so it favours being plain
// over being quick. Text order is the rule callers see: an input that nests
// too deep before it breaks off is ErrTooDeep, one whose number overflows
// before a syntax error is ErrNumber, and a repeated name is reported when
// its object closes, after any fault inside the object.
func inspect(raw []byte) error {
	err := walk(raw)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	// The text breaks off. If it does so inside a string, a bad sequence in
	// that string comes first: closing the string lets jsontext find it.
	if serr := walk(append(raw[:len(raw):len(raw)], '"')); errors.Is(serr, ErrInvalidString) {
		return serr
	}
	return err
}

// frame is an open object or array; an object remembers its names.
type frame struct {
	object bool
	names  map[string]bool
	dup    *string // the first repeated name
}

// walk is one pass of inspect over raw. Repeated names are let through by
// jsontext and tracked here, so that they are reported when the object
// closes rather than at the second name.
func walk(raw []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true))
	var stack []frame
	for started := false; ; started = true {
		from := dec.InputOffset()
		tok, err := dec.ReadToken()
		switch {
		case err == io.EOF && !started:
			return fmt.Errorf("%w: empty input", ErrInvalidJSON)
		case err == io.EOF:
			return nil
		case started && len(stack) == 0:
			return fmt.Errorf("%w: trailing data after top-level value at offset %d", ErrInvalidJSON, from)
		case err != nil:
			return syntaxFault(raw, from, err)
		}
		switch tok.Kind() {
		case '{', '[':
			if dec.StackDepth() > MaxDepth {
				return fmt.Errorf("%w: more than %d nested containers at offset %d", ErrTooDeep, MaxDepth, from)
			}
			stack = append(stack, frame{object: tok.Kind() == '{', names: map[string]bool{}})
		case '}', ']':
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if top.dup != nil {
				return fmt.Errorf("%w: %q in object ending at offset %d", ErrDuplicateKey, *top.dup, dec.InputOffset())
			}
		case '"':
			if _, n := dec.StackIndex(dec.StackDepth()); len(stack) > 0 && stack[len(stack)-1].object && n%2 == 1 {
				top := &stack[len(stack)-1]
				if name := tok.String(); top.names[name] && top.dup == nil {
					top.dup = &name
				} else {
					top.names[name] = true
				}
			}
		case '0':
			// Overflow, underflow and digits a double cannot hold are all
			// refused: each would share a key with another number.
			if ne := numberError(pathOf(dec.StackPointer(), stack), tok.String()); ne != nil {
				return ne
			}
		}
	}
}

// syntaxFault sorts a jsontext error met while reading the token that
// starts at from: ErrInvalidString when it points into that token's string
// at invalid UTF-8 or an unpaired surrogate escape, else ErrInvalidJSON
// (whose chain keeps io.ErrUnexpectedEOF for inspect).
func syntaxFault(raw []byte, from int64, err error) error {
	var serr *jsontext.SyntacticError
	if errors.As(err, &serr) {
		start := from + int64(len(raw[from:])-len(bytes.TrimLeft(raw[from:], " \t\r\n,:")))
		if at := serr.ByteOffset; start < at && at < int64(len(raw)) && raw[start] == '"' &&
			at < start+int64(stringLen(raw[start:])) && badString(raw[at:]) {
			return fmt.Errorf("%w: %w", ErrInvalidString, err)
		}
	}
	return fmt.Errorf("%w: %w", ErrInvalidJSON, err)
}

// stringLen is the length of the string literal s begins with, up to and
// including its closing quote, or len(s) when it has none.
func stringLen(s []byte) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(s)
}

// badString reports whether the string text at a fault is invalid UTF-8 or
// an unpaired surrogate escape. A high surrogate followed by a malformed
// \u escape is a syntax error instead, as in any other string.
func badString(at []byte) bool {
	if r, n := utf8.DecodeRune(at); r == utf8.RuneError && n == 1 {
		return true
	}
	r, ok := escapedUnit(at)
	switch {
	case !ok || !utf16.IsSurrogate(r):
		return false
	case r >= 0xDC00 || len(at) < 8 || at[6] != '\\' || at[7] != 'u':
		return true
	}
	_, ok = escapedUnit(at[6:])
	return ok
}

// pathOf writes the JSON Pointer p of a value as a field path: member
// names as .name (or ["name"] when not a plain identifier), array indexes
// as [i]. stack says which tokens are indexes.
func pathOf(p jsontext.Pointer, stack []frame) string {
	var b strings.Builder
	i := 0
	for tok := range p.Tokens() {
		switch {
		case i < len(stack) && !stack[i].object:
			b.WriteString("[" + tok + "]")
		case plainName(tok):
			b.WriteString("." + tok)
		default:
			q, _ := jsontext.AppendQuote(nil, tok)
			b.WriteString("[" + string(q) + "]")
		}
		i++
	}
	return b.String()
}

func plainName(s string) bool {
	for i, c := range s {
		if c != '_' && !unicode.IsLetter(c) && (i == 0 || !unicode.IsDigit(c)) {
			return false
		}
	}
	return s != ""
}

// escapedUnit decodes the \uXXXX escape s begins with.
func escapedUnit(s []byte) (rune, bool) {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return 0, false
	}
	u, err := strconv.ParseUint(string(s[2:6]), 16, 16)
	return rune(u), err == nil
}
