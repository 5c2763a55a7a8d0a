package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/llm"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/keys"
	"github.com/idemgate/idemgate/ossresult"
)

// model is a scripted in-process model.
type model struct {
	calls atomic.Int32
	fn    func(ctx context.Context, n int32, r llm.Request) (llm.Response, error)
}

func (m *model) Complete(ctx context.Context, r llm.Request) (llm.Response, error) {
	n := m.calls.Add(1)
	if m.fn != nil {
		return m.fn(ctx, n, r)
	}
	return llm.Response{Text: fmt.Sprintf("answer %d", n), Model: "scripted"}, nil
}

// driver.Maintainer is a store with its maintenance side, as the pipeline uses it.
type rig struct {
	p     *handler.Pipeline
	store driver.Maintainer
	dir   string
	m     *model
}

func newRig(t *testing.T, m *model, opts ...idempotency.Option) *rig {
	return newRigClock(t, nil, m, opts...)
}

// newRigClock is newRig on an embedded store whose clock is now (nil:
// time.Now), the database's clock apart from the function's.
func newRigClock(t *testing.T, now func() time.Time, m *model, opts ...idempotency.Option) *rig {
	dir := t.TempDir()
	store, err := boltstore.Open(filepath.Join(dir, "state"), time.Second, boltstore.WithClock(now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return newRigOn(t, store, dir, m, opts...)
}

// newRigOn builds the pipeline on store, with results under dir.
func newRigOn(t *testing.T, store driver.Maintainer, dir string, m *model, opts ...idempotency.Option) *rig {
	local, err := ossresult.NewLocal(filepath.Join(dir, "results"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	p := &handler.Pipeline{Engine: idempotency.New(store, append([]idempotency.Option{idempotency.WithLogger(log)}, opts...)...),
		Results: func(context.Context, handler.Credentials) (handler.ResultStore, error) { return local, nil },
		Model:   m, Tasks: handler.Builtin(), Log: log}
	return &rig{p: p, store: store, dir: dir, m: m}
}

func event(taskType string, input map[string]any) []byte {
	in, _ := json.Marshal(input)
	b, _ := json.Marshal(map[string]any{"id": "ev-1", "source": "test", "specversion": "1.0", "type": "idemgate:Task:Submitted",
		"datacontenttype": "application/json",
		"data":            map[string]any{"tenant_id": "t1", "task_type": taskType, "operation": taskType, "input": json.RawMessage(in)}})
	return b
}

func outcome(t *testing.T, r handler.Reply) handler.Outcome {
	t.Helper()
	var o handler.Outcome
	if err := json.Unmarshal(r.Body, &o); err != nil {
		t.Fatalf("reply %s", r.Body)
	}
	return o
}

// A failing model call is retried from the step that failed: the
// "candidates" step of keywords runs once, "rank" twice.
func TestStepsResumeAfterFailure(t *testing.T) {
	m := &model{fn: func(_ context.Context, n int32, r llm.Request) (llm.Response, error) {
		if n == 1 {
			return llm.Response{}, idempotency.Retryable("rate_limited", errors.New("429"))
		}
		return llm.Response{Text: "- ranked", Model: "scripted"}, nil
	}}
	rg := newRig(t, m)
	body := event("keywords", map[string]any{"text": "alpha beta gamma alpha delta alpha beta"})
	r1 := rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1", RetryCount: 0})
	if o := outcome(t, r1); r1.Status != 404 || o.ErrorType != "rate_limited" || o.Status != "FAILED_RETRYABLE" {
		t.Fatalf("first try %d %+v", r1.Status, o)
	}
	r2 := rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1", RetryCount: 1})
	o := outcome(t, r2)
	if r2.Status != 200 || o.Status != "SUCCEEDED" || o.Attempt != 2 {
		t.Fatalf("retry %d %+v", r2.Status, o)
	}
	rec, err := rg.store.Get(context.Background(), o.IdempotencyKey)
	if err != nil || rec.Steps["candidates"] != "alpha,beta,delta,gamma" {
		t.Fatalf("candidates checkpoint %+v %v", rec.Steps, err)
	}
	if _, ok := rec.Steps["rank"]; ok {
		t.Fatal("the last step was checkpointed: its output object is its checkpoint")
	}
	if m.calls.Load() != 2 {
		t.Fatalf("model calls %d", m.calls.Load())
	}
}

// A model call longer than the lease keeps the lease renewed: a concurrent
// delivery finds it in progress, never takes it over. Only the first call
// waits, and nothing waits unbounded, so that a broken renewal fails the
// test within seconds (it hung it for the 10-minute timeout: the takeover's
// own model call waited on release too).
func TestLongCallRenewsLease(t *testing.T) {
	release := make(chan struct{})
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock)
	m := &model{fn: func(ctx context.Context, n int32, _ llm.Request) (llm.Response, error) {
		if n == 1 {
			select {
			case <-release:
			case <-ctx.Done():
				return llm.Response{}, ctx.Err()
			}
		}
		return llm.Response{Text: "slow answer"}, nil
	}}
	rg := newRig(t, m, idempotency.WithLease(300*time.Millisecond))
	body := event("summarize", map[string]any{"content": "long"})
	done := make(chan handler.Reply, 1)
	go func() { done <- rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1"}) }()
	for range 6 { // 1.2 s: four leases long
		time.Sleep(200 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		o := outcome(t, rg.p.Handle(ctx, body, handler.Meta{RequestID: "other"}))
		cancel()
		if o.Decision != "REPEAT_OTHER" {
			t.Fatalf("while the first worker renews: %+v", o)
		}
	}
	unblock()
	select {
	case r := <-done:
		if o := outcome(t, r); o.Status != "SUCCEEDED" || o.Attempt != 1 || m.calls.Load() != 1 {
			t.Fatalf("first worker %+v, calls %d", o, m.calls.Load())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first worker did not answer within 10 s of its model call's end")
	}
}

// When the lease is lost mid-call (another worker took over), the model
// call's context is cancelled and the stale worker publishes nothing.
func TestLostLeaseStopsWork(t *testing.T) {
	cancelled := make(chan struct{})
	m := &model{fn: func(ctx context.Context, n int32, _ llm.Request) (llm.Response, error) {
		if n == 1 {
			<-ctx.Done()
			close(cancelled)
			return llm.Response{}, ctx.Err()
		}
		return llm.Response{Text: "winner"}, nil
	}}
	rg := newRig(t, m, idempotency.WithLease(300*time.Millisecond))
	body := event("summarize", map[string]any{"content": "contested"})
	done := make(chan handler.Reply, 1)
	go func() { done <- rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "stale"}) }()
	for m.calls.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	// Simulate the stale worker's renewals failing: move the fence on under it.
	k := outcomeKey(t, body)
	rec, err := rg.store.Get(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	if err := rg.store.Fail(context.Background(), k, rec.Fence, driver.Failure{Code: "operator"}); err != nil {
		t.Fatal(err)
	}
	// The new owner takes the key over; the step the stale worker holds is
	// in progress until its step lease runs out, so FC's retry finishes it.
	win := outcome(t, rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "winner"}))
	if win.Decision != "TAKEOVER" || (win.Status != "SUCCEEDED" && win.ErrorType != "step_in_progress") {
		t.Fatalf("winner %+v", win)
	}
	if win.Status != "SUCCEEDED" {
		time.Sleep(400 * time.Millisecond)
		win = outcome(t, rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "winner", RetryCount: 1}))
		if win.Status != "SUCCEEDED" {
			t.Fatalf("winner's retry %+v", win)
		}
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the stale worker's model call was not cancelled")
	}
	stale := <-done
	if stale.Status == 200 {
		t.Fatalf("stale worker answered success: %s", stale.Body)
	}
	approved, err := os.ReadFile(filepath.Join(rg.dir, "results", "tasks", k, "approved", "result.md"))
	if err != nil || string(approved) != "winner" {
		t.Fatalf("approved %q %v", approved, err)
	}
}

func outcomeKey(t *testing.T, body []byte) string {
	var ev struct {
		Data struct {
			TenantID  string          `json:"tenant_id"`
			TaskType  string          `json:"task_type"`
			Operation string          `json:"operation"`
			Input     json.RawMessage `json:"input"`
		} `json:"data"`
	}
	_ = json.Unmarshal(body, &ev)
	d, err := keys.Derive(keys.Fields{TenantID: ev.Data.TenantID, TaskType: ev.Data.TaskType, Operation: ev.Data.Operation, Input: ev.Data.Input})
	if err != nil {
		t.Fatal(err)
	}
	return d.Key
}

// A panic inside a task is recorded (the deferred guard) and answered as a
// retryable failure; the process lives on.
func TestPanicIsRecordedAndAnswered(t *testing.T) {
	m := &model{fn: func(context.Context, int32, llm.Request) (llm.Response, error) { panic("model SDK bug") }}
	rg := newRig(t, m)
	body := event("summarize", map[string]any{"content": "boom"})
	r := rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1"})
	o := outcome(t, r)
	if r.Status != 404 || o.ErrorType != "panic" || o.Retryable == nil || !*o.Retryable ||
		o.IdempotencyKey != outcomeKey(t, body) || o.Status != string(driver.StatusFailedRetryable) || o.Attempt != 1 {
		t.Fatalf("reply %d %s", r.Status, r.Body)
	}
	rec, err := rg.store.Get(context.Background(), outcomeKey(t, body))
	if err != nil || rec.Status != driver.StatusFailedRetryable || rec.LastErrorCode != "panic" {
		t.Fatalf("record %+v %v", rec, err)
	}
}

// A member's panic fails that member only: the batch's other members run
// and answer.
func TestPanicInABatchAnswersTheOthers(t *testing.T) {
	m := &model{fn: func(_ context.Context, _ int32, req llm.Request) (llm.Response, error) {
		if strings.Contains(fmt.Sprint(req), "boom") {
			panic("model SDK bug")
		}
		return llm.Response{Text: "ok"}, nil
	}}
	rg := newRig(t, m)
	body := []byte("[" + string(taskBody("ev-1", summarizeData("boom"), "")) + "," + string(taskBody("ev-2", summarizeData("fine"), "")) + "]")
	r := rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1"})
	var a struct{ Results []handler.Outcome }
	if err := json.Unmarshal(r.Body, &a); err != nil || len(a.Results) != 2 || a.Results[0].ErrorType != "panic" ||
		a.Results[0].IdempotencyKey == "" || a.Results[1].Status != "SUCCEEDED" {
		t.Fatalf("reply %d %s", r.Status, r.Body)
	}
}

// FINAL failures cost one model call; RETRYABLE ones at most the budget.
func TestModelCallBudget(t *testing.T) {
	cases := []struct {
		name  string
		err   error
		calls int32
	}{
		{"final", idempotency.Final("policy_rejected", errors.New("data_inspection_failed")), 1},
		{"retryable", idempotency.Retryable("temporary_unavailable", errors.New("503")), 3},
		{"unknown", errors.New("weird"), 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := &model{fn: func(context.Context, int32, llm.Request) (llm.Response, error) { return llm.Response{}, c.err }}
			rg := newRig(t, m, idempotency.WithMaxAttempts(3))
			body := event("summarize", map[string]any{"content": "budget " + c.name})
			for try := range 6 { // FC's retries and a few redeliveries
				rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1", RetryCount: try})
			}
			if m.calls.Load() != c.calls {
				t.Fatalf("model calls %d, want %d", m.calls.Load(), c.calls)
			}
			rec, _ := rg.store.Get(context.Background(), outcomeKey(t, body))
			if rec.Status != driver.StatusFailedFinal {
				t.Fatalf("status %s", rec.Status)
			}
		})
	}
}

// Concurrent invocations on one pipeline (instanceConcurrency > 1).
func TestConcurrentInvocations(t *testing.T) {
	m := &model{}
	rg := newRig(t, m)
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			body := event("summarize", map[string]any{"content": fmt.Sprintf("doc %d", i%10)})
			r := rg.p.Handle(context.Background(), body, handler.Meta{RequestID: fmt.Sprintf("r%d", i)})
			if r.Status != 200 {
				t.Errorf("%d: %s", r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	if m.calls.Load() != 10 {
		t.Fatalf("model calls %d, want 10", m.calls.Load())
	}
	_ = strings.TrimSpace
}

// A panic on the budget's last attempt is answered as Do recorded it:
// FAILED_FINAL attempts_exhausted, not retryable.
func TestPanicOnTheLastAttemptIsFinal(t *testing.T) {
	m := &model{fn: func(context.Context, int32, llm.Request) (llm.Response, error) { panic("model SDK bug") }}
	rg := newRig(t, m, idempotency.WithMaxAttempts(1))
	body := event("summarize", map[string]any{"content": "boom"})
	o := outcome(t, rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1"}))
	rec, err := rg.store.Get(context.Background(), outcomeKey(t, body))
	if err != nil || rec.Status != driver.StatusFailedFinal || o.Status != string(driver.StatusFailedFinal) ||
		o.ErrorType != rec.LastErrorCode || o.Retryable == nil || *o.Retryable {
		t.Fatalf("answer %+v, record %+v %v", o, rec, err)
	}
}

// panickingNotifier posts, then panics: a bug after the notification left.
type panickingNotifier struct{ posts atomic.Int32 }

func (n *panickingNotifier) Post(context.Context, string, string, string, []byte) error {
	n.posts.Add(1)
	panic("notifier bug")
}

// A panic in the finish is recorded FINAL on the finish: the result stands,
// the answer says so, and neither FC's retries nor the sweeper post again
// or stall on it (it was never recorded: every retry and sweep took the
// finish up and posted, and the sweeper met it first on every run).
func TestPanicInTheFinishIsRecordedOnce(t *testing.T) {
	rg := newRig(t, &model{})
	n := &panickingNotifier{}
	rg.p.Notify = n
	body := notifyEvent("finish panics")
	o := outcome(t, rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1"}))
	if o.Status != string(driver.StatusSucceeded) || o.ErrorType != "panic" || o.Retryable == nil || *o.Retryable {
		t.Fatalf("answer %+v", o)
	}
	for try := 1; try <= 2; try++ {
		rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1", RetryCount: try})
	}
	if _, err := rg.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{}); err != nil {
		t.Fatal(err)
	}
	rec, err := rg.store.Get(context.Background(), o.IdempotencyKey)
	if err != nil || rec.Status != driver.StatusSucceeded || !rec.FailedFinish() || rec.LastErrorCode != "panic" || n.posts.Load() != 1 {
		t.Fatalf("record %+v %v, posts %d", rec, err, n.posts.Load())
	}
}

// getFails is a store whose reads fail: what a panic's answer meets when
// the store is down, or the invocation's context ended.
type getFails struct{ driver.Maintainer }

func (getFails) Get(context.Context, string) (driver.Record, error) {
	return driver.Record{}, errors.New("store unreachable")
}

// A step's panic whose record cannot be read is answered as Do's guard
// records it, FAILED_RETRYABLE: never REJECTED, which says nothing was
// recorded.
func TestPanicAnsweredWithoutTheRecord(t *testing.T) {
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "state"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	m := &model{fn: func(context.Context, int32, llm.Request) (llm.Response, error) { panic("model SDK bug") }}
	rg := newRigOn(t, getFails{store}, t.TempDir(), m)
	body := event("summarize", map[string]any{"content": "boom"})
	o := outcome(t, rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1"}))
	if o.Status != string(driver.StatusFailedRetryable) || o.Decision != string(idempotency.DecisionFirst) ||
		o.ErrorType != "panic" || o.Retryable == nil || !*o.Retryable {
		t.Fatalf("answer %+v", o)
	}
}

// stallingNotifier's first post outlives its deadline, then panics; later
// posts answer later (nil: they succeed).
type stallingNotifier struct {
	posts            atomic.Int32
	entered, release chan struct{}
	later            error
}

func (n *stallingNotifier) Post(context.Context, string, string, string, []byte) error {
	if n.posts.Add(1) == 1 {
		close(n.entered)
		<-n.release
		panic("notifier bug after its lease")
	}
	return n.later
}

// A holder whose finish was taken over by the sweeper while it hung, and
// which then panics, answers as the record says, not the FINAL failure the
// store fenced out: done by the sweeper, no failure of its own; let go by
// the sweeper (its own post failed retryably), retryable — acknowledged,
// the finish would be carried by nobody's lease.
func TestFinishFailureFencedOutAnswersTheRecord(t *testing.T) {
	for _, c := range []struct {
		name   string
		later  error
		finish driver.FinishState
		code   string
	}{
		{"the sweeper finished", nil, driver.FinishDone, ""},
		{"the sweeper let go", idempotency.Retryable("temporary_unavailable", errors.New("503")), driver.FinishPending, "panic"},
	} {
		t.Run(c.name, func(t *testing.T) {
			const lease = 300 * time.Millisecond
			rg := newRig(t, &model{}, idempotency.WithLease(lease))
			n := &stallingNotifier{entered: make(chan struct{}), release: make(chan struct{}), later: c.later}
			rg.p.Notify = n
			body := notifyEvent("taken over while it hangs")
			answer := make(chan handler.Reply, 1)
			go func() { answer <- rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1"}) }()
			<-n.entered
			time.Sleep(lease + 100*time.Millisecond) // the finish lease ends: the sweeper may take it over
			if _, err := rg.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{}); err != nil {
				t.Fatal(err)
			}
			close(n.release)
			o := outcome(t, <-answer)
			rec, err := rg.store.Get(context.Background(), outcomeKey(t, body))
			retry := o.Retryable != nil && *o.Retryable
			if err != nil || rec.Finish != c.finish || o.ErrorType != c.code || retry != (c.code != "") ||
				o.Status != string(driver.StatusSucceeded) {
				t.Fatalf("answer %+v, record %+v %v", o, rec, err)
			}
		})
	}
}

// behind is a clock d behind the process's: the function's clock ahead of
// the database's.
func behind(d time.Duration) func() time.Time { return func() time.Time { return time.Now().Add(-d) } }

// twoPostNotifier's first post waits for first, then panics (a holder whose
// post outlived its lease); its second waits for second, then succeeds.
type twoPostNotifier struct {
	posts         atomic.Int32
	entered       [2]chan struct{}
	first, second chan struct{}
}

func (n *twoPostNotifier) Post(context.Context, string, string, string, []byte) error {
	i := n.posts.Add(1) - 1
	if i < 2 {
		close(n.entered[i])
	}
	if i == 0 {
		<-n.first
		panic("notifier bug after its lease")
	}
	if i == 1 {
		<-n.second
	}
	return nil
}

// A holder fenced out by a copy of its own try, which carries the finish
// under a live lease, is acknowledged whatever the function's clock says:
// here it runs ten seconds ahead of the store's, so the copy's lease ended
// long ago by it. Answered retryable, FC's next try of the request would take
// the live finish over from the copy (its own later try) and post again.
func TestFencedOutHolderReadsTheLeaseOnTheStoresClock(t *testing.T) {
	const lease = time.Second
	rg := newRigClock(t, behind(10*time.Second), &model{}, idempotency.WithLease(lease))
	n := &twoPostNotifier{entered: [2]chan struct{}{make(chan struct{}), make(chan struct{})},
		first: make(chan struct{}), second: make(chan struct{})}
	rg.p.Notify = n
	body := notifyEvent("fenced out by its copy")
	holder, copied := make(chan handler.Reply, 1), make(chan handler.Reply, 1)
	go func() { holder <- rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1"}) }()
	<-n.entered[0]
	time.Sleep(lease + 100*time.Millisecond) // the holder's finish lease ends on the store's clock
	go func() { copied <- rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1"}) }()
	select { // the copy takes the finish over and posts under its live lease
	case <-n.entered[1]:
	case r := <-copied:
		t.Fatalf("the copy answered without posting: %s", r.Body)
	case <-time.After(time.Minute):
		t.Fatal("the copy never posted")
	}
	close(n.first)
	o := outcome(t, <-holder)
	close(n.second)
	c := outcome(t, <-copied)
	if o.Retryable != nil && *o.Retryable || o.ErrorType != "" || o.Status != string(driver.StatusSucceeded) {
		t.Fatalf("the fenced-out holder answered %+v: FC would retry it while its copy posts", o)
	}
	if c.ErrorType != "" || c.Status != string(driver.StatusSucceeded) || n.posts.Load() != 2 {
		t.Fatalf("the copy answered %+v after %d posts", c, n.posts.Load())
	}
}

// A panic in a step answers the decision its lease was granted by, as the
// stats and a non-panicking answer would name it.
func TestPanicAnswersTheLeasesDecision(t *testing.T) {
	cases := []struct {
		name string
		want idempotency.Decision
		try  int
		// before runs what comes ahead of the delivery that panics (request
		// r2); it returns what waits for what it left running.
		before func(t *testing.T, rg *rig, body []byte) (wait func())
	}{
		{"first delivery", idempotency.DecisionFirst, 0, func(*testing.T, *rig, []byte) func() { return func() {} }},
		{"after another request's retryable failure", idempotency.DecisionTakeover, 1,
			func(t *testing.T, rg *rig, body []byte) func() {
				rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1"}) // call 1 fails
				return func() {}
			}},
		{"the same request's later try, its first still running", idempotency.DecisionRepeatSame, 1,
			func(t *testing.T, rg *rig, body []byte) func() {
				done := make(chan struct{})
				go func() { // call 1 blocks until the panic was answered
					defer close(done)
					rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r2"})
				}()
				for rg.m.calls.Load() == 0 {
					time.Sleep(time.Millisecond)
				}
				return func() { <-done }
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			release := make(chan struct{})
			m := &model{fn: func(ctx context.Context, n int32, _ llm.Request) (llm.Response, error) {
				switch {
				case n == 1 && c.want == idempotency.DecisionTakeover:
					return llm.Response{}, idempotency.Retryable("temporary_unavailable", errors.New("503"))
				case n == 1 && c.want == idempotency.DecisionRepeatSame:
					<-release
					return llm.Response{}, idempotency.Retryable("temporary_unavailable", errors.New("late"))
				}
				panic("model SDK bug")
			}}
			rg := newRig(t, m, idempotency.WithRetryBackoff(0))
			body := event("summarize", map[string]any{"content": "decision " + c.name})
			wait := c.before(t, rg, body)
			o := outcome(t, rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r2", RetryCount: c.try}))
			close(release)
			wait()
			if o.ErrorType != "panic" || o.Decision != string(c.want) {
				t.Fatalf("answered %s %s, want a panic answered %s", o.Decision, o.ErrorType, c.want)
			}
		})
	}
}
