package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/llm"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/internal/dev/proc"
	"github.com/idemgate/idemgate/ossresult"
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
		{"succeeded, finish failed", driver.Record{Status: driver.StatusSucceeded, Finish: driver.FinishFailed, UpdatedAt: at}, "open"},
		{"a tombstone", driver.Record{Status: driver.StatusSucceeded, Tombstone: true, UpdatedAt: at}, "2026-12-29T23:05:12Z"},
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
	rg.p.Retention = handler.Retention{Records: retention, Stats: time.Hour, Tombstones: time.Hour}
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
	if want := ins.Record.UpdatedAt.Add(time.Hour).UTC().Format(time.RFC3339); err != nil || ins.DedupWindowEnds != want {
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
	if ins, err := rg.p.Inspect(ctx, o.IdempotencyKey, handler.Meta{}); err != nil || !ins.Record.Tombstone {
		t.Fatalf("the purged key: %+v %v, want its tombstone", ins.Record, err)
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

// orderData is a task under the explicit idempotency_key order-7.
func orderData(content string) map[string]any {
	d := summarizeData(content)
	d["idempotency_key"] = "order-7"
	return d
}

// purgeAged lets the finished records age past rt.Records and purges twice
// (the second purge takes the tombstones the first made, when rt lets it).
func purgeAged(t *testing.T, rg *rig, rt handler.Retention) {
	t.Helper()
	ctx := context.Background()
	rg.p.Retention = rt
	if err := rg.p.Engine.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(rt.Records + 200*time.Millisecond)
	for range 2 {
		if _, err := rg.p.Purge(ctx, handler.PurgeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// expireObject removes an object of the local result store, as the
// bucket's lifecycle rule does.
func expireObject(t *testing.T, rg *rig, key string) {
	t.Helper()
	p := filepath.Join(rg.dir, "results", filepath.FromSlash(key))
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(p + ".meta.json")
}

// Issue 20, cases 1 and 2: a key purged while its objects remain keeps a
// tombstone. A re-send of the same payload is answered from it (REPEAT_DONE,
// the first result_ref, no model call); another document under the reused
// key is refused FINAL payload_mismatch, its FC retry too; a replay of the
// purged key is refused and changes nothing.
func TestAKeyResentAfterPurgeIsAnsweredFromItsTombstone(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		ctx := context.Background()
		rg := newRigOn(t, store, dir, &model{}, idempotency.WithMaxAttempts(2))
		a := outcome(t, rg.p.Handle(ctx, taskBody("ev-a", orderData("document A"), ""), handler.Meta{RequestID: "ra"}))
		if a.Status != "SUCCEEDED" {
			t.Fatalf("A: %+v", a)
		}
		purgeAged(t, rg, handler.Retention{Records: 300 * time.Millisecond, Tombstones: time.Hour})
		before, err := store.Get(ctx, a.IdempotencyKey)
		if err != nil || !before.Tombstone {
			t.Fatalf("after the purge: %+v %v, want a tombstone", before, err)
		}

		r := rg.p.Handle(ctx, taskBody("ev-a2", orderData("document A"), ""), handler.Meta{RequestID: "ra2"})
		if o := outcome(t, r); r.Status != 200 || o.Decision != "REPEAT_DONE" || o.ResultRef != a.ResultRef || rg.m.calls.Load() != 1 {
			t.Fatalf("a re-send of A: %d %s, model calls %d", r.Status, r.Body, rg.m.calls.Load())
		}
		for try := range 2 {
			r := rg.p.Handle(ctx, taskBody("ev-b", orderData("document B"), ""), handler.Meta{RequestID: "rb", RetryCount: try})
			if o := outcome(t, r); r.Status != 404 || o.ErrorType != "payload_mismatch" || o.ResultRef == a.ResultRef || rg.m.calls.Load() != 1 {
				t.Fatalf("B reusing order-7, try %d: %d %s, model calls %d", try, r.Status, r.Body, rg.m.calls.Load())
			}
		}
		for _, expired := range []bool{false, true} { // its input.json there, and gone: it is the tombstone that says why
			if expired {
				k, _ := ossresult.InputKey(a.IdempotencyKey)
				expireObject(t, rg, k)
			}
			if _, err := rg.p.ReplayKey(ctx, a.IdempotencyKey, handler.ReplayRequest{Reason: "r", Operator: "op"}, handler.Meta{}); !errors.Is(err, driver.ErrPurged) {
				t.Fatalf("a replay of the purged key (input expired: %v): %v", expired, err)
			}
		}
		if after, err := store.Get(ctx, a.IdempotencyKey); err != nil || after.Fence != before.Fence || !after.UpdatedAt.Equal(before.UpdatedAt) ||
			after.Status != before.Status || after.ResultRef != before.ResultRef {
			t.Fatalf("the tombstone changed: %+v → %+v (%v)", before, after, err)
		}
	})
}

// Issue 20, case 1, in depth: after the tombstone went while A's objects
// stayed (a bucket keeping them longer than the purge keeps tombstones), B
// reusing order-7 never takes A's objects as its own: A's input.json is
// refused FINAL foreign_objects before anything runs, and, where it expired,
// A's attempt-001/output.json is passed over (B's own attempt runs and its
// publish meets A's approved result: FINAL result_conflict, never A's
// summary as B's answer).
func TestObjectsOfAPreviousLifeOfAKeyAreNeverTaken(t *testing.T) {
	for _, c := range []struct {
		name        string
		expireInput bool
		want        string
		calls       int32
	}{
		{"A's input.json met at save", false, "foreign_objects", 1},
		{"A's output met by the retry", true, "result_conflict", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
				ctx := context.Background()
				m := &model{fn: func(_ context.Context, n int32, _ llm.Request) (llm.Response, error) {
					if n == 2 { // B's first attempt: the provider is busy
						return llm.Response{}, idempotency.Retryable("rate_limited", errors.New("429"))
					}
					return llm.Response{Text: fmt.Sprintf("summary %d", n)}, nil
				}}
				rg := newRigOn(t, store, dir, m, idempotency.WithMaxAttempts(2))
				a := outcome(t, rg.p.Handle(ctx, taskBody("ev-a", orderData("document A"), ""), handler.Meta{RequestID: "ra"}))
				purgeAged(t, rg, handler.Retention{Records: 300 * time.Millisecond, Tombstones: 300 * time.Millisecond})
				if _, err := store.Get(ctx, a.IdempotencyKey); !errors.Is(err, driver.ErrNotFound) {
					t.Fatalf("the tombstone did not go: %v", err)
				}
				if c.expireInput {
					k, _ := ossresult.InputKey(a.IdempotencyKey)
					expireObject(t, rg, k)
				}
				var o handler.Outcome
				for try := range 2 {
					o = outcome(t, rg.p.Handle(ctx, taskBody("ev-b", orderData("document B"), ""), handler.Meta{RequestID: "rb", RetryCount: try}))
					if o.Status == "SUCCEEDED" && o.ErrorType == "" || o.ResultRef == a.ResultRef {
						t.Fatalf("B, try %d, was answered with A's result: %+v", try, o)
					}
				}
				if o.ErrorType != c.want || rg.m.calls.Load() != c.calls {
					t.Fatalf("B's retry: %+v, model calls %d; want %s after %d", o, rg.m.calls.Load(), c.want, c.calls)
				}
				if ph := derive(t, orderData("document A")).PayloadHash; strings.Contains(o.ErrorMessage, ph) {
					t.Fatalf("B's answer names A's payload hash %s: %s", ph, o.ErrorMessage) // design §14.9
				}
			})
		})
	}
}

// Issue 20, case 6: a pending finish whose input.json expired ends: the
// sweeper records it FAILED objects_expired at error level (the alert) and
// lists it no more, a delivery is answered that failure, and replay --key
// says why and changes nothing.
func TestAPendingFinishWhoseObjectsExpiredEnds(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		ctx := context.Background()
		rg := newRigOn(t, store, dir, &model{}, idempotency.WithLease(200*time.Millisecond))
		logs := &proc.Buffer{}
		rg.p.Log = slog.New(slog.NewJSONHandler(logs, nil))
		n := &notifier{}
		n.fail.Store(1000) // the receiver is down: the finish stays pending
		rg.p.Notify = n
		data := summarizeData("its input expires")
		if r := rg.p.Handle(ctx, taskBody("ev-1", data, "https://hook.test/x"), handler.Meta{RequestID: "r1"}); r.Status != 404 {
			t.Fatalf("first delivery: %d %s", r.Status, r.Body)
		}
		k := derive(t, data).Key
		inKey, _ := ossresult.InputKey(k)
		expireObject(t, rg, inKey)
		time.Sleep(250 * time.Millisecond)
		rep, err := rg.p.Sweep(ctx, handler.Meta{}, handler.SweepOptions{})
		if err != nil || rep.Scanned != 1 || len(rep.Results) != 1 || rep.Results[0].ErrorType != "objects_expired" {
			t.Fatalf("sweep: %+v %v", rep, err)
		}
		rec, err := store.Get(ctx, k)
		if err != nil || rec.Finish != driver.FinishFailed || rec.LastErrorCode != "objects_expired" {
			t.Fatalf("record %+v %v", rec, err)
		}
		if !hasLine(logs.String(), `"level":"ERROR"`, `"errorType":"objects_expired"`) {
			t.Fatalf("no error-level line for the alert:\n%s", logs.String())
		}
		if rep, err := rg.p.Sweep(ctx, handler.Meta{}, handler.SweepOptions{}); err != nil || rep.Scanned != 0 {
			t.Fatalf("the next sweep lists it again: %+v %v", rep, err)
		}
		r := rg.p.Handle(ctx, taskBody("ev-1", data, "https://hook.test/x"), handler.Meta{RequestID: "r1", RetryCount: 1})
		if o := outcome(t, r); r.Status != 404 || o.ErrorType != "objects_expired" || *o.Retryable {
			t.Fatalf("FC's retry: %d %s", r.Status, r.Body)
		}
		_, err = rg.p.ReplayKey(ctx, k, handler.ReplayRequest{Reason: "r", Operator: "op"}, handler.Meta{})
		if err == nil || !strings.Contains(err.Error(), "objects_expired") || !strings.Contains(err.Error(), "nothing was changed") {
			t.Fatalf("replay --key: %v", err)
		}
		if after, _ := store.Get(ctx, k); after.Fence != rec.Fence || after.Finish != driver.FinishFailed {
			t.Fatalf("the replay changed the record: %+v", after)
		}
	})
}

// hasLine reports whether one line of logs holds every part.
func hasLine(logs string, parts ...string) bool {
	for _, line := range strings.Split(logs, "\n") {
		ok := line != ""
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// Issue 20, case 1, the sweeper's side: B's delivery reusing order-7 claimed
// and died before saving its input, after A's tombstone went while A's
// input.json stayed. The sweeper must not re-drive A's input under B's
// record: it records FAILED_FINAL foreign_objects, with no model call.
func TestTheSweeperNeverRedrivesAPreviousLifesInput(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		ctx := context.Background()
		rg := newRigOn(t, store, dir, &model{}, idempotency.WithLease(200*time.Millisecond))
		a := outcome(t, rg.p.Handle(ctx, taskBody("ev-a", orderData("document A"), ""), handler.Meta{RequestID: "ra"}))
		purgeAged(t, rg, handler.Retention{Records: 300 * time.Millisecond, Tombstones: 300 * time.Millisecond})
		b := derive(t, orderData("document B"))
		if _, l, err := rg.p.Engine.Claim(ctx, idempotency.ClaimRequest{Key: b.Key, PayloadHash: b.PayloadHash, Owner: "rb", Try: 0}); err != nil || l == nil {
			t.Fatalf("B's claim: %v", err)
		} // … and B's instance dies before saving its input.json.
		time.Sleep(250 * time.Millisecond)
		rep, err := rg.p.Sweep(ctx, handler.Meta{}, handler.SweepOptions{})
		if err != nil || len(rep.Results) != 1 || rep.Results[0].ErrorType != "foreign_objects" || rep.Results[0].ResultRef == a.ResultRef {
			t.Fatalf("sweep: %+v %v", rep, err)
		}
		if rec, _ := store.Get(ctx, b.Key); rec.Status != driver.StatusFailedFinal || rec.LastErrorCode != "foreign_objects" || rg.m.calls.Load() != 1 {
			t.Fatalf("B's record %s %s, model calls %d", rec.Status, rec.LastErrorCode, rg.m.calls.Load())
		}
	})
}
