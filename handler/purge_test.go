package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
)

func TestDedupWindowEnds(t *testing.T) {
	at := time.Date(2026, 11, 30, 7, 5, 12, 0, time.FixedZone("CST", 8*3600))
	const month = 30 * 24 * time.Hour
	for _, c := range []struct {
		name string
		rec  driver.Record
		want string
	}{
		{"succeeded", driver.Record{Status: driver.StatusSucceeded, UpdatedAt: at}, "2026-12-29T23:05:12Z"},
		{"succeeded, finish done", driver.Record{Status: driver.StatusSucceeded, Finish: driver.FinishDone, UpdatedAt: at}, "2026-12-29T23:05:12Z"},
		{"succeeded, finish failed", driver.Record{Status: driver.StatusSucceeded, Finish: driver.FinishFailed, UpdatedAt: at}, "2026-12-29T23:05:12Z"},
		{"failed final", driver.Record{Status: driver.StatusFailedFinal, UpdatedAt: at}, "2026-12-29T23:05:12Z"},
		{"succeeded, finish pending", driver.Record{Status: driver.StatusSucceeded, Finish: driver.FinishPending, UpdatedAt: at}, "open"},
		{"running", driver.Record{Status: driver.StatusRunning, UpdatedAt: at}, "open"},
		{"failed retryable", driver.Record{Status: driver.StatusFailedRetryable, UpdatedAt: at}, "open"},
		{"received", driver.Record{Status: driver.StatusReceived, UpdatedAt: at}, "open"},
		{"a step record", driver.Record{Status: driver.StatusSucceeded, ParentKey: "k", UpdatedAt: at}, "open"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := handler.DedupWindowEnds(c.rec, month); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

// The timer with payload "purge" deletes what outlived the pipeline's
// retention and answers the counts; inspect showed when the window would
// end, and a key still running is "open" and stays.
func TestPurgeTimer(t *testing.T) {
	rg := newRig(t, &model{})
	const retention = 1500 * time.Millisecond
	rg.p.Retention = handler.Retention{Records: retention, Stats: time.Hour}
	ctx := context.Background()
	o := outcome(t, rg.p.Handle(ctx, event("summarize", map[string]any{"content": "old news"}), handler.Meta{RequestID: "r1"}))
	if err := rg.p.Engine.Flush(ctx); err != nil { // its finish, marked done in the next batch
		t.Fatal(err)
	}
	running := "7a1f0000000000000000000000000000000000000000000000000000000000aa"
	if _, _, err := rg.p.Engine.Claim(ctx, idempotency.ClaimRequest{Key: running, Owner: "w", PayloadHash: "ph", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	ins, err := rg.p.Inspect(ctx, o.IdempotencyKey, handler.Meta{})
	if want := ins.Record.UpdatedAt.Add(retention).UTC().Format(time.RFC3339); err != nil || ins.DedupWindowEnds != want {
		t.Fatalf("dedup_window_ends %q (%v), want %s", ins.DedupWindowEnds, err, want)
	}
	if ins, err := rg.p.Inspect(ctx, running, handler.Meta{}); err != nil || ins.DedupWindowEnds != handler.DedupWindowOpen {
		t.Fatalf("running: dedup_window_ends %q (%v)", ins.DedupWindowEnds, err)
	}
	time.Sleep(retention + 200*time.Millisecond)

	r := rg.p.Handle(ctx, []byte(`{"triggerTime":"2026-11-30T19:00:00Z","triggerName":"purge","payload":"purge"}`), handler.Meta{RequestID: "t1"})
	var rep handler.PurgeReport
	if err := json.Unmarshal(r.Body, &rep); r.Status != 200 || err != nil {
		t.Fatalf("timer: %d %s", r.Status, r.Body)
	}
	if rep.Records != 1 || rep.Steps != 0 || rep.More || rep.Batches != 1 || rep.OlderThan != retention.String() {
		t.Fatalf("report %s", r.Body)
	}
	if _, err := rg.p.Inspect(ctx, o.IdempotencyKey, handler.Meta{}); !errors.Is(err, handler.ErrUnknownKey) {
		t.Fatalf("the purged key: %v", err)
	}
	if _, err := rg.store.Get(ctx, running); err != nil {
		t.Fatalf("the running key: %v", err)
	}

	rg.p.Retention = handler.Retention{}
	r = rg.p.Handle(ctx, []byte(`{"triggerTime":"2026-11-30T19:00:00Z","triggerName":"purge","payload":"purge"}`), handler.Meta{RequestID: "t2"})
	if o := outcome(t, r); r.Status != 404 || o.ErrorType != "invalid_request" {
		t.Fatalf("a purge without a retention: %d %s", r.Status, r.Body)
	}
}
