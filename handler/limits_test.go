package handler

import (
	"strings"
	"testing"

	"github.com/idemgate/idemgate/handler/event"
	"github.com/idemgate/idemgate/idempotency"
)

// Every limit is "at most": a value at the limit passes, one byte more is
// refused FINAL with its own code (a retry cannot change the bytes).
func TestLimitsAreAtMostAndFinal(t *testing.T) {
	input := func(n int) []byte { // a JSON object of exactly n bytes
		return []byte(`{"c":"` + strings.Repeat("x", n-8) + `"}`)
	}
	ok := func() *event.Task {
		return &event.Task{TenantID: "acme", TaskType: "summarize", Operation: "summarize", RequestID: "req-1",
			Input: []byte(`{}`)}
	}
	cases := []struct {
		name string
		edit func(t *event.Task)
		code string // "" : passes
	}{
		{"input at the limit", func(t *event.Task) { t.Input = input(MaxInputBytes) }, ""},
		{"input a byte over", func(t *event.Task) { t.Input = input(MaxInputBytes + 1) }, "input_too_large"},
		{"tenant_id at 128 bytes", func(t *event.Task) { t.TenantID = strings.Repeat("t", 128) }, ""},
		{"tenant_id at 129 bytes", func(t *event.Task) { t.TenantID = strings.Repeat("t", 129) }, "field_too_long"},
		{"idempotency_key at 256 bytes", func(t *event.Task) { t.IdempotencyKey = strings.Repeat("k", 256) }, ""},
		{"idempotency_key at 257 bytes", func(t *event.Task) { t.IdempotencyKey = strings.Repeat("k", 257) }, "field_too_long"},
		{"notify.url at 2048 bytes", func(t *event.Task) { t.Notify = &event.Notify{URL: strings.Repeat("u", 2048)} }, ""},
		{"notify.url at 2049 bytes", func(t *event.Task) { t.Notify = &event.Notify{URL: strings.Repeat("u", 2049)} }, "field_too_long"},
		{"request_id with a newline", func(t *event.Task) { t.RequestID = "req\n1" }, "invalid_request"},
		{"request_id with a non-ASCII letter", func(t *event.Task) { t.RequestID = "réq-1" }, "invalid_request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			task := ok()
			c.edit(task)
			err := checkLimits(task)
			if c.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			class, code := idempotency.Classify(err)
			if err == nil || code != c.code || class != idempotency.ClassFinal {
				t.Fatalf("%v: class %v code %q, want FINAL %s", err, class, code, c.code)
			}
		})
	}
}
