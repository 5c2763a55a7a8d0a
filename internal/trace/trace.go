// Package trace carries a W3C Trace Context (https://www.w3.org/TR/trace-context/)
// through an invocation without a tracing SDK: the traceparent that arrived
// (from the CloudEvent's distributed-tracing extension attribute, or the
// HTTP header) is parsed and continued with a span of our own, or a new trace
// is started, and every outgoing call (the model, the notify POST) sends it
// on. The context rides in a context.Context, so the interfaces between the
// pipeline and its clients do not change.
package trace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Header is the W3C header (and CloudEvents extension attribute) name.
const Header = "traceparent"

// FlagSampled is the only trace flag of version 00. A new trace is started
// sampled: the function logs every line of the invocation with its trace
// id, which is recording it, so the callee may record too.
const FlagSampled = 0x01

// ErrInvalid wraps every reason a traceparent is refused.
var ErrInvalid = errors.New("invalid traceparent")

// Context is one span's trace context.
type Context struct {
	TraceID [16]byte
	SpanID  [8]byte
	Flags   byte
}

// version 00: "00-" 32 hex "-" 16 hex "-" 2 hex.
const length = 55

// Parse reads a traceparent value as the W3C recommendation's receivers must:
// lowercase hex only, a trace id and a parent id that are not all zeros,
// version ff refused; a later version is read by its first four fields
// (then it must go on with "-"). Blanks around the value are ignored (HTTP
// optional white space).
func Parse(s string) (Context, error) {
	var c Context
	s = strings.Trim(s, " \t")
	if len(s) < length {
		return c, fmt.Errorf("%w: %d characters, want %d", ErrInvalid, len(s), length)
	}
	if s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return c, fmt.Errorf("%w: want version-traceid-parentid-flags", ErrInvalid)
	}
	var version, flags [1]byte
	for _, f := range []struct {
		name, src string
		dst       []byte
	}{{"version", s[0:2], version[:]}, {"trace id", s[3:35], c.TraceID[:]}, {"parent id", s[36:52], c.SpanID[:]},
		{"flags", s[53:55], flags[:]}} {
		if !lowerHex(f.src) {
			return Context{}, fmt.Errorf("%w: %s is not lowercase hex", ErrInvalid, f.name)
		}
		_, _ = hex.Decode(f.dst, []byte(f.src)) // checked above
	}
	c.Flags = flags[0] & FlagSampled // the other bits are not defined by version 00: not passed on
	switch {
	case version[0] == 0xff:
		return Context{}, fmt.Errorf("%w: version ff is forbidden", ErrInvalid)
	case version[0] == 0 && len(s) != length:
		return Context{}, fmt.Errorf("%w: version 00 has exactly %d characters", ErrInvalid, length)
	case len(s) > length && s[length] != '-':
		return Context{}, fmt.Errorf("%w: a later version's extra fields must follow a '-'", ErrInvalid)
	case c.TraceID == [16]byte{}:
		return Context{}, fmt.Errorf("%w: trace id is all zeros", ErrInvalid)
	case c.SpanID == [8]byte{}:
		return Context{}, fmt.Errorf("%w: parent id is all zeros", ErrInvalid)
	}
	return c, nil
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// String is the traceparent header value, always version 00.
func (c Context) String() string {
	b := make([]byte, 0, length)
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, c.TraceID[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, c.SpanID[:])
	b = append(b, '-')
	return string(hex.AppendEncode(b, []byte{c.Flags}))
}

// TraceIDString is the trace id in hex (32 characters): what the logs carry.
func (c Context) TraceIDString() string { return hex.EncodeToString(c.TraceID[:]) }

// Sampled reports the sampled flag.
func (c Context) Sampled() bool { return c.Flags&FlagSampled != 0 }

// New starts a trace: a random trace id and span id, sampled.
func New() Context {
	c := Context{Flags: FlagSampled}
	for c.TraceID == [16]byte{} {
		_, _ = rand.Read(c.TraceID[:]) // never fails (crypto/rand)
	}
	c.SpanID = newSpanID()
	return c
}

// Child is a span of our own under c: the same trace and flags, a new span
// id, which is the parent id every outgoing call names.
func (c Context) Child() Context {
	c.SpanID = newSpanID()
	return c
}

func newSpanID() [8]byte {
	var id [8]byte
	for id == [8]byte{} {
		_, _ = rand.Read(id[:])
	}
	return id
}

// Continue is the context an invocation works under for an incoming
// traceparent value: a child of it when it is valid; a new trace when it is
// absent, or when it is invalid — then err says why it was replaced, which
// is never a reason to fail the invocation.
func Continue(incoming string) (Context, error) {
	if strings.Trim(incoming, " \t") == "" {
		return New(), nil
	}
	c, err := Parse(incoming)
	if err != nil {
		return New(), err
	}
	return c.Child(), nil
}

// FromJaeger converts a Jaeger span context, "traceid:spanid:parentid:flags"
// in hex (ids without their leading zeros, as uber-trace-id writes them),
// which is what FC's go1 runtime hands over (fccontext's
// Tracing.OpenTracingSpanContext), into the same trace and span; the
// sampled bit is flags' lowest.
func FromJaeger(s string) (Context, error) {
	var c Context
	parts := strings.Split(strings.ReplaceAll(strings.TrimSpace(s), "%3A", ":"), ":")
	if len(parts) != 4 {
		return c, fmt.Errorf("%w: a Jaeger span context has 4 fields, got %d", ErrInvalid, len(parts))
	}
	for _, f := range []struct {
		src string
		dst []byte
	}{{parts[0], c.TraceID[:]}, {parts[1], c.SpanID[:]}} {
		src := strings.ToLower(f.src)
		if src == "" || len(src) > 2*len(f.dst) || !lowerHex(src) {
			return Context{}, fmt.Errorf("%w: Jaeger id %q", ErrInvalid, f.src)
		}
		src = strings.Repeat("0", 2*len(f.dst)-len(src)) + src
		_, _ = hex.Decode(f.dst, []byte(src))
	}
	flags := strings.ToLower(parts[3])
	if flags == "" || len(flags) > 2 || !lowerHex(flags) {
		return Context{}, fmt.Errorf("%w: Jaeger flags %q", ErrInvalid, parts[3])
	}
	var fb [1]byte
	_, _ = hex.Decode(fb[:], []byte(strings.Repeat("0", 2-len(flags))+flags))
	c.Flags = fb[0] & FlagSampled
	if c.TraceID == [16]byte{} || c.SpanID == [8]byte{} {
		return Context{}, fmt.Errorf("%w: Jaeger ids are all zeros", ErrInvalid)
	}
	return c, nil
}

type ctxKey struct{}

// WithContext returns ctx carrying c.
func WithContext(ctx context.Context, c Context) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

// FromContext returns the context ctx carries, if any.
func FromContext(ctx context.Context) (Context, bool) {
	c, ok := ctx.Value(ctxKey{}).(Context)
	return c, ok
}
