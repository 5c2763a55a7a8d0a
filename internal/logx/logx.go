// Package logx is the function's structured logging: JSON lines through
// log/slog, with the invocation's fields (request_id, idempotency_key,
// fingerprint, …) taken from the context on every line, and secrets redacted
// before anything is written.
package logx

import (
	"cmp"
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

type ctxKey struct{}

// attrsCtx is ctx carrying log attributes: With runs for every invocation
// and every task, and context.WithValue would box the slice in a third
// allocation.
type attrsCtx struct {
	context.Context
	attrs []slog.Attr
}

// Value answers ctxKey with c itself: a pointer is boxed without allocating,
// and every log line asks.
func (c *attrsCtx) Value(key any) any {
	if key == (ctxKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// With returns ctx carrying attrs; every line logged with ctx gets them.
// Later values for the same key replace earlier ones.
func With(ctx context.Context, attrs ...slog.Attr) context.Context {
	prev := Attrs(ctx)
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
	return &attrsCtx{Context: ctx, attrs: append(merged, attrs...)}
}

// Attrs returns the attributes ctx carries.
func Attrs(ctx context.Context) []slog.Attr {
	if c, ok := ctx.Value(ctxKey{}).(*attrsCtx); ok {
		return c.attrs
	}
	return nil
}

// Redactor replaces registered secret values wherever they appear in a line.
// Values shorter than 6 bytes are not registered: they would mangle ordinary
// text and are not secrets worth the name. It knows two kinds: the process's
// own (Add: API keys, DSN passwords, kept for the process's life) and an
// invocation's credentials (Hold: FC's STS token and AccessKey secret, which
// rotate). An invocation's are kept while an invocation that carries them
// runs and, once released, among the last keepReleased: an instance that
// lives for days sees a new token every rotation, and a list of every one it
// ever saw would grow without bound, and with it every line's cost.
type Redactor struct {
	mu       sync.Mutex
	fixed    []string
	held     map[string]int // value → invocations in flight that carry it
	released []string       // released and no longer held, oldest first
	// all is fixed ∪ held ∪ released, longest first (a secret inside
	// another is replaced after it), read by Redact without a lock.
	all atomic.Pointer[[]string]
}

// keepReleased is how many released invocation secrets stay redacted: a line
// logged just after its invocation ended (a client's own log line) still
// has them replaced.
const keepReleased = 8

// Add registers secret values for the process's life (the configuration's
// keys and passwords).
func (r *Redactor) Add(values ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range values {
		if len(v) >= 6 && !slices.Contains(r.fixed, v) {
			r.fixed = append(r.fixed, v)
		}
	}
	r.publish()
}

// Hold registers an invocation's secret values (its STS token and AccessKey
// secret) until release is called, which its invocation does when it ends.
func (r *Redactor) Hold(values ...string) (release func()) {
	if !slices.ContainsFunc(values, func(v string) bool { return len(v) >= 6 }) {
		return func() {} // no credentials (a local run): nothing to hold
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held == nil {
		r.held = map[string]int{}
	}
	changed := false
	for _, v := range values {
		if len(v) < 6 {
			continue
		}
		if r.held[v]++; r.held[v] == 1 {
			if i := slices.Index(r.released, v); i >= 0 {
				r.released = slices.Delete(r.released, i, i+1) // held again: still redacted
			} else {
				changed = true
			}
		}
	}
	if changed {
		r.publish()
	}
	return func() { r.release(values) }
}

func (r *Redactor) release(values []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	changed := false
	for _, v := range values {
		switch n := r.held[v]; {
		case n == 0: // too short to be held, or released twice
			continue
		case n > 1:
			r.held[v] = n - 1
			continue
		}
		delete(r.held, v)
		if r.released = append(r.released, v); len(r.released) > keepReleased {
			r.released = slices.Delete(r.released, 0, 1)
			changed = true
		}
	}
	if changed {
		r.publish()
	}
}

// publish rebuilds all; r.mu is held.
func (r *Redactor) publish() {
	all := slices.Clone(r.fixed)
	for v := range r.held {
		all = append(all, v)
	}
	all = append(all, r.released...)
	slices.SortFunc(all, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	all = slices.Compact(all)
	r.all.Store(&all)
}

// Redact returns s with every registered secret replaced.
func (r *Redactor) Redact(s string) string {
	if r == nil {
		return s
	}
	all := r.all.Load()
	if all == nil {
		return s
	}
	for _, v := range *all {
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
