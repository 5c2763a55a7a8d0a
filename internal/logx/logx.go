// Package logx is the function's structured logging: JSON lines through
// log/slog, with the invocation's fields (request_id, idempotency_key,
// fingerprint, …) taken from the context on every line, and secrets redacted
// before anything is written.
package logx

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
)

type ctxKey struct{}

// With returns ctx carrying attrs; every line logged with ctx gets them.
// Later values for the same key replace earlier ones.
func With(ctx context.Context, attrs ...slog.Attr) context.Context {
	prev, _ := ctx.Value(ctxKey{}).([]slog.Attr)
	merged := make([]slog.Attr, 0, len(prev)+len(attrs))
	for _, a := range prev {
		replaced := false
		for _, b := range attrs {
			if a.Key == b.Key {
				replaced = true
				break
			}
		}
		if !replaced {
			merged = append(merged, a)
		}
	}
	return context.WithValue(ctx, ctxKey{}, append(merged, attrs...))
}

// Attrs returns the attributes ctx carries.
func Attrs(ctx context.Context) []slog.Attr {
	a, _ := ctx.Value(ctxKey{}).([]slog.Attr)
	return a
}

// Redactor replaces registered secret values wherever they appear in a line.
// Values shorter than 6 bytes are not registered: they would mangle ordinary
// text and are not secrets worth the name.
type Redactor struct {
	mu      sync.RWMutex
	secrets []string
}

// Add registers secret values (API keys, AccessKey secrets, STS tokens, DSN
// passwords) as they become known.
func (r *Redactor) Add(values ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range values {
		if len(v) < 6 {
			continue
		}
		dup := false
		for _, s := range r.secrets {
			if s == v {
				dup = true
			}
		}
		if !dup {
			r.secrets = append(r.secrets, v)
		}
	}
}

// Redact returns s with every registered secret replaced.
func (r *Redactor) Redact(s string) string {
	if r == nil {
		return s
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, v := range r.secrets {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, "[REDACTED]")
		}
	}
	return s
}

// handler adds the context's attributes and redacts string values.
type handler struct {
	inner slog.Handler
	red   *Redactor
}

// New returns a JSON logger on w that adds context attributes and redacts.
func New(w io.Writer, level slog.Leveler, red *Redactor) *slog.Logger {
	return slog.New(&handler{inner: slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Value.Kind() == slog.KindString {
				a.Value = slog.StringValue(red.Redact(a.Value.String()))
			}
			return a
		}}), red: red})
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	if attrs := Attrs(ctx); len(attrs) > 0 {
		r = r.Clone()
		r.AddAttrs(attrs...)
	}
	r.Message = h.red.Redact(r.Message)
	return h.inner.Handle(ctx, r)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &handler{inner: h.inner.WithAttrs(attrs), red: h.red}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{inner: h.inner.WithGroup(name), red: h.red}
}
