// Package jcs implements the JSON Canonicalization Scheme (JCS) of RFC 8785.
//
// Canonical bytes are what idempotency keys and fingerprints are hashed over
// (DESIGN.md §4.3), so two JSON texts that mean the same value must produce
// identical bytes, and anything whose meaning is ambiguous (duplicate member
// names, lone surrogates, invalid UTF-8, numbers outside IEEE-754 doubles) is
// rejected rather than silently normalised into a colliding key.
//
// The parser is hand-written instead of using encoding/json because the
// standard decoder quietly replaces invalid UTF-8 and lone surrogates with
// U+FFFD and lets later duplicate members win; both would let distinct inputs
// share a key.
package jcs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects Canonicalize accepts.
// The parser is recursive, so an unbounded depth would let a hostile event
// exhaust the stack; real task inputs are nowhere near this deep.
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
	// ErrNumber reports a number that is not a finite IEEE-754 double.
	ErrNumber = errors.New("jcs: number out of range")
	// ErrDuplicateKey reports an object with two members of the same name.
	ErrDuplicateKey = errors.New("jcs: duplicate object member name")
	// ErrTooDeep reports nesting deeper than MaxDepth.
	ErrTooDeep = errors.New("jcs: nesting too deep")
)

// Canonicalize parses raw as a single JSON value (surrounding whitespace
// allowed) and returns its RFC 8785 canonical form.
func Canonicalize(raw []byte) ([]byte, error) {
	p := parser{data: raw}
	p.skipSpace()
	out, err := p.value(make([]byte, 0, len(raw)), 0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, p.fail(ErrInvalidJSON, "trailing data after top-level value")
	}
	return out, nil
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
// and values must be valid UTF-8, and names distinct; an odd trailing name
// is ignored.
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
		out = appendString(out, kv[at])
		out = append(out, ':')
		out = appendString(out, kv[at+1])
	}
	return append(out, '}')
}

type parser struct {
	data []byte
	pos  int
}

func (p *parser) fail(sentinel error, msg string) error {
	return fmt.Errorf("%w: %s at offset %d", sentinel, msg, p.pos)
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value parses one JSON value at p.pos and appends its canonical form to out.
// depth is the number of containers already open around it.
func (p *parser) value(out []byte, depth int) ([]byte, error) {
	if p.pos >= len(p.data) {
		return nil, p.fail(ErrInvalidJSON, "unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		if depth >= MaxDepth {
			return nil, p.fail(ErrTooDeep, fmt.Sprintf("more than %d nested containers", MaxDepth))
		}
		return p.object(out, depth+1)
	case c == '[':
		if depth >= MaxDepth {
			return nil, p.fail(ErrTooDeep, fmt.Sprintf("more than %d nested containers", MaxDepth))
		}
		return p.array(out, depth+1)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return appendString(out, s), nil
	case c == '-' || ('0' <= c && c <= '9'):
		return p.number(out)
	case c == 't':
		return p.literal(out, "true")
	case c == 'f':
		return p.literal(out, "false")
	case c == 'n':
		return p.literal(out, "null")
	default:
		return nil, p.fail(ErrInvalidJSON, fmt.Sprintf("unexpected character %q", c))
	}
}

func (p *parser) literal(out []byte, word string) ([]byte, error) {
	if !bytes.HasPrefix(p.data[p.pos:], []byte(word)) {
		return nil, p.fail(ErrInvalidJSON, "invalid literal")
	}
	p.pos += len(word)
	return append(out, word...), nil
}

func (p *parser) array(out []byte, depth int) ([]byte, error) {
	p.pos++ // '['
	out = append(out, '[')
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return append(out, ']'), nil
	}
	for first := true; ; first = false {
		if !first {
			out = append(out, ',')
		}
		p.skipSpace()
		var err error
		if out, err = p.value(out, depth); err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.fail(ErrInvalidJSON, "unterminated array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return append(out, ']'), nil
		default:
			return nil, p.fail(ErrInvalidJSON, "expected ',' or ']' in array")
		}
	}
}

// member is one object member; its canonical value lives in a scratch buffer
// shared by the whole object so sorting moves only these small headers.
type member struct {
	name       string
	start, end int
}

func (p *parser) object(out []byte, depth int) ([]byte, error) {
	p.pos++ // '{'
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return append(out, '{', '}'), nil
	}
	var (
		members []member
		scratch []byte
	)
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.fail(ErrInvalidJSON, "expected member name")
		}
		name, err := p.str()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.fail(ErrInvalidJSON, "expected ':' after member name")
		}
		p.pos++
		p.skipSpace()
		start := len(scratch)
		if scratch, err = p.value(scratch, depth); err != nil {
			return nil, err
		}
		members = append(members, member{name: name, start: start, end: len(scratch)})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.fail(ErrInvalidJSON, "unterminated object")
		}
		if p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.data[p.pos] != '}' {
			return nil, p.fail(ErrInvalidJSON, "expected ',' or '}' in object")
		}
		p.pos++
		break
	}

	slices.SortFunc(members, func(a, b member) int { return compareUTF16(a.name, b.name) })
	out = append(out, '{')
	for i, m := range members {
		if i > 0 {
			if members[i-1].name == m.name {
				return nil, fmt.Errorf("%w: %q in object ending at offset %d", ErrDuplicateKey, m.name, p.pos)
			}
			out = append(out, ',')
		}
		out = appendString(out, m.name)
		out = append(out, ':')
		out = append(out, scratch[m.start:m.end]...)
	}
	return append(out, '}'), nil
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

// str parses a JSON string at p.pos and returns its decoded value, which is
// always valid UTF-8.
func (p *parser) str() (string, error) {
	p.pos++ // opening quote
	var buf []byte
	for {
		// Copy the run of characters that need no attention in one go.
		start := p.pos
		for p.pos < len(p.data) {
			c := p.data[p.pos]
			if c == '"' || c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
				break
			}
			p.pos++
		}
		buf = append(buf, p.data[start:p.pos]...)
		if p.pos >= len(p.data) {
			return "", p.fail(ErrInvalidJSON, "unterminated string")
		}
		switch c := p.data[p.pos]; {
		case c == '"':
			p.pos++
			return string(buf), nil
		case c < 0x20:
			return "", p.fail(ErrInvalidJSON, "control character in string")
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(p.data[p.pos:])
			if r == utf8.RuneError && n == 1 {
				return "", p.fail(ErrInvalidString, "invalid UTF-8")
			}
			buf = append(buf, p.data[p.pos:p.pos+n]...)
			p.pos += n
		default: // backslash
			var err error
			if buf, err = p.escape(buf); err != nil {
				return "", err
			}
		}
	}
}

// escape decodes one escape sequence at p.pos (the backslash) into buf.
func (p *parser) escape(buf []byte) ([]byte, error) {
	if p.pos+1 >= len(p.data) {
		return nil, p.fail(ErrInvalidJSON, "unterminated escape")
	}
	var short byte
	switch c := p.data[p.pos+1]; c {
	case '"', '\\', '/':
		short = c
	case 'b':
		short = '\b'
	case 'f':
		short = '\f'
	case 'n':
		short = '\n'
	case 'r':
		short = '\r'
	case 't':
		short = '\t'
	case 'u':
	default:
		return nil, p.fail(ErrInvalidJSON, fmt.Sprintf("invalid escape %q", c))
	}
	if short != 0 {
		p.pos += 2
		return append(buf, short), nil
	}
	r, err := p.hex4()
	if err != nil {
		return nil, err
	}
	switch {
	case r >= 0xDC00 && r <= 0xDFFF:
		return nil, p.fail(ErrInvalidString, "unpaired low surrogate")
	case r >= 0xD800 && r <= 0xDBFF:
		if p.pos+1 >= len(p.data) || p.data[p.pos] != '\\' || p.data[p.pos+1] != 'u' {
			return nil, p.fail(ErrInvalidString, "unpaired high surrogate")
		}
		lo, err := p.hex4()
		if err != nil {
			return nil, err
		}
		if lo < 0xDC00 || lo > 0xDFFF {
			return nil, p.fail(ErrInvalidString, "unpaired high surrogate")
		}
		r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
	}
	return utf8.AppendRune(buf, r), nil
}

// hex4 reads `\uXXXX` at p.pos and returns the code unit.
func (p *parser) hex4() (rune, error) {
	if p.pos+6 > len(p.data) {
		return 0, p.fail(ErrInvalidJSON, "truncated \\u escape")
	}
	var r rune
	for _, c := range p.data[p.pos+2 : p.pos+6] {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, p.fail(ErrInvalidJSON, "invalid hex digit in \\u escape")
		}
		r = r<<4 | rune(d)
	}
	p.pos += 6
	return r, nil
}

// appendString writes s as RFC 8785 §3.2.2.2 demands: only '"', '\\' and
// control characters are escaped (short forms where JSON has them, else
// \u00xx in lowercase); everything else, including '<', '>', '&' and
// U+2028/U+2029, is emitted as raw UTF-8.
func appendString(out []byte, s string) []byte {
	const hex = "0123456789abcdef"
	out = append(out, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		out = append(out, s[start:i]...)
		switch c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\b':
			out = append(out, '\\', 'b')
		case '\f':
			out = append(out, '\\', 'f')
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		default:
			out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		}
		start = i + 1
	}
	out = append(out, s[start:]...)
	return append(out, '"')
}

// number validates the RFC 8259 number grammar at p.pos, converts the token
// to the nearest double and appends its ECMAScript serialization.
func (p *parser) number(out []byte) ([]byte, error) {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.data) && '0' <= p.data[p.pos] && p.data[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.data[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(p.data) && p.data[p.pos] == '0':
		p.pos++ // a leading zero stands alone
	case digits() == 0:
		return nil, p.fail(ErrInvalidJSON, "invalid number")
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return nil, p.fail(ErrInvalidJSON, "invalid number: no digits after '.'")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return nil, p.fail(ErrInvalidJSON, "invalid number: no digits in exponent")
		}
	}
	tok := string(p.data[start:p.pos])
	// Underflow rounds to (signed) zero without error, as JSON.parse does;
	// only overflow to ±Inf is rejected.
	f, err := strconv.ParseFloat(tok, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		p.pos = start
		return nil, p.fail(ErrNumber, fmt.Sprintf("%.40q is not a finite IEEE-754 double", tok))
	}
	return appendNumber(out, f), nil
}

// appendNumber appends the ECMAScript Number.prototype.toString form of the
// finite double f (ECMA-262 Number::toString, radix 10), which RFC 8785
// §3.2.2.3 prescribes. Callers have already rejected NaN and infinities.
func appendNumber(out []byte, f float64) []byte {
	if f == 0 { // also -0, which ES prints as "0"
		return append(out, '0')
	}
	if f < 0 {
		out = append(out, '-')
		f = -f
	}
	// strconv's shortest 'e' form yields the ES digit string s (shortest
	// digits that round-trip, closest to f on ties) and the exponent; only
	// the layout rules below differ from Go's.
	var tmp [32]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64) // d[.ddd]e±XX
	ePos := bytes.IndexByte(e, 'e')
	var digBuf [24]byte
	digs := append(digBuf[:0], e[0])
	if ePos > 1 {
		digs = append(digs, e[2:ePos]...)
	}
	exp := 0
	for _, c := range e[ePos+2:] {
		exp = exp*10 + int(c-'0')
	}
	if e[ePos+1] == '-' {
		exp = -exp
	}
	k := len(digs) // number of significant digits
	n := exp + 1   // position of the decimal point relative to digs
	switch {
	case k <= n && n <= 21: // integer, padded with zeros
		out = append(out, digs...)
		for range n - k {
			out = append(out, '0')
		}
	case 0 < n && n <= 21: // point inside the digits
		out = append(out, digs[:n]...)
		out = append(out, '.')
		out = append(out, digs[n:]...)
	case -6 < n && n <= 0: // small fraction written out in full
		out = append(out, '0', '.')
		for range -n {
			out = append(out, '0')
		}
		out = append(out, digs...)
	default: // exponential
		out = append(out, digs[0])
		if k > 1 {
			out = append(out, '.')
			out = append(out, digs[1:]...)
		}
		out = append(out, 'e')
		if n-1 >= 0 {
			out = append(out, '+')
		}
		out = strconv.AppendInt(out, int64(n-1), 10)
	}
	return out
}
