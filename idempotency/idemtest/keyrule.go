package idemtest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
)

// keyRule: one key rule on every store. A key one store would merge with
// another (MySQL's PAD SPACE collation: "k" and "k " are one key there,
// two in bbolt) or answer with a retryable error (invalid UTF-8: MySQL
// error 1366, "store unavailable", retried forever) is refused FINAL
// invalid_request before any store sees it, and the record it resembles
// is left as it was.
func keyRule(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	base := NewKey()[:40]
	if _, err := e.Do(context.Background(), req(base, "a"), func(context.Context, *idempotency.Lease) (string, error) {
		return "done", nil
	}); err != nil {
		t.Fatal(err)
	}
	cut := base[:30] + "-订单" // a business id, to be cut mid-character
	for _, c := range []struct{ name, key string }{
		{"empty", ""},
		{"over 64 bytes", strings.Repeat("k", 65)},
		{"over 64 bytes in 64 characters", strings.Repeat("é", 64)}, // MySQL's VARCHAR(64) would keep it
		{"a trailing space", base + " "},
		{"trailing spaces", base + "   "},
		{"cut mid-character", cut[:len(cut)-1]},
		{"an invalid byte", base + "\xff"},
		{"a tab", base + "\t"},
		{"a NUL", base + "\x00"},
		{"a C1 control", base + "\u0085"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := req(base, "b")
			r.Key = c.key // req's payload hash: base's, so a merged key would answer base's result
			out, err := e.Do(context.Background(), r, func(context.Context, *idempotency.Lease) (string, error) {
				t.Error("ran under a refused key")
				return "", nil
			})
			var ie *idempotency.Error
			if !errors.As(err, &ie) || ie.Code != "invalid_request" || ie.Retryable() || !errors.Is(err, driver.ErrInvalid) {
				t.Fatalf("%+v %v, want FINAL invalid_request", out, err)
			}
			if _, err := e.Get(context.Background(), c.key); !errors.Is(err, driver.ErrInvalid) {
				t.Fatalf("get: %v, want driver.ErrInvalid", err)
			}
		})
	}
	rec := get(t, e, base)
	want(t, "base's status", rec.Status, driver.StatusSucceeded)
	want(t, "base's fence", rec.Fence, 1)
	for _, key := range []string{strings.Repeat("é", 32), base + " x", " " + base} { // 64 bytes; inner and leading spaces
		res, _ := claim(t, e, req(key, "c"))
		want(t, "decision for "+key, res.Decision, idempotency.DecisionFirst)
	}
}
