package handler_test

// Regression tests of the recovery paths, one per reviewed interleaving:
// each reproduces the case as it was reported and holds on the embedded
// store and on MySQL (and, where Redis takes part, with Redis). The
// recovery explorer (handler/explore) searches the whole class.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aliyun/fc-runtime-go-sdk/fc/messages"
	"github.com/aliyun/fc-runtime-go-sdk/fccontext"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/customruntime"
	"github.com/idemgate/idemgate/handler/go1"
	"github.com/idemgate/idemgate/handler/llm"
	"github.com/idemgate/idemgate/handler/notify"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/keys"
	"github.com/idemgate/idemgate/internal/dev/testenv"
	"github.com/idemgate/idemgate/ossresult"
)

// backoff is the retry back-off of rigs whose tests retry a retryable
// failure from another delivery (the sweeper's grace, shortened).
const backoff = 50 * time.Millisecond

// onStores runs fn on the embedded store and on MySQL (a database of its
// own: the sweeper scans whole tables).
func onStores(t *testing.T, fn func(t *testing.T, store driver.Maintainer, dir string)) {
	t.Run("embedded", func(t *testing.T) {
		dir := t.TempDir()
		s, err := boltstore.Open(filepath.Join(dir, "state"), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		fn(t, s, dir)
	})
	t.Run("mysql", func(t *testing.T) { fn(t, testenv.FreshMySQLStore(t), t.TempDir()) })
}

// taskBody is a task event; notifyURL "" leaves notify out.
func taskBody(id string, data map[string]any, notifyURL string) []byte {
	if notifyURL != "" {
		data["notify"] = map[string]any{"url": notifyURL}
	}
	b, _ := json.Marshal(map[string]any{"id": id, "source": "test", "specversion": "1.0", "type": "idemgate:Task:Submitted",
		"datacontenttype": "application/json", "data": data})
	return b
}

func summarizeData(content string) map[string]any {
	return map[string]any{"tenant_id": "t1", "task_type": "summarize", "operation": "summarize",
		"input": map[string]any{"content": content}}
}

func derive(t *testing.T, data map[string]any) keys.Derived {
	t.Helper()
	in, _ := json.Marshal(data["input"])
	f := keys.Fields{TenantID: data["tenant_id"].(string), TaskType: data["task_type"].(string),
		Operation: data["operation"].(string), Input: in}
	if v, ok := data["idempotency_key"].(string); ok {
		f.IdempotencyKey = v
	}
	if v, ok := data["input_version"].(string); ok {
		f.InputVersion = v
	}
	d, err := keys.Derive(f)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// failOnce fails, once, the store call that keeps the books of a
// notification after the completion: the finish's end (before the finish
// moved onto the record, the notify step's claim; that version of this test
// failed the claim).
type failOnce struct {
	driver.Maintainer
	key  string
	done atomic.Bool
}

var errDropped = errors.New("driver: bad connection")

func (f *failOnce) Finish(ctx context.Context, key, owner string, try int, fence int64, fl *driver.Failure) error {
	if key == f.key && f.done.CompareAndSwap(false, true) {
		return errDropped
	}
	return f.Maintainer.Finish(ctx, key, owner, try, fence, fl)
}

// Case 1: the sweeper completes a task whose stored input asks for notify,
// and the write that keeps the books of the notification fails once: the
// notification is still sent, or the sweeper lists the key until it is.
func TestNotifyIntentSurvivesAFailedWriteAfterTheSweeperCompletes(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		m := &model{fn: func(_ context.Context, n int32, _ llm.Request) (llm.Response, error) {
			if n == 1 {
				return llm.Response{}, idempotency.Retryable("rate_limited", errors.New("429"))
			}
			return llm.Response{Text: "summary"}, nil
		}}
		data := summarizeData("notify after a sweep")
		d := derive(t, data)
		fo := &failOnce{Maintainer: store, key: d.Key}
		rg := newRigOn(t, fo, dir, m, idempotency.WithLease(300*time.Millisecond))
		n := &notifier{}
		rg.p.Notify = n
		body := taskBody("ev-1", data, "https://hook.test/x")
		if r := rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1", RetryCount: 0}); r.Status != 404 {
			t.Fatalf("try 0: %s", r.Body)
		}
		for range 4 { // the timer, a minute apart; a held finish is taken up after its lease
			if _, err := rg.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(350 * time.Millisecond)
		}
		if !fo.done.Load() {
			t.Fatal("the bookkeeping write never failed: the test did not test anything")
		}
		rec, _ := store.Get(context.Background(), d.Key)
		if rec.Status != driver.StatusSucceeded || n.posts.Load() == 0 {
			t.Fatalf("record %s, notifications %d", rec.Status, n.posts.Load())
		}
	})
}

// diesBeforeItsInput claims data's key as FC request r1's first try does
// and dies before saving input.json; it returns once the claim's lease
// (rg's, 200 ms) has ended.
func diesBeforeItsInput(t *testing.T, rg *rig, data map[string]any) keys.Derived {
	t.Helper()
	d := derive(t, data)
	if _, l, err := rg.p.Engine.Claim(context.Background(), idempotency.ClaimRequest{Key: d.Key, PayloadHash: d.PayloadHash,
		Owner: "r1", Try: 0}); err != nil || l == nil {
		t.Fatalf("claim: %v", err)
	} // … and the process dies here.
	time.Sleep(250 * time.Millisecond)
	return d
}

// Case 2: a delivery claims and dies before saving input.json; the sweeper
// finds the expired claim before FC's retry (which, for a hung instance,
// comes after the function timeout). It must leave the key to that retry.
func TestSweeperLeavesACrashedDeliveryToFCsRetry(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		rg := newRigOn(t, store, dir, &model{}, idempotency.WithLease(200*time.Millisecond))
		data := summarizeData("crashed before its input")
		d := diesBeforeItsInput(t, rg, data)
		rep, err := rg.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rec, _ := store.Get(context.Background(), d.Key); rec.Status == driver.StatusFailedFinal {
			t.Fatalf("the sweeper dead-lettered a delivery FC still retries: %+v", rep)
		}
		if rep.Deferred != 1 {
			t.Fatalf("report %+v: want the record set aside, and said so", rep)
		}
		o := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-1", data, ""), handler.Meta{RequestID: "r1", RetryCount: 1}))
		if o.Status != "SUCCEEDED" {
			t.Fatalf("FC's retry: %+v", o)
		}
	})
}

// The input horizon is measured on the store's clock, which stamped the
// record: with the sweeper's clock two hours ahead of it, a delivery that
// died before saving its input a moment ago is still left to FC's retry,
// not given up FINAL as if it were two hours old.
func TestSweeperReadsTheInputHorizonOnTheStoresClock(t *testing.T) {
	rg := newRigClock(t, behind(2*time.Hour), &model{}, idempotency.WithLease(200*time.Millisecond))
	d := diesBeforeItsInput(t, rg, summarizeData("crashed before its input, clocks apart"))
	rep, err := rg.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rec, _ := rg.store.Get(context.Background(), d.Key); rec.Status == driver.StatusFailedFinal || rep.Deferred != 1 {
		t.Fatalf("record %s %s, report %+v: want it set aside for FC's retry", rec.Status, rec.LastErrorCode, rep)
	}
}

// unreadInput answers input.json not found the first time it is read, and
// an object store that does not answer after that.
type unreadInput struct {
	handler.ResultStore
	reads atomic.Int32
}

func (u *unreadInput) Get(ctx context.Context, key string) ([]byte, ossresult.Meta, error) {
	if strings.HasSuffix(key, "/input.json") && u.reads.Add(1) > 1 {
		return nil, ossresult.Meta{}, idempotency.Retryable("temporary_unavailable", errors.New("oss 503"))
	}
	return u.ResultStore.Get(ctx, key)
}

// A record past the input horizon is given up only when its input is known
// missing: if the object store does not answer the check made after the
// takeover, the record stays retryable and a later sweep decides.
func TestSweeperGivesUpOnlyAnInputKnownMissing(t *testing.T) {
	var ahead atomic.Int64
	rg := newRigClock(t, func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }, &model{},
		idempotency.WithLease(200*time.Millisecond))
	base, _ := rg.p.Results(context.Background(), handler.Credentials{})
	rg.p.Results = func(context.Context, handler.Credentials) (handler.ResultStore, error) {
		return &unreadInput{ResultStore: base}, nil
	}
	d := diesBeforeItsInput(t, rg, summarizeData("its input unread"))
	ahead.Store(int64(2 * time.Hour)) // the store's clock: two hours on, past the input horizon
	rep, err := rg.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rec, _ := rg.store.Get(context.Background(), d.Key); rec.Status != driver.StatusFailedRetryable || rec.LastErrorCode != "input_unread" {
		t.Fatalf("record %s %s, report %+v: want it left retryable", rec.Status, rec.LastErrorCode, rep)
	}
}

// Case 3: A (explicit key order-42) fails FINAL; B reuses the key with
// another input, is refused payload_mismatch and dead-letters. Replaying B's
// dead letter must change nothing of A's record, and say why.
func TestReplayOfAMismatchedDeadLetterChangesNothing(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		m := &model{fn: func(context.Context, int32, llm.Request) (llm.Response, error) {
			return llm.Response{}, idempotency.Final("policy_rejected", errors.New("content policy"))
		}}
		rg := newRigOn(t, store, dir, m)
		a, b := summarizeData("document A"), summarizeData("document B")
		a["idempotency_key"], b["idempotency_key"] = "order-42", "order-42"
		da, db := derive(t, a), derive(t, b)
		rg.p.Handle(context.Background(), taskBody("ev-a", a, ""), handler.Meta{RequestID: "ra"})
		if o := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-b", b, ""), handler.Meta{RequestID: "rb"})); o.ErrorType != "payload_mismatch" {
			t.Fatalf("B: %+v", o)
		}
		before, _ := store.Get(context.Background(), da.Key)
		outs, err := rg.p.ReplayDLQ(context.Background(), taskBody("ev-b", b, ""), handler.ReplayRequest{Reason: "r", Operator: "op"}, handler.Meta{})
		if err != nil || len(outs) != 1 || outs[0].ErrorType != "payload_mismatch" ||
			!strings.Contains(outs[0].ErrorMessage, da.PayloadHash) || !strings.Contains(outs[0].ErrorMessage, db.PayloadHash) {
			t.Fatalf("replay of B: %+v %v", outs, err)
		}
		after, _ := store.Get(context.Background(), da.Key)
		if after.Status != before.Status || after.Fence != before.Fence || after.Attempt != before.Attempt {
			t.Fatalf("A's record changed: %s@%d → %s@%d", before.Status, before.Fence, after.Status, after.Fence)
		}
		if rps, _ := store.Replays(context.Background(), da.Key); len(rps) != 0 {
			t.Fatalf("a refused replay was audited against A: %+v", rps)
		}
		if _, err := rg.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{}); err != nil {
			t.Fatal(err)
		}
		if m.calls.Load() != 1 {
			t.Fatalf("model calls %d: A's FINAL task ran again", m.calls.Load())
		}
	})
}

// Case 4: records whose input.json was never saved (an object-store outage)
// are older than a task the sweeper can re-drive; with a limit of 2 they must
// not hold the head of the queue for an hour.
func TestSweeperIsNotHeldByRecordsWithoutInput(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		rg := newRigOn(t, store, dir, &model{}, idempotency.WithRetryBackoff(backoff))
		base, _ := rg.p.Results(context.Background(), handler.Credentials{})
		flaky := &flakyInput{ResultStore: base}
		flaky.fails.Store(2)
		rg.p.Results = func(context.Context, handler.Credentials) (handler.ResultStore, error) { return flaky, nil }
		for i := range 2 {
			body := taskBody(fmt.Sprintf("ev-x%d", i), summarizeData(fmt.Sprintf("no input %d", i)), "")
			if o := outcome(t, rg.p.Handle(context.Background(), body, handler.Meta{RequestID: fmt.Sprintf("x%d", i)})); o.Status != "FAILED_RETRYABLE" {
				t.Fatalf("x%d: %+v", i, o)
			}
			time.Sleep(5 * time.Millisecond)
		}
		var crash atomic.Bool
		crash.Store(true)
		rg.p.Fault = func(point string) {
			if point == "after_output" && crash.CompareAndSwap(true, false) {
				panic("the worker dies after saving its output")
			}
		}
		y := summarizeData("has its input")
		rg.p.Handle(context.Background(), taskBody("ev-y", y, ""), handler.Meta{RequestID: "y"})
		time.Sleep(2 * backoff) // the sweeper's grace, shortened: a retryable failure's back-off has passed
		var reps []handler.SweepReport
		for range 2 {
			rep, err := rg.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			reps = append(reps, rep)
		}
		if rec, _ := store.Get(context.Background(), derive(t, y).Key); rec.Status != driver.StatusSucceeded {
			t.Fatalf("the re-drivable task is %s after two sweeps: %+v", rec.Status, reps)
		}
		if reps[0].Deferred != 2 {
			t.Fatalf("first sweep %+v: want the two records without input set aside, and counted", reps[0])
		}
	})
}

// gatedFast holds the first Publish of a terminal state until released:
// a duplicate that read the record from the store and stalls before
// mirroring it.
type gatedFast struct {
	driver.FastLayer
	once    sync.Once
	reached chan struct{}
	release chan struct{}
}

func (g *gatedFast) Publish(ctx context.Context, rec driver.Record, left time.Duration) error {
	if rec.Status.Terminal() {
		first := false
		g.once.Do(func() { first = true })
		if first {
			close(g.reached)
			<-g.release
			ctx = context.Background() // the engine's bound ran out meanwhile; the late write goes out anyway
		}
	}
	return g.FastLayer.Publish(ctx, rec, left)
}

// beforeReplayClaim runs hook when a replay first claims through the fast
// layer.
type beforeReplayClaim struct {
	driver.FastLayer
	once sync.Once
	hook func()
}

func (b *beforeReplayClaim) Claim(ctx context.Context, key, owner string, try int, ph string, lease time.Duration) (driver.FastAnswer, error) {
	if strings.HasPrefix(owner, "replay:") {
		b.once.Do(b.hook)
	}
	return b.FastLayer.Claim(ctx, key, owner, try, ph, lease)
}

// Case 5: a duplicate reads FAILED_FINAL from the store (its Redis entry
// expired) and stalls before mirroring it; an operator replays the key; the
// duplicate's late publish must not land over the replay, or Redis answers
// the old final state while the store re-runs the task.
func TestReplayFencesOutALateRedisPublish(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		fast := newFast(t)
		m := &model{fn: func(_ context.Context, n int32, _ llm.Request) (llm.Response, error) {
			if n == 1 {
				return llm.Response{}, idempotency.Final("policy_rejected", errors.New("content policy"))
			}
			return llm.Response{Text: "fixed"}, nil
		}}
		gate := &gatedFast{FastLayer: fast, reached: make(chan struct{}), release: make(chan struct{})}
		published := make(chan struct{})
		hooked := &beforeReplayClaim{FastLayer: fast, hook: func() { close(gate.release); <-published }}
		rg := newRigOn(t, store, dir, m, idempotency.WithFastLayer(hooked), idempotency.WithFastTimeout(5*time.Second))
		data := summarizeData(fmt.Sprintf("replayed %d", time.Now().UnixNano()))
		d := derive(t, data)
		body := taskBody("ev-1", data, "")
		if o := outcome(t, rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1"})); o.Status != "FAILED_FINAL" {
			t.Fatalf("first: %+v", o)
		}
		if err := fast.Forget(context.Background(), d.Key); err != nil { // its entry expired
			t.Fatal(err)
		}
		dup := idempotency.New(store, idempotency.WithFastLayer(gate), idempotency.WithFastTimeout(5*time.Second))
		go func() {
			defer close(published)
			_, _, _ = dup.Claim(context.Background(), idempotency.ClaimRequest{Key: d.Key, PayloadHash: d.PayloadHash, Owner: "d", Try: -1})
		}()
		<-gate.reached
		o, err := rg.p.ReplayKey(context.Background(), d.Key, handler.ReplayRequest{Reason: "policy fixed", Operator: "op"},
			handler.Meta{RetryCount: -1})
		if err != nil || o.Status != "SUCCEEDED" {
			t.Fatalf("replay: %+v %v", o, err)
		}
		res, _, err := rg.p.Engine.Claim(context.Background(), idempotency.ClaimRequest{Key: d.Key, PayloadHash: d.PayloadHash,
			Owner: "later", Try: -1})
		if err != nil || res.Record.Status != driver.StatusSucceeded {
			t.Fatalf("a later duplicate was answered %s by %s", res.Record.Status, res.Source)
		}
	})
}

// Case 6: D1 (notify) saves input.json and dies; D2, the same action
// without notify, takes over and completes. The stored input decides.
func TestDoubleSubmitWithoutNotifyKeepsTheStoredNotify(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		rg := newRigOn(t, store, dir, &model{}, idempotency.WithRetryBackoff(backoff))
		n := &notifier{}
		rg.p.Notify = n
		var die atomic.Bool
		die.Store(true)
		rg.p.Fault = func(point string) {
			if point == "before_steps" && die.CompareAndSwap(true, false) {
				panic("D1 dies after saving its input")
			}
		}
		data := summarizeData("double submit")
		rg.p.Handle(context.Background(), taskBody("ev-1", summarizeData("double submit"), "https://hook.test/x"), handler.Meta{RequestID: "d1"})
		time.Sleep(2 * backoff) // D1's failure (its panic) is retried after its back-off
		o := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-2", data, ""), handler.Meta{RequestID: "d2"}))
		if o.Status != "SUCCEEDED" || n.posts.Load() != 1 {
			t.Fatalf("D2 %+v, notifications %d (the stored input asks for one)", o, n.posts.Load())
		}
	})
}

// Case 7: invocations without a request id (no x-fc-request-id) must not
// take each other's live lease.
func TestInvocationsWithoutARequestIDDoNotShareALease(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		release := make(chan struct{})
		m := &model{fn: func(ctx context.Context, n int32, _ llm.Request) (llm.Response, error) {
			if n == 1 {
				<-release
			}
			return llm.Response{Text: fmt.Sprintf("call %d", n)}, nil
		}}
		rg := newRigOn(t, store, dir, m)
		body := taskBody("ev-1", summarizeData("no request id"), "")
		done := make(chan handler.Reply, 1)
		go func() { done <- rg.p.Handle(context.Background(), body, handler.Meta{RetryCount: -1}) }()
		for m.calls.Load() == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		o := outcome(t, rg.p.Handle(context.Background(), body, handler.Meta{RetryCount: -1}))
		close(release)
		<-done
		if o.Decision != "REPEAT_OTHER" || m.calls.Load() != 1 {
			t.Fatalf("second invocation %+v, model calls %d", o, m.calls.Load())
		}
	})
}

// Exhaustion of a key whose last attempt saved its output and died before
// completing: FC's retry completes from that output, without the model.
func TestLastAttemptThatSavedItsOutputCompletes(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		m := &model{}
		rg := newRigOn(t, store, dir, m, idempotency.WithMaxAttempts(1), idempotency.WithLease(200*time.Millisecond))
		data := summarizeData("salvaged")
		d := derive(t, data)
		if _, l, err := rg.p.Engine.Claim(context.Background(), idempotency.ClaimRequest{Key: d.Key, PayloadHash: d.PayloadHash,
			Owner: "r1", Try: 0}); err != nil || l == nil {
			t.Fatalf("claim: %v", err)
		}
		rs, _ := rg.p.Results(context.Background(), handler.Credentials{})
		in, _ := json.Marshal(map[string]any{"tenant_id": "t1", "task_type": "summarize", "operation": "summarize",
			"input_version": d.InputVersion, "input": data["input"]})
		inKey, _ := ossresult.InputKey(d.Key)
		if _, err := rs.PutOnce(context.Background(), inKey, in, "application/json", ossresult.Meta{IdempotencyKey: d.Key}); err != nil {
			t.Fatal(err)
		}
		out, _ := json.Marshal(handler.Output{IdempotencyKey: d.Key, Attempt: 1, Text: "saved before the crash", PayloadHash: d.PayloadHash})
		outKey, _ := ossresult.AttemptKey(d.Key, 1)
		if _, err := rs.PutOnce(context.Background(), outKey, out, "application/json", ossresult.Meta{IdempotencyKey: d.Key}); err != nil {
			t.Fatal(err)
		} // … and the process dies before completing.
		time.Sleep(250 * time.Millisecond)
		o := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-1", data, ""), handler.Meta{RequestID: "r1", RetryCount: 1}))
		if o.Status != "SUCCEEDED" || o.ErrorType != "" || o.Attempt != 1 || !strings.HasSuffix(o.ResultRef, outKey) || m.calls.Load() != 0 {
			t.Fatalf("retry %+v, model calls %d", o, m.calls.Load())
		}
		approved, _ := ossresult.ApprovedKey(d.Key)
		if b, _, err := rs.Get(context.Background(), approved); err != nil || string(b) != "saved before the crash" {
			t.Fatalf("approved %q %v", b, err)
		}
	})
}

// The same explicit key and input_version with another input is another
// payload: refused, not answered as a duplicate of the first.
func TestSameKeyAndInputVersionWithAnotherInputIsAMismatch(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		rg := newRigOn(t, store, dir, &model{})
		a, b := summarizeData("first input"), summarizeData("second input")
		for _, d := range []map[string]any{a, b} {
			d["idempotency_key"], d["input_version"] = "k-1", "v1"
		}
		if o := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-a", a, ""), handler.Meta{RequestID: "a"})); o.Status != "SUCCEEDED" {
			t.Fatalf("first: %+v", o)
		}
		if o := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-b", b, ""), handler.Meta{RequestID: "b"})); o.ErrorType != "payload_mismatch" {
			t.Fatalf("second: %+v", o)
		}
	})
}

// A stored input that can no longer be prepared (here: it asks for notify,
// and the function no longer has a notifier) must not head every sweep: it
// ends FAILED_FINAL with the reason.
func TestSweeperEndsAStoredInputItCannotPrepare(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		m := &model{fn: func(_ context.Context, n int32, _ llm.Request) (llm.Response, error) {
			if n == 1 {
				return llm.Response{}, idempotency.Retryable("rate_limited", errors.New("429"))
			}
			return llm.Response{Text: "ok"}, nil
		}}
		rg := newRigOn(t, store, dir, m, idempotency.WithRetryBackoff(backoff))
		rg.p.Notify = &notifier{}
		data := summarizeData("asks for notify")
		if o := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-1", data, "https://hook.test/x"), handler.Meta{RequestID: "r1"})); o.Status != "FAILED_RETRYABLE" {
			t.Fatalf("first: %+v", o)
		}
		rg.p.Notify = nil       // redeployed without a notifier
		time.Sleep(2 * backoff) // the sweeper's grace, shortened
		rep, err := rg.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rec, _ := store.Get(context.Background(), derive(t, data).Key)
		if rec.Status != driver.StatusFailedFinal || rec.LastErrorCode != "invalid_request" {
			t.Fatalf("record %s %s after %+v", rec.Status, rec.LastErrorCode, rep)
		}
	})
}

// refusingNotifier is a receiver that refuses every POST FINAL, as a 410
// does (notify_rejected).
type refusingNotifier struct {
	posts  atomic.Int32
	accept atomic.Bool // the receiver fixed
}

func (n *refusingNotifier) Post(context.Context, string, string, string, []byte) error {
	n.posts.Add(1)
	if n.accept.Load() {
		return nil
	}
	return idempotency.Final("notify_rejected", errors.New("the receiver answered 410"))
}

// Issue 20, case 5: a FINAL finish failure reaches the dead-letter queue.
// The first delivery, FC's retry of it and any later delivery all answer
// the FINAL failure (never 200 REPEAT_DONE), with Redis or the local cache
// in front of the store too; the receiver is posted to once; the sweeper
// does not take the finish up; the purge keeps the record.
func TestAFinalFinishFailureReachesTheDeadLetterQueue(t *testing.T) {
	for _, c := range []struct {
		name        string
		fast, cache bool
	}{{"store", false, false}, {"redis", true, false}, {"local cache", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
				ctx := context.Background()
				var opts []idempotency.Option
				var fast driver.FastLayer
				if c.fast {
					fast = newFast(t)
					opts = append(opts, idempotency.WithFastLayer(fast))
				}
				if c.cache {
					opts = append(opts, idempotency.WithLocalCache(100, time.Minute))
				}
				rg := newRigOn(t, store, dir, &model{}, opts...)
				n := &refusingNotifier{}
				rg.p.Notify = n
				data := summarizeData(fmt.Sprintf("a refused notification %d", time.Now().UnixNano())) // a key of its own in the shared Redis
				body := taskBody("ev-1", data, "https://hook.test/x")
				for i, meta := range []handler.Meta{{RequestID: "r1", RetryCount: 0}, {RequestID: "r1", RetryCount: 1},
					{RequestID: "r1", RetryCount: 2}, {RequestID: "r2", RetryCount: 0}, {RequestID: "r3", RetryCount: -1}} {
					r := rg.p.Handle(ctx, body, meta)
					if o := outcome(t, r); r.Status != 404 || o.ErrorType != "notify_rejected" || o.Retryable == nil || *o.Retryable {
						t.Fatalf("delivery %d (%+v): %d %s", i, meta, r.Status, r.Body)
					}
				}
				if n.posts.Load() != 1 {
					t.Fatalf("%d POSTs, want 1", n.posts.Load())
				}
				if fast != nil {
					// A duplicate that read the record before the failure
					// mirrors SUCCEEDED into Redis after it: FC's retry still
					// ends in the dead-letter queue.
					rec, _ := store.Get(ctx, derive(t, data).Key)
					rec.Finish, rec.LastErrorCode, rec.LastError = driver.FinishPending, "", ""
					if err := fast.Publish(ctx, rec, 0); err != nil {
						t.Fatal(err)
					}
					r := rg.p.Handle(ctx, body, handler.Meta{RequestID: "r1", RetryCount: 3})
					if o := outcome(t, r); r.Status != 404 || o.ErrorType != "notify_rejected" {
						t.Fatalf("FC's retry after a late SUCCEEDED mirror: %d %s", r.Status, r.Body)
					}
				}
				if rep, err := rg.p.Sweep(ctx, handler.Meta{}, handler.SweepOptions{}); err != nil || rep.Scanned != 0 {
					t.Fatalf("sweep %+v %v", rep, err)
				}
				purgeAged(t, rg, handler.Retention{Records: 300 * time.Millisecond})
				rec, err := store.Get(ctx, derive(t, data).Key)
				if err != nil || rec.Tombstone || rec.Finish != driver.FinishFailed || rec.LastErrorCode != "notify_rejected" {
					t.Fatalf("after the purge: %+v %v", rec, err)
				}
				// The receiver fixed, a replay completes the finish: the
				// answers the fast layer and the cache held are gone with it.
				n.accept.Store(true)
				if o, err := rg.p.ReplayKey(ctx, rec.Key, handler.ReplayRequest{Reason: "receiver fixed", Operator: "op"}, handler.Meta{}); err != nil || o.ErrorType != "" {
					t.Fatalf("replay: %+v %v", o, err)
				}
				r := rg.p.Handle(ctx, body, handler.Meta{RequestID: "r9", RetryCount: 0})
				if o := outcome(t, r); r.Status != 200 || o.Decision != "REPEAT_DONE" || n.posts.Load() != 2 {
					t.Fatalf("a delivery after the replay: %d %s, %d POSTs", r.Status, r.Body, n.posts.Load())
				}
			})
		})
	}
}

// Issue 20, case 5: a notify URL NOTIFY_ALLOWED_HOSTS refuses is refused
// FINAL notify_forbidden before the claim and the model call.
func TestAForbiddenNotifyURLIsRefusedBeforeAnythingRuns(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		ctx := context.Background()
		rg := newRigOn(t, store, dir, &model{})
		rg.p.Notify = notify.New(notify.Options{Allow: notify.MustParseAllowList("hook.test")})
		data := summarizeData("notify somewhere else")
		for try := range 2 {
			r := rg.p.Handle(ctx, taskBody("ev-1", data, "https://elsewhere.test/x"), handler.Meta{RequestID: "r1", RetryCount: try})
			if o := outcome(t, r); r.Status != 404 || o.ErrorType != "notify_forbidden" || *o.Retryable {
				t.Fatalf("try %d: %d %s", try, r.Status, r.Body)
			}
		}
		if rg.m.calls.Load() != 0 {
			t.Fatalf("%d model calls before the notify URL was checked", rg.m.calls.Load())
		}
		if _, err := store.Get(ctx, derive(t, data).Key); !errors.Is(err, driver.ErrNotFound) {
			t.Fatalf("a record was written: %v", err)
		}
	})
}

// Issue 20 case 3: over the go1 runtime every try reads retry count 0 (the
// SDK's value for a missing x-fc-retry-count). FC's retry of a try whose
// instance died while its lease still runs must not be acknowledged — FC
// would record success and the event be lost — but answered retryably;
// once the lease has ended, the retry runs the task.
func TestGo1RetryOfADeadTryIsNotAcknowledged(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		for _, redis := range []bool{false, true} {
			t.Run(map[bool]string{false: "store alone", true: "Redis first"}[redis], func(t *testing.T) {
				go1RetryOfADeadTry(t, store, dir, redis)
			})
		}
	})
}

func go1RetryOfADeadTry(t *testing.T, store driver.Maintainer, dir string, redis bool) {
	const lease = 2 * time.Second
	m := &model{}
	opts := []idempotency.Option{idempotency.WithLease(lease)}
	data := summarizeData(fmt.Sprintf("go1 try that died %d", time.Now().UnixNano())) // a key of its own on a shared Redis
	d := derive(t, data)
	if redis {
		fast := newFast(t)
		t.Cleanup(func() { _ = fast.Forget(context.Background(), d.Key) })
		// The dead try's claim is in Redis unconfirmed (it never
		// published): the retry meets it there first.
		opts = append(opts, idempotency.WithFastLayer(fast))
	}
	rg := newRigOn(t, store, dir, m, opts...)
	h := go1.Handler(rg.p.Handle, nil)
	fcctx := fccontext.NewContext(context.Background(), &fccontext.FcContext{RequestID: "r1"}) // no retry count: 0
	// Try 0 claims, and its instance dies before it saves its input.
	if _, l, err := rg.p.Engine.Claim(context.Background(), idempotency.ClaimRequest{Key: d.Key, PayloadHash: d.PayloadHash,
		Owner: "r1", Try: go1.Meta(fcctx).RetryCount, Lease: lease}); err != nil || l == nil {
		t.Fatalf("claim: %v", err)
	}
	body := taskBody("ev-1", data, "")
	res, err := h(fcctx, body)
	var ie messages.InvokeResponse_Error
	if !errors.As(err, &ie) || ie.Type != "retry_later" {
		t.Fatalf("FC's retry during the dead try's lease was answered %s %v: acknowledged, the event would be lost", res, err)
	}
	time.Sleep(lease + 100*time.Millisecond)
	res, err = h(fcctx, body)
	var o handler.Outcome
	if err != nil || json.Unmarshal(res, &o) != nil || o.Status != "SUCCEEDED" || m.calls.Load() != 1 {
		t.Fatalf("FC's retry after the lease: %s %v, model calls %d", res, err, m.calls.Load())
	}
}

// Issue 20 case 4: four deliveries of one request id without a retry count
// (the custom runtime, no x-fc-retry-count) while the first runs: the
// copies neither take its lease (no second model call, no attempts spent)
// nor are acknowledged; their retries are answered the result.
func TestCopiesWithoutARetryCountDoNotTakeEachOthersLease(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		release := make(chan struct{})
		m := &model{fn: func(_ context.Context, n int32, _ llm.Request) (llm.Response, error) {
			if n == 1 {
				<-release
			}
			return llm.Response{Text: fmt.Sprintf("call %d", n)}, nil
		}}
		rg := newRigOn(t, store, dir, m)
		srv := &customruntime.Server{Handle: rg.p.Handle, Log: rg.p.Log}
		body := taskBody("ev-1", summarizeData("four copies"), "")
		invoke := func() *httptest.ResponseRecorder {
			r := httptest.NewRequest(http.MethodPost, "/invoke", bytes.NewReader(body))
			r.Header.Set("x-fc-request-id", "r1") // and no x-fc-retry-count
			w := httptest.NewRecorder()
			srv.ServeHTTP(w, r)
			return w
		}
		first := make(chan *httptest.ResponseRecorder, 1)
		go func() { first <- invoke() }()
		for m.calls.Load() == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		for i := range 3 {
			w := invoke()
			var o handler.Outcome
			_ = json.Unmarshal(w.Body.Bytes(), &o)
			if w.Code != http.StatusNotFound || o.ErrorType != "retry_later" {
				t.Errorf("copy %d: HTTP %d %s, want 404 retry_later", i+1, w.Code, w.Body)
			}
		}
		close(release)
		if w := <-first; w.Code != http.StatusOK {
			t.Fatalf("the first delivery: HTTP %d %s", w.Code, w.Body)
		}
		if w := invoke(); w.Code != http.StatusOK {
			t.Fatalf("a copy's retry: HTTP %d %s", w.Code, w.Body)
		}
		rec, _ := store.Get(context.Background(), derive(t, summarizeData("four copies")).Key)
		if rec.Status != driver.StatusSucceeded || rec.Attempt != 1 || m.calls.Load() != 1 {
			t.Fatalf("record %s attempt %d, model calls %d", rec.Status, rec.Attempt, m.calls.Load())
		}
	})
}

// Issue 20 case 8: an event-streaming batch carries one action three
// times and the model answers 429 for a while. Member 0's failure must not
// be retried at once by members 1 and 2 (which would spend the budget in
// one invocation and dead-letter a healthy task): they are answered
// retry_later, and FC's retry of the batch, once the provider is back, runs
// the action again and succeeds.
func TestBatchDuplicatesWaitForARetryableFailuresBackoff(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		var back atomic.Bool // the provider is back
		m := &model{fn: func(context.Context, int32, llm.Request) (llm.Response, error) {
			if !back.Load() {
				return llm.Response{}, idempotency.Retryable("rate_limited", errors.New("429"))
			}
			return llm.Response{Text: "summary"}, nil
		}}
		// A long back-off, so that no stall of the machine ends it within
		// the batch; FC's retry of the failed request does not wait for it.
		rg := newRigOn(t, store, dir, m, idempotency.WithRetryBackoff(time.Minute))
		data := summarizeData("three times in one batch")
		var members [][]byte
		for i := range 3 {
			members = append(members, taskBody(fmt.Sprintf("ev-%d", i), summarizeData("three times in one batch"), ""))
		}
		batch := append(append([]byte("["), bytes.Join(members, []byte(","))...), ']')
		r := rg.p.Handle(context.Background(), batch, handler.Meta{RequestID: "b1", RetryCount: 0})
		rec, _ := store.Get(context.Background(), derive(t, data).Key)
		if r.Status != http.StatusNotFound || rec.Status != driver.StatusFailedRetryable || rec.Attempt != 1 || m.calls.Load() != 1 {
			t.Fatalf("the batch: HTTP %d, record %s attempt %d, model calls %d: %s", r.Status, rec.Status, rec.Attempt,
				m.calls.Load(), r.Body)
		}
		back.Store(true) // FC's back-off has passed; so has the 429
		r = rg.p.Handle(context.Background(), batch, handler.Meta{RequestID: "b1", RetryCount: 1})
		rec, _ = store.Get(context.Background(), derive(t, data).Key)
		if r.Status != http.StatusOK || rec.Status != driver.StatusSucceeded || rec.Attempt != 2 {
			t.Fatalf("FC's retry of the batch: HTTP %d, record %s attempt %d: %s", r.Status, rec.Status, rec.Attempt, r.Body)
		}
	})
}

// slowApproved holds the first publish of an approved result until
// released: a finish holder whose publish outlasts its finish lease.
type slowApproved struct {
	handler.ResultStore
	once    sync.Once
	reached chan struct{}
	release chan struct{}
}

func (s *slowApproved) PutOnce(ctx context.Context, key string, body []byte, ct string, m ossresult.Meta) (string, error) {
	if strings.HasSuffix(key, "/approved/result.md") {
		first := false
		s.once.Do(func() { first = true })
		if first {
			close(s.reached)
			<-s.release
		}
	}
	return s.ResultStore.PutOnce(ctx, key, body, ct, m)
}

// gatedNotifier holds its first POST until released: the sweeper still
// notifying when the slow holder wakes up.
type gatedNotifier struct {
	notifier
	once    sync.Once
	posting chan struct{}
	release chan struct{}
}

func (g *gatedNotifier) Post(ctx context.Context, url, key, requestID string, body []byte) error {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.posting)
		<-g.release
	}
	return g.notifier.Post(ctx, url, key, requestID, body)
}

// Issue 20 case 7: the finish holder's publish outlasts its finish lease
// and the sweeper's grace; the sweeper takes the finish over and, while it
// notifies, the slow holder wakes up. The holder must not notify too: no
// crash happened, so at most one notification (docs/design.md §13).
func TestSlowFinishHolderDoesNotNotifyAfterItsLease(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		const lease = 2 * time.Second // the sweeper's finish lease too: it must outlast its publish
		rg := newRigOn(t, store, dir, &model{}, idempotency.WithLease(lease))
		n := &gatedNotifier{posting: make(chan struct{}), release: make(chan struct{})}
		rg.p.Notify = n
		base, _ := rg.p.Results(context.Background(), handler.Credentials{})
		slow := &slowApproved{ResultStore: base, reached: make(chan struct{}), release: make(chan struct{})}
		rg.p.Results = func(context.Context, handler.Credentials) (handler.ResultStore, error) { return slow, nil }
		data := summarizeData("a slow publish")
		done := make(chan handler.Reply, 1)
		go func() {
			done <- rg.p.Handle(context.Background(), taskBody("ev-1", data, "https://hook.test/x"), handler.Meta{RequestID: "r1", RetryCount: 0})
		}()
		<-slow.reached
		time.Sleep(lease + 100*time.Millisecond) // the holder's finish lease (and the grace) ran out
		swept := make(chan handler.SweepReport, 1)
		go func() {
			rep, _ := rg.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{})
			swept <- rep
		}()
		select {
		case <-n.posting: // the sweeper holds the finish and is notifying
		case rep := <-swept:
			t.Fatalf("the sweeper did not notify: %+v", rep)
		}
		close(slow.release)
		r := <-done
		close(n.release)
		if rep := <-swept; rep.Finished != 1 {
			t.Fatalf("the sweeper's report %+v", rep)
		}
		if got := n.posts.Load(); got != 1 {
			t.Fatalf("%d notifications: the slow holder notified after its lease", got)
		}
		if o := outcome(t, r); r.Status != http.StatusOK || o.Status != "SUCCEEDED" {
			t.Fatalf("the holder's answer: HTTP %d %+v", r.Status, o)
		}
		if rec, _ := store.Get(context.Background(), derive(t, data).Key); rec.Finish != driver.FinishDone {
			t.Fatalf("finish %s", rec.Finish)
		}
	})
}

// deadlineNotifier records the deadline each POST ran under.
type deadlineNotifier struct {
	mu   sync.Mutex
	left []time.Duration // -1: no deadline
}

func (d *deadlineNotifier) Post(ctx context.Context, _, _, _ string, _ []byte) error {
	left := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	d.mu.Lock()
	d.left = append(d.left, left)
	d.mu.Unlock()
	return nil
}

// Issue 20 case 7: the notify POST never outlives the finish lease (a POST
// still in flight when another holder may take the finish over would be a
// second notification).
func TestNotifyIsBoundedByTheFinishLease(t *testing.T) {
	const lease = 20 * time.Second
	rg := newRig(t, &model{}, idempotency.WithLease(lease))
	n := &deadlineNotifier{}
	rg.p.Notify = n
	r := rg.p.Handle(context.Background(), taskBody("ev-1", summarizeData("bounded notify"), "https://hook.test/x"),
		handler.Meta{RequestID: "r1", RetryCount: 0})
	if r.Status != http.StatusOK || len(n.left) != 1 {
		t.Fatalf("HTTP %d, %d notifications: %s", r.Status, len(n.left), r.Body)
	}
	if left := n.left[0]; left < 0 || left > lease-lease/10 {
		t.Fatalf("the POST ran with %v left (-1: no deadline), want at most %v (the finish lease less a tenth)", left, lease-lease/10)
	}
}

// Issue 20 case 8, the sweeper's side: a retryable failure still in its
// back-off is left for a later sweep (counted as backoff, not as set aside:
// issue 39), not run again and not given up.
func TestSweeperLeavesARetryableFailureInItsBackoff(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		m := &model{fn: func(_ context.Context, n int32, _ llm.Request) (llm.Response, error) {
			if n == 1 {
				return llm.Response{}, idempotency.Retryable("rate_limited", errors.New("429"))
			}
			return llm.Response{Text: "ok"}, nil
		}}
		rg := newRigOn(t, store, dir, m, idempotency.WithRetryBackoff(time.Minute))
		data := summarizeData("swept in its back-off")
		if o := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-1", data, ""), handler.Meta{RequestID: "r1"})); o.Status != "FAILED_RETRYABLE" {
			t.Fatalf("first: %+v", o)
		}
		rep, err := rg.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{})
		if err != nil || rep.Backoff != 1 || rep.Deferred != 0 || rep.Redriven != 0 || m.calls.Load() != 1 {
			t.Fatalf("sweep %+v %v, model calls %d", rep, err, m.calls.Load())
		}
		if rec, _ := store.Get(context.Background(), derive(t, data).Key); rec.Status != driver.StatusFailedRetryable || rec.Attempt != 1 {
			t.Fatalf("record %s attempt %d", rec.Status, rec.Attempt)
		}
	})
}

// Review of the edges-claim work: a copy of a try (same request id and
// x-fc-retry-count as the live holder) is answered retry_later, so FC
// retries that copy with the next count. That retry is not the holder's
// retry — the holder is alive and renewing — yet a known later try takes
// its own live lease over at once: a second model call, an attempt spent,
// the healthy holder fenced out (docs/design.md §14.3: copies of one
// request never take each other's live lease).
func TestACopysRetryDoesNotTakeTheLiveHoldersLease(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		for _, redis := range []bool{false, true} {
			t.Run(map[bool]string{false: "store alone", true: "Redis first"}[redis], func(t *testing.T) {
				copysRetry(t, store, dir, redis)
			})
		}
	})
}

func copysRetry(t *testing.T, store driver.Maintainer, dir string, redis bool) {
	data := summarizeData(fmt.Sprintf("a copy's retry %d", time.Now().UnixNano())) // a key of its own on a shared Redis
	var opts []idempotency.Option
	if redis {
		fast := newFast(t)
		t.Cleanup(func() { _ = fast.Forget(context.Background(), derive(t, data).Key) })
		opts = append(opts, idempotency.WithFastLayer(fast)) // the copy meets the holder's entry there first
	}
	release := make(chan struct{})
	m := &model{fn: func(_ context.Context, n int32, _ llm.Request) (llm.Response, error) {
		if n == 1 {
			<-release
		}
		return llm.Response{Text: fmt.Sprintf("call %d", n)}, nil
	}}
	rg := newRigOn(t, store, dir, m, opts...)
	srv := &customruntime.Server{Handle: rg.p.Handle, Log: rg.p.Log}
	body := taskBody("ev-1", data, "")
	invokeAs := func(id, try string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/invoke", bytes.NewReader(body))
		r.Header.Set("x-fc-request-id", id)
		r.Header.Set("x-fc-retry-count", try)
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		return w
	}
	invoke := func(try string) *httptest.ResponseRecorder { return invokeAs("r1", try) }
	first := make(chan *httptest.ResponseRecorder, 1)
	go func() { first <- invoke("0") }()
	for m.calls.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	if redis { // another request's delivery: the store answers it, and its answer confirms r1's entry in Redis
		if w := invokeAs("r2", "0"); w.Code != http.StatusOK {
			t.Fatalf("another request's delivery: HTTP %d %s, want 200 in progress", w.Code, w.Body)
		}
	}
	if w := invoke("0"); w.Code != http.StatusNotFound { // the copy
		t.Fatalf("the copy: HTTP %d %s, want 404 retry_later", w.Code, w.Body)
	}
	w := invoke("1") // FC's retry of the copy, while the holder runs
	close(release)
	if w.Code == http.StatusOK {
		var o handler.Outcome
		_ = json.Unmarshal(w.Body.Bytes(), &o)
		if o.Status == "RUNNING" {
			t.Errorf("the copy's retry was acknowledged in progress: %s", w.Body)
		}
	}
	fw := <-first
	rec, _ := store.Get(context.Background(), derive(t, data).Key)
	if m.calls.Load() != 1 || rec.Attempt != 1 || fw.Code != http.StatusOK {
		t.Fatalf("the copy's retry took the live holder's lease: model calls %d, attempt %d, holder HTTP %d %s",
			m.calls.Load(), rec.Attempt, fw.Code, fw.Body)
	}
}

// A copy of the finish holder's try, and FC's next try of the same
// request, meet that request's live finish: answered retry_later, never
// acknowledged (as a task claim meeting its own live lease) — were the
// holder to die, nothing but FC's retry of them would take the finish over
// before the sweeper. Once the holder finished, the retry is acknowledged;
// one notification in all.
func TestOwnLiveFinishIsAnsweredRetryLater(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		n := &notifier{}
		rg, slow := slowFinishRig(t, store, dir, time.Minute, n)
		body := taskBody("ev-1", summarizeData("its own live finish"), "https://hook.test/x")
		done := make(chan handler.Reply, 1)
		go func() { done <- rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1", RetryCount: 1}) }()
		<-slow.reached // try 1 holds the finish, publishing
		for _, try := range []int{1, 2} {
			r := rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1", RetryCount: try})
			if o := outcome(t, r); r.Status == http.StatusOK || o.ErrorType != "retry_later" || o.Retryable == nil || !*o.Retryable ||
				o.Decision != string(idempotency.DecisionRepeatOther) {
				t.Fatalf("r1 try %d beside its own live finish: HTTP %d %+v", try, r.Status, o)
			}
		}
		close(slow.release)
		if r := <-done; r.Status != http.StatusOK {
			t.Fatalf("the holder: HTTP %d %s", r.Status, r.Body)
		}
		if r := rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1", RetryCount: 3}); r.Status != http.StatusOK {
			t.Fatalf("FC's retry after the finish: HTTP %d %s", r.Status, r.Body)
		}
		if got := n.posts.Load(); got != 1 {
			t.Fatalf("%d notifications", got)
		}
	})
}

// The finish holder's Hold is refused after the sweeper took the finish
// over and let it go (its POST failed retryably): nobody carries the
// finish, so the holder is answered retryably and FC's retry takes it up.
func TestHoldLostToNobodyIsRetried(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		const lease = 2 * time.Second
		n := &notifier{}
		n.fail.Store(1) // the sweeper's POST fails retryably: it releases the finish
		rg, slow := slowFinishRig(t, store, dir, lease, n)
		data := summarizeData("a slow publish, swept and let go")
		body := taskBody("ev-1", data, "https://hook.test/x")
		done := make(chan handler.Reply, 1)
		go func() { done <- rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1"}) }()
		<-slow.reached
		time.Sleep(lease + 100*time.Millisecond) // the holder's finish lease (and the grace) ran out
		if rep, err := rg.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{}); err != nil || n.fail.Load() != 0 {
			t.Fatalf("the sweep did not post: %+v %v", rep, err)
		}
		close(slow.release)
		r := <-done
		if o := outcome(t, r); r.Status == http.StatusOK || o.Retryable == nil || !*o.Retryable {
			t.Fatalf("acknowledged a finish nobody carries: HTTP %d %+v", r.Status, o)
		}
		if r := rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1", RetryCount: 1}); r.Status != http.StatusOK {
			t.Fatalf("FC's retry: HTTP %d %s", r.Status, r.Body)
		}
		if rec, _ := store.Get(context.Background(), derive(t, data).Key); rec.Finish != driver.FinishDone || n.posts.Load() != 1 {
			t.Fatalf("finish %s after %d posts", rec.Finish, n.posts.Load())
		}
	})
}

// The holder's Hold is refused after the sweeper took the finish over and
// its POST was refused for good: the finish is recorded FAILED, and the
// holder answers that FINAL failure (FC's retries end in the dead-letter
// queue, docs/design.md §10) — acknowledged, the failure would reach no
// dead letter.
func TestHoldLostToAFailedFinishIsFinal(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		const lease = 2 * time.Second
		n := postFunc(func() error { return idempotency.Final("notify_rejected", errors.New("410 Gone")) })
		rg, slow := slowFinishRig(t, store, dir, lease, n)
		data := summarizeData("a slow publish, swept and refused")
		done := make(chan handler.Reply, 1)
		go func() {
			done <- rg.p.Handle(context.Background(), taskBody("ev-1", data, "https://hook.test/x"), handler.Meta{RequestID: "r1"})
		}()
		<-slow.reached
		time.Sleep(lease + 100*time.Millisecond) // the holder's finish lease (and the grace) ran out
		if _, err := rg.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{}); err != nil {
			t.Fatal(err)
		}
		if rec, _ := store.Get(context.Background(), derive(t, data).Key); rec.Finish != driver.FinishFailed {
			t.Fatalf("the sweep left the finish %s", rec.Finish)
		}
		close(slow.release)
		r := <-done
		if o := outcome(t, r); r.Status == http.StatusOK || o.Retryable == nil || *o.Retryable || o.ErrorType != "notify_rejected" {
			t.Fatalf("the holder, its finish failed FINAL by the sweeper: HTTP %d %+v", r.Status, o)
		}
	})
}

// postFunc is a notifier whose every POST answers fn.
type postFunc func() error

func (f postFunc) Post(context.Context, string, string, string, []byte) error { return f() }

// The holder's publish outlasts its finish lease; a copy of its try takes
// the expired finish over and notifies; the holder's Hold is then refused.
// It is acknowledged: the copy carries the finish. Answered retryably, FC's
// next try would count as the holder's later try, take the copy's live
// finish over and notify a second time.
func TestHoldLostToACopyIsAcknowledged(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		const lease = 2 * time.Second
		n := &gatedNotifier{posting: make(chan struct{}), release: make(chan struct{})}
		rg, slow := slowFinishRig(t, store, dir, lease, n)
		body := taskBody("ev-1", summarizeData("a slow publish, taken over by a copy"), "https://hook.test/x")
		done := make(chan handler.Reply, 1)
		go func() { done <- rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1", RetryCount: 1}) }()
		<-slow.reached
		time.Sleep(lease + 100*time.Millisecond) // the holder's finish lease ran out
		copyDone := make(chan handler.Reply, 1)
		go func() {
			copyDone <- rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1", RetryCount: 1})
		}()
		<-n.posting // the copy holds the finish and is notifying
		close(slow.release)
		r := <-done
		close(n.release)
		if c := <-copyDone; r.Status != http.StatusOK || c.Status != http.StatusOK || n.posts.Load() != 1 {
			t.Fatalf("holder HTTP %d, copy HTTP %d, %d notifications: %s", r.Status, c.Status, n.posts.Load(), r.Body)
		}
	})
}

// A delivery without a known later try — over the go1 runtime every try
// reads 0, without x-fc-retry-count it is -1 — of the request that
// completed the key meets that request's pending finish: while its lease
// runs it is answered retry_later (the holder may be dead), and once the
// lease ran out it takes the finish over and notifies; acknowledged, a dead
// holder's finish would wait for the sweeper. The holder, woken after, is
// fenced out: one notification in all.
func TestOwnFinishWithoutAKnownTry(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		for _, tc := range []struct {
			name  string
			try   int
			redis bool
		}{
			{"go1 (try 0)", 0, false},
			{"go1 (try 0), Redis first", 0, true},
			{"no retry count (-1)", -1, false},
			{"no retry count (-1), Redis first", -1, true},
		} {
			t.Run(tc.name, func(t *testing.T) { ownFinishWithoutAKnownTry(t, store, dir, tc.try, tc.redis) })
		}
	})
}

func ownFinishWithoutAKnownTry(t *testing.T, store driver.Maintainer, dir string, try int, redis bool) {
	const lease = 2 * time.Second
	data := summarizeData(fmt.Sprintf("its own finish, try %d, %d", try, time.Now().UnixNano())) // a key of its own on a shared Redis
	var opts []idempotency.Option
	if redis {
		fast := newFast(t)
		t.Cleanup(func() { _ = fast.Forget(context.Background(), derive(t, data).Key) })
		opts = append(opts, idempotency.WithFastLayer(fast)) // the SUCCEEDED entry answers the retry first
	}
	n := &notifier{}
	rg, slow := slowFinishRig(t, store, dir, lease, n, opts...)
	body := taskBody("ev-1", data, "https://hook.test/x")
	meta := handler.Meta{RequestID: "r1", RetryCount: try}
	done := make(chan handler.Reply, 1)
	go func() { done <- rg.p.Handle(context.Background(), body, meta) }()
	<-slow.reached // the holder completed the task and holds the finish, publishing
	r := rg.p.Handle(context.Background(), body, meta)
	if o := outcome(t, r); r.Status == http.StatusOK || o.ErrorType != "retry_later" || o.Decision != string(idempotency.DecisionRepeatOther) {
		t.Fatalf("FC's retry beside its own live finish: HTTP %d %+v", r.Status, o)
	}
	time.Sleep(lease + 100*time.Millisecond) // the holder's finish lease ran out: it may be dead
	if r := rg.p.Handle(context.Background(), body, meta); r.Status != http.StatusOK || n.posts.Load() != 1 {
		t.Fatalf("FC's retry after the finish lease: HTTP %d %s, %d notifications", r.Status, r.Body, n.posts.Load())
	}
	if rec, _ := store.Get(context.Background(), derive(t, data).Key); rec.Finish != driver.FinishDone {
		t.Fatalf("the retry left the finish %s", rec.Finish)
	}
	close(slow.release)
	if r := <-done; r.Status != http.StatusOK || n.posts.Load() != 1 {
		t.Fatalf("the holder, woken: HTTP %d %s, %d notifications", r.Status, r.Body, n.posts.Load())
	}
}

// slowFinishRig is a rig with a lease of lease and notifier n whose first
// publish of an approved result waits for slow.release.
func slowFinishRig(t *testing.T, store driver.Maintainer, dir string, lease time.Duration, n handler.Notifier,
	opts ...idempotency.Option) (*rig, *slowApproved) {
	rg := newRigOn(t, store, dir, &model{}, append([]idempotency.Option{idempotency.WithLease(lease)}, opts...)...)
	rg.p.Notify = n
	base, _ := rg.p.Results(context.Background(), handler.Credentials{})
	slow := &slowApproved{ResultStore: base, reached: make(chan struct{}), release: make(chan struct{})}
	rg.p.Results = func(context.Context, handler.Credentials) (handler.ResultStore, error) { return slow, nil }
	return rg, slow
}
