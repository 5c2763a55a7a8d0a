package handler_test

import (
	"context"
	"testing"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
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
	redrive(t, data("re-driven"), true)
}

// redrive runs data's task until it dies after its output, then sweeps with
// KEY_FALLBACK as lenient says.
func redrive(t *testing.T, data map[string]any, lenient bool) {
	t.Helper()
	rg := newRig(t, &model{}, idempotency.WithRetryBackoff(0))
	rg.p.KeyFallback = true
	rg.dieOnceAfterOutput()
	rg.p.Handle(context.Background(), taskBody("ev-1", data, ""), handler.Meta{RequestID: "r1"})
	rg.p.KeyFallback = lenient
	rg.sweepFinishes(t)
}

// dieOnceAfterOutput makes the next delivery die once its output is saved.
func (rg *rig) dieOnceAfterOutput() {
	die := true
	rg.p.Fault = func(point string) {
		if point == "after_output" && die {
			die = false
			panic("dies after its output")
		}
	}
}

// sweepFinishes sweeps once: the sweep must finish the one record a dead
// attempt left, under its key, with the output it saved (no model call
// after the first).
func (rg *rig) sweepFinishes(t *testing.T) {
	t.Helper()
	k := rg.onlyKey(t)
	rep, err := rg.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{})
	if err != nil || rep.Redriven != 1 || len(rep.Results) != 1 || rep.Results[0].Status != "SUCCEEDED" ||
		rep.Results[0].IdempotencyKey != k {
		t.Fatalf("sweep of %s: %+v %v", k, rep, err)
	}
	if rec, err := rg.store.Get(context.Background(), k); err != nil || rec.Status != driver.StatusSucceeded || rg.m.calls.Load() != 1 {
		t.Fatalf("record %+v %v, model calls %d", rec, err, rg.m.calls.Load())
	}
}

// Under KEY_FALLBACK=fingerprint an explicit idempotency_key still names the
// action when only operation is missing: a copy whose data differs elsewhere
// (a producer's timestamp) is the same task, and a re-drive finds the same
// key after the setting is gone. The default still refuses the event
// (operation is required).
func TestKeyFallbackKeepsAnExplicitKey(t *testing.T) {
	data := func(sentAt string) map[string]any {
		return map[string]any{"tenant_id": "acme", "task_type": "summarize", "idempotency_key": "order-7",
			"sent_at": sentAt, "input": map[string]any{"content": "explicit"}}
	}
	strict := newRig(t, &model{})
	if o := outcome(t, strict.p.Handle(context.Background(), taskBody("ev-1", data("t1"), ""), handler.Meta{RequestID: "r1"})); o.ErrorType != "invalid_request" {
		t.Fatalf("strict: %+v", o)
	}
	m := &model{}
	rg := newRig(t, m)
	rg.p.KeyFallback = true
	first := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-1", data("t1"), ""), handler.Meta{RequestID: "r1"}))
	again := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-2", data("t2"), ""), handler.Meta{RequestID: "r2"}))
	if first.Status != "SUCCEEDED" || again.Decision != "REPEAT_DONE" || again.IdempotencyKey != first.IdempotencyKey ||
		m.calls.Load() != 1 {
		t.Fatalf("first %+v, again %+v, calls %d", first, again, m.calls.Load())
	}
	dash := data("t3")
	dash["operation"] = "-" // a real operation: another payload than none
	if o := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-3", dash, ""), handler.Meta{RequestID: "r3"})); o.ErrorType != "payload_mismatch" {
		t.Fatalf("operation \"-\": %+v", o)
	}
	redrive(t, data("t1"), false)
}

// onlyKey is the key of the one record the sweeper would look at.
func (rg *rig) onlyKey(t *testing.T) string {
	t.Helper()
	recs, err := rg.store.Candidates(context.Background(), 10, 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("candidates %+v %v", recs, err)
	}
	return recs[0].Key
}
