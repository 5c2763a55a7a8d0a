package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/ossresult"
)

// notifier counts successful posts; fail makes the next posts fail retryably.
type notifier struct {
	posts atomic.Int32
	fail  atomic.Int32
	delay time.Duration
}

func (n *notifier) Post(ctx context.Context, url, key, requestID string, body []byte) error {
	time.Sleep(n.delay)
	if n.fail.Load() > 0 {
		n.fail.Add(-1)
		return idempotency.Retryable("temporary_unavailable", errors.New("503"))
	}
	n.posts.Add(1)
	return nil
}

func notifyEvent(content string) []byte {
	b, _ := json.Marshal(map[string]any{"id": "ev-n", "source": "test", "specversion": "1.0", "type": "t",
		"datacontenttype": "application/json", "data": map[string]any{"tenant_id": "t1", "task_type": "summarize",
			"operation": "summarize", "input": map[string]any{"content": content}, "notify": map[string]any{"url": "http://hook.invalid/x"}}})
	return b
}

// Two copies of one FC retry arriving together must not both post the
// notification (the step claim follows the same-try rule).
func TestConcurrentCopiesOfARetryNotifyOnce(t *testing.T) {
	rg := newRig(t, &model{})
	n := &notifier{delay: 100 * time.Millisecond}
	n.fail.Store(1)
	rg.p.Notify = n
	body := notifyEvent("notify once")
	if r := rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1", RetryCount: 0}); r.Status != 404 {
		t.Fatalf("first try should fail on notify: %s", r.Body)
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1", RetryCount: 1}) })
	}
	wg.Wait()
	if n.posts.Load() != 1 {
		t.Fatalf("notifications %d, want 1", n.posts.Load())
	}
}

// results fails the first n PutOnce calls of input.json retryably.
type flakyInput struct {
	handler.ResultStore
	fails atomic.Int32
}

func (f *flakyInput) PutOnce(ctx context.Context, key string, body []byte, ct string, m ossresult.Meta) (string, error) {
	if len(key) > 10 && key[len(key)-10:] == "input.json" && f.fails.Add(-1) >= 0 {
		return "", fmt.Errorf("oss 503: %w", idempotency.Retryable("temporary_unavailable", errors.New("503")))
	}
	return f.ResultStore.PutOnce(ctx, key, body, ct, m)
}

// A transient failure to save the input leaves the record for FC's retry:
// the sweeper does not turn it final.
func TestSweepLeavesTransientInputFailureToFC(t *testing.T) {
	rg := newRig(t, &model{})
	base, _ := rg.p.Results(context.Background(), handler.Credentials{})
	flaky := &flakyInput{ResultStore: base}
	flaky.fails.Store(1)
	rg.p.Results = func(context.Context, handler.Credentials) (handler.ResultStore, error) { return flaky, nil }
	body := event("summarize", map[string]any{"content": "flaky input"})
	if r := rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1"}); r.Status != 404 {
		t.Fatalf("first try: %s", r.Body)
	}
	rep, err := rg.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{})
	if err != nil {
		t.Fatal(err)
	}
	k := outcomeKey(t, body)
	if rec, _ := rg.store.Get(context.Background(), k); rec.Status != driver.StatusFailedRetryable {
		t.Fatalf("after the sweep: %s (%+v)", rec.Status, rep)
	}
	if o := outcome(t, rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1", RetryCount: 1})); o.Status != "SUCCEEDED" {
		t.Fatalf("FC's retry: %+v", o)
	}
}

// A dead letter of a SUCCEEDED key whose notification kept failing: the
// replay posts it (and does not run the task again).
func TestReplayDLQFinishesNotify(t *testing.T) {
	m := &model{}
	rg := newRig(t, m)
	n := &notifier{}
	n.fail.Store(100)
	rg.p.Notify = n
	body := notifyEvent("replay notify")
	for try := range 3 {
		rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1", RetryCount: try})
	}
	if n.posts.Load() != 0 {
		t.Fatal("posted while failing")
	}
	n.fail.Store(0)
	outs, err := rg.p.ReplayDLQ(context.Background(), body, handler.ReplayRequest{Reason: "hook fixed", Operator: "op"}, handler.Meta{})
	if err != nil || len(outs) != 1 || outs[0].Failed() {
		t.Fatalf("replay %+v %v", outs, err)
	}
	if n.posts.Load() != 1 || m.calls.Load() != 1 {
		t.Fatalf("posts %d model calls %d", n.posts.Load(), m.calls.Load())
	}
}

// inputPanics is a result store whose read of one key's input.json panics:
// a bug the sweeper meets on one record.
type inputPanics struct {
	handler.ResultStore
	key string
}

func (s inputPanics) Get(ctx context.Context, key string) ([]byte, ossresult.Meta, error) {
	if in, _ := ossresult.InputKey(s.key); key == in {
		panic("result store SDK bug reading " + key)
	}
	return s.ResultStore.Get(ctx, key)
}

// A panic on one record sets it aside: the sweep finishes the others, and
// the next sweep does not meet the record first again (the panic ended the
// whole sweep, on that record, on every run).
func TestSweepSetsAsideARecordThatPanics(t *testing.T) {
	rg := newRig(t, &model{}, idempotency.WithLease(200*time.Millisecond))
	n := &notifier{}
	n.fail.Store(2) // both first deliveries leave their finish pending
	rg.p.Notify = n
	for _, c := range []string{"a", "b"} {
		rg.p.Handle(context.Background(), notifyEvent(c), handler.Meta{RequestID: "r-" + c})
	}
	bad := outcomeKey(t, notifyEvent("a"))
	rs, _ := rg.p.Results(context.Background(), handler.Credentials{})
	rg.p.Results = func(context.Context, handler.Credentials) (handler.ResultStore, error) {
		return inputPanics{rs, bad}, nil
	}
	time.Sleep(300 * time.Millisecond) // the holders' finish leases end
	rep, err := rg.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{})
	if err != nil || rep.Scanned != 2 || rep.Deferred != 1 || n.posts.Load() != 1 {
		t.Fatalf("sweep %+v %v, posts %d", rep, err, n.posts.Load())
	}
	if rec, err := rg.store.Get(context.Background(), outcomeKey(t, notifyEvent("b"))); err != nil || rec.Finish != driver.FinishDone {
		t.Fatalf("the other record: %+v %v", rec, err)
	}
	if rec, err := rg.store.Get(context.Background(), bad); err != nil || !rec.SweepAfter.After(time.Now().Add(30*time.Second)) {
		t.Fatalf("the record that panicked is not set aside: %+v %v", rec, err)
	}
	if rep, err := rg.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{}); err != nil || rep.Scanned != 0 {
		t.Fatalf("next sweep %+v %v: the record set aside heads it", rep, err)
	}
}
