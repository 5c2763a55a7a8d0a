package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/deploy/logq"
	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/internal/dev/proc"
	"github.com/idemgate/idemgate/internal/logx"
	"github.com/idemgate/idemgate/ossresult"
)

// refusingHook refuses every notification for good (410) until it is told
// to accept; it counts what it accepted, by business key.
type refusingHook struct {
	refuse atomic.Bool
	mu     sync.Mutex
	got    map[string]int
}

func (h *refusingHook) Post(_ context.Context, _, key, _ string, _ []byte) error {
	if h.refuse.Load() {
		return idempotency.Final("notify_rejected", errors.New("the receiver answered 410"))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got[key]++
	return nil
}

// within waits for ch to close, failing the test after a minute (a step
// that never came: the scenario did not happen as written).
func within(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("waited a minute for %s", what)
	}
}

// logLines are the JSON lines of out, as the logstore indexes them.
func logLines(out string) []logq.Line {
	var lines []logq.Line
	for _, s := range strings.Split(out, "\n") {
		var line logq.Line
		if json.Unmarshal([]byte(s), &line) == nil {
			lines = append(lines, line)
		}
	}
	return lines
}

// A finish that fails FINAL after its delivery was acknowledged leaves no
// dead letter (issue 38; docs/operations.md, "Finish failures"): FC's retry
// of a holder that died after publishing meets the sweeper's live finish and
// is acknowledged, and the sweeper's notification is then refused for good.
// What the operator has is the finish-failed alert and `main inspect`; they
// carry everything the replay needs: the alert fires on the `finish failed`
// line, whose idempotency_key (what the runbook's query lists) alone, once
// the receiver accepts again, replays the finish to its end with `replay
// --key` — one notification, the result kept, no dead letter read.
func TestAFinishFailedAfterItsDeliveryWasAcknowledgedReplaysFromTheAlert(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		ctx := context.Background()
		rg := newRigOn(t, store, dir, &model{}, idempotency.WithLease(time.Second))
		var logs proc.Buffer
		rg.p.Log = logx.New(&logs, slog.LevelInfo, nil) // the function's logger: the context's fields on every line
		hook := &refusingHook{got: map[string]int{}}
		hook.refuse.Store(true)
		rg.p.Notify = hook
		dead, sweeperHolds, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
		var faults atomic.Int32
		rg.p.Fault = func(point string) {
			if point != "after_publish" {
				return
			}
			switch faults.Add(1) {
			case 1: // r1's try dies after publishing: nothing of it runs again
				close(dead)
				select {}
			case 2: // the sweeper holds the finish; r1's retry comes now
				close(sweeperHolds)
				<-release
			}
		}
		data := summarizeData("a finish refused after its delivery was acknowledged")
		d := derive(t, data)
		body := taskBody("ev-1", data, "https://hook.test/done")
		go rg.p.Handle(ctx, body, handler.Meta{RequestID: "r1", RetryCount: 0})
		within(t, dead, "r1's try to publish")
		time.Sleep(1100 * time.Millisecond) // the dead holder's finish lease ends
		swept := make(chan error, 1)
		go func() {
			_, err := rg.p.Sweep(ctx, handler.Meta{}, handler.SweepOptions{})
			swept <- err
		}()
		within(t, sweeperHolds, "the sweeper to take the finish up")
		if r := rg.p.Handle(ctx, body, handler.Meta{RequestID: "r1", RetryCount: 1}); r.Status != 200 {
			t.Fatalf("FC's retry beside the sweeper's live finish: %d %s; want it acknowledged", r.Status, r.Body)
		}
		close(release)
		select {
		case err := <-swept:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(time.Minute):
			t.Fatal("the sweep did not end")
		}
		if rec, _ := store.Get(ctx, d.Key); rec.Finish != driver.FinishFailed || rec.LastErrorCode != "notify_rejected" {
			t.Fatalf("record finish %q %q: want FAILED notify_rejected", rec.Finish, rec.LastErrorCode)
		}

		// The alert fires; its runbook's query reads K (and why) off the line.
		lines := logLines(logs.String())
		var alert logq.Alert
		for _, a := range logq.Alerts() {
			if a.Name == "finish-failed" {
				alert = a
			}
		}
		if rows, err := alert.Query.Eval(lines); err != nil || !alert.Fires(rows) {
			t.Fatalf("alert finish-failed on %d lines: %+v %v; want it to fire", len(lines), rows, err)
		}
		var key string
		for _, l := range lines {
			if l.Text("msg") == logq.MsgFinishFailed && l.Text("errorType") == "notify_rejected" {
				key = l.Text("idempotency_key")
			}
		}
		if key != d.Key {
			t.Fatalf("the finish failed line names key %q, want %s", key, d.Key)
		}
		// inspect shows the failure and the stored input the replay reads.
		ins, err := rg.p.Inspect(ctx, key, handler.Meta{})
		inputKey, _ := ossresult.InputKey(key)
		if err != nil || ins.Record.Finish != driver.FinishFailed || ins.Record.LastErrorCode != "notify_rejected" ||
			ins.Objects[inputKey] == "" {
			t.Fatalf("inspect: %+v %v; want the failed finish, its code and input.json", ins, err)
		}

		hook.refuse.Store(false) // the receiver is fixed
		o, err := rg.p.ReplayKey(ctx, key, handler.ReplayRequest{Reason: "receiver fixed", Operator: "op"}, handler.Meta{})
		if err != nil || o.ErrorType != "" || o.Status != string(driver.StatusSucceeded) {
			t.Fatalf("replay --key from the alert: %+v %v", o, err)
		}
		hook.mu.Lock()
		posts := hook.got[key] // the notify client sends it as Idempotency-Key K:notify
		hook.mu.Unlock()
		rec, _ := store.Get(ctx, key)
		if posts != 1 || rec.Finish != driver.FinishDone || rec.ResultRef != ins.Record.ResultRef || rec.Attempt != 1 {
			t.Fatalf("after the replay: %d notifications, finish %q, result %s (was %s), attempt %d; want one, DONE, "+
				"the result kept", posts, rec.Finish, rec.ResultRef, ins.Record.ResultRef, rec.Attempt)
		}
	})
}
