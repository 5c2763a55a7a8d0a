package handler_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/keys"
)

func mustJMESPath(t *testing.T, expr string) *keys.JMESPath {
	t.Helper()
	j, err := keys.CompileJMESPath(expr)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func order(id, content string) map[string]any {
	in := map[string]any{"content": content}
	if id != "" {
		in["order_id"] = id
	}
	return map[string]any{"tenant_id": "t1", "task_type": "summarize", "operation": "summarize", "input": in}
}

// KEY_JMESPATH and PAYLOAD_JMESPATH (docs/design.md §4): the key from the
// selection, the payload hash from the default or from its own selection.
func TestKeyRules(t *testing.T) {
	for _, c := range []struct {
		name, key, payload string
		fallback           bool
		second             map[string]any
		wantDecision       string // of the second delivery
		wantError          string // its errorType
		calls              int32
	}{
		{name: "same order, other content: a mismatch", key: "input.order_id", second: order("o-1", "other"),
			wantDecision: "PAYLOAD_MISMATCH", wantError: "payload_mismatch", calls: 1},
		{name: "same order, same content: a duplicate", key: "input.order_id", second: order("o-1", "first"),
			wantDecision: "REPEAT_DONE", calls: 1},
		{name: "the payload expression makes any repeat of the order a duplicate", key: "input.order_id",
			payload: "input.order_id", second: order("o-1", "other"), wantDecision: "REPEAT_DONE", calls: 1},
		{name: "another order is another key", key: "input.order_id", second: order("o-2", "first"),
			wantDecision: "FIRST", calls: 2},
		{name: "default key, payload expression: same content, same key", payload: "input.content",
			second: order("o-1", "first"), wantDecision: "REPEAT_DONE", calls: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &model{}
			rg := newRig(t, m)
			if c.key != "" {
				rg.p.Keys.Key = mustJMESPath(t, c.key)
			}
			if c.payload != "" {
				rg.p.Keys.Payload = mustJMESPath(t, c.payload)
			}
			first := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-1", order("o-1", "first"), ""), handler.Meta{RequestID: "r1"}))
			second := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-2", c.second, ""), handler.Meta{RequestID: "r2"}))
			if first.Status != "SUCCEEDED" || second.Decision != c.wantDecision || second.ErrorType != c.wantError || m.calls.Load() != c.calls {
				t.Fatalf("first %+v\nsecond %+v\ncalls %d", first, second, m.calls.Load())
			}
			if c.wantDecision == "REPEAT_DONE" && second.ResultRef != first.ResultRef {
				t.Fatalf("another result: %s, %s", second.ResultRef, first.ResultRef)
			}
		})
	}
}

// An expression that selects nothing is FINAL invalid_request naming it;
// with KEY_FALLBACK=fingerprint the event is keyed by its data instead.
func TestKeyRulesSelectingNothing(t *testing.T) {
	for _, variable := range []string{"KEY_JMESPATH", "PAYLOAD_JMESPATH"} {
		t.Run(variable, func(t *testing.T) {
			m := &model{}
			rg := newRig(t, m)
			j := mustJMESPath(t, "input.order_id")
			if variable == "KEY_JMESPATH" {
				rg.p.Keys.Key = j
			} else {
				rg.p.Keys.Payload = j
			}
			o := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-1", order("", "no order"), ""), handler.Meta{RequestID: "r1"}))
			if o.ErrorType != "invalid_request" || (o.Retryable != nil && *o.Retryable) || !strings.Contains(o.ErrorMessage, variable) ||
				!strings.Contains(o.ErrorMessage, "input.order_id") || m.calls.Load() != 0 {
				t.Fatalf("%+v, calls %d", o, m.calls.Load())
			}
			rg.p.KeyFallback = true
			a := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-2", order("", "no order"), ""), handler.Meta{RequestID: "r2"}))
			b := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-3", order("", "no order"), ""), handler.Meta{RequestID: "r3"}))
			other := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-4", order("", "another"), ""), handler.Meta{RequestID: "r4"}))
			if a.Status != "SUCCEEDED" || b.Decision != "REPEAT_DONE" || other.IdempotencyKey == a.IdempotencyKey || m.calls.Load() != 2 {
				t.Fatalf("a %+v\nb %+v\nother %+v\ncalls %d", a, b, other, m.calls.Load())
			}
		})
	}
}

// The sweeper re-derives K from input.json with the expressions recorded
// there, even after the deployment changed them.
func TestKeyRulesRedriveFromTheStoredInput(t *testing.T) {
	for _, c := range []struct {
		name     string
		data     map[string]any
		fallback bool
	}{
		{"selected", order("o-9", "re-driven"), false},
		{"fell back to the fingerprint", order("", "re-driven"), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rg := newRig(t, &model{}, idempotency.WithRetryBackoff(0))
			rg.p.Keys = handler.KeyRules{Key: mustJMESPath(t, "input.order_id"), Payload: mustJMESPath(t, "input.order_id || input.content")}
			rg.p.KeyFallback = c.fallback
			rg.dieOnceAfterOutput()
			rg.p.Handle(context.Background(), taskBody("ev-1", c.data, ""), handler.Meta{RequestID: "r1"})
			rg.p.Keys = handler.KeyRules{Key: mustJMESPath(t, "input.content")} // the deployment changed since
			rg.sweepFinishes(t)
		})
	}
}

// A double submit under PAYLOAD_JMESPATH (same order, other content) that
// takes over a dead delivery meets the first one's input.json: it is the same
// payload under the expressions input.json records, not a previous life's.
func TestKeyRulesTakeoverMeetsTheFirstInput(t *testing.T) {
	rg := newRig(t, &model{})
	rg.p.Keys = handler.KeyRules{Key: mustJMESPath(t, "input.order_id"), Payload: mustJMESPath(t, "input.order_id")}
	die := true
	rg.p.Fault = func(point string) {
		if point == "after_output" && die {
			die = false
			panic("dies after its output")
		}
	}
	first := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-1", order("o-5", "first"), ""), handler.Meta{RequestID: "r1"}))
	second := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-2", order("o-5", "second"), ""), handler.Meta{RequestID: "r1", RetryCount: 1}))
	if first.Status == "SUCCEEDED" || second.Status != "SUCCEEDED" || second.Decision != "TAKEOVER" {
		t.Fatalf("first %+v\nsecond %+v", first, second)
	}
}
