package handler_test

import (
	"context"
	"testing"

	"github.com/idemgate/idemgate/handler"
)

// KEY_FALLBACK=fingerprint: an event without tenant_id and operation is keyed
// by its data; the default refuses it. A re-drive from the stored input
// derives the same key.
func TestKeyFallbackToTheFingerprint(t *testing.T) {
	data := func(content string) map[string]any {
		return map[string]any{"task_type": "summarize", "input": map[string]any{"content": content}}
	}
	strict := newRig(t, &model{})
	if o := outcome(t, strict.p.Handle(context.Background(), taskBody("ev-1", data("no tenant"), ""), handler.Meta{RequestID: "r1"})); o.ErrorType != "invalid_request" {
		t.Fatalf("strict: %+v", o)
	}
	m := &model{}
	rg := newRig(t, m)
	rg.p.KeyFallback = true
	first := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-1", data("no tenant"), ""), handler.Meta{RequestID: "r1"}))
	again := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-2", data("no tenant"), ""), handler.Meta{RequestID: "r2"}))
	other := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-3", data("other data"), ""), handler.Meta{RequestID: "r3"}))
	if first.Status != "SUCCEEDED" || again.Decision != "REPEAT_DONE" || again.ResultRef != first.ResultRef ||
		other.IdempotencyKey == first.IdempotencyKey || m.calls.Load() != 2 {
		t.Fatalf("first %+v, again %+v, other %+v, calls %d", first, again, other, m.calls.Load())
	}
	// A re-drive from input.json finds the same key.
	rg2 := newRig(t, &model{})
	rg2.p.KeyFallback = true
	die := true
	rg2.p.Fault = func(point string) {
		if point == "after_output" && die {
			die = false
			panic("dies after its output")
		}
	}
	rg2.p.Handle(context.Background(), taskBody("ev-1", data("re-driven"), ""), handler.Meta{RequestID: "r1"})
	rep, err := rg2.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{})
	if err != nil || rep.Redriven != 1 || len(rep.Results) != 1 || rep.Results[0].Status != "SUCCEEDED" {
		t.Fatalf("sweep %+v %v", rep, err)
	}
}
