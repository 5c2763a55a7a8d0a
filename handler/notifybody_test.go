package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/llm"
	"github.com/idemgate/idemgate/idempotency"
)

// bodies records the bodies of the notifications that got through; the
// first `fail` posts fail (retryably, or FINAL with final).
type bodies struct {
	mu    sync.Mutex
	fail  int
	final bool
	got   [][]byte
	ids   []string // their X-Request-Id
}

func (b *bodies) Post(_ context.Context, _, _, requestID string, body []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.fail > 0 && b.final:
		b.fail--
		return idempotency.Final("notify_rejected", errors.New("notify: HTTP 400"))
	case b.fail > 0:
		b.fail--
		return idempotency.Retryable("temporary_unavailable", errors.New("notify: HTTP 503"))
	}
	b.got, b.ids = append(b.got, append([]byte(nil), body...)), append(b.ids, requestID)
	return nil
}

// The one notification of a task describes the task's effect — K,
// SUCCEEDED, the attempt and result_ref that stand, the request id its
// record keeps (the first request's, not another's that took over) — never
// the delivery that happened to post it: whoever posts it (the first
// delivery, FC's retry of it or a copy, the sweeper, a replay), it says
// "duplicate": false, "decision": "FIRST". A receiver that drops duplicates
// (docs/operations.md) must not drop the only notification it gets.
func TestTheNotificationDescribesTheTaskNotTheDelivery(t *testing.T) {
	const lease = 200 * time.Millisecond
	bg := context.Background()
	replay := handler.ReplayRequest{Reason: "receiver fixed", Operator: "op"}
	tests := []struct {
		name      string
		fail      int  // posts that fail first
		final     bool // ... FINAL (notify_rejected), recorded on the finish
		modelFail bool // the first model call fails retryably
		deliver   func(t *testing.T, rg *rig, body, other []byte)
	}{
		{"first delivery", 0, false, false, func(t *testing.T, rg *rig, body, _ []byte) {
			rg.p.Handle(bg, body, handler.Meta{RequestID: "fc-1", RetryCount: 0})
		}},
		{"FC's retry after a failed post", 1, false, false, func(t *testing.T, rg *rig, body, _ []byte) {
			rg.p.Handle(bg, body, handler.Meta{RequestID: "fc-1", RetryCount: 0})
			rg.p.Handle(bg, body, handler.Meta{RequestID: "fc-1", RetryCount: 1})
		}},
		{"FC's retry taking over a failed task", 0, false, true, func(t *testing.T, rg *rig, body, _ []byte) {
			rg.p.Handle(bg, body, handler.Meta{RequestID: "fc-1", RetryCount: 0})
			rg.p.Handle(bg, body, handler.Meta{RequestID: "fc-1", RetryCount: 1})
		}},
		{"a copy of the holder's request, its try unknown, after the finish lease", 1, false, false, func(t *testing.T, rg *rig, body, _ []byte) {
			rg.p.Handle(bg, body, handler.Meta{RequestID: "fc-1", RetryCount: 0})
			time.Sleep(lease + 100*time.Millisecond)
			rg.p.Handle(bg, body, handler.Meta{RequestID: "fc-1", RetryCount: -1})
		}},
		{"the sweeper's re-drive of the finish", 1, false, false, func(t *testing.T, rg *rig, body, _ []byte) {
			rg.p.Handle(bg, body, handler.Meta{RequestID: "fc-1", RetryCount: 0})
			time.Sleep(lease + 100*time.Millisecond)
			if _, err := rg.p.Sweep(bg, handler.Meta{}, handler.SweepOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
		// Another request of the same key and payload (its own request_id,
		// its own FC request at try 1) takes the finish over: the record
		// keeps the first one's request id, and so does the body.
		{"another request taking over the finish after a failed post", 1, false, false, func(t *testing.T, rg *rig, body, other []byte) {
			rg.p.Handle(bg, body, handler.Meta{RequestID: "fc-1", RetryCount: 0})
			rg.p.Handle(bg, other, handler.Meta{RequestID: "fc-2", RetryCount: 1})
		}},
		{"another request taking over a failed task", 0, false, true, func(t *testing.T, rg *rig, body, other []byte) {
			rg.p.Handle(bg, body, handler.Meta{RequestID: "fc-1", RetryCount: 0})
			time.Sleep(lease + 100*time.Millisecond) // its back-off (at most a lease) is the failed request's own
			rg.p.Handle(bg, other, handler.Meta{RequestID: "fc-2", RetryCount: 1})
		}},
		{"replay --key of a refused notification", 1, true, false, func(t *testing.T, rg *rig, body, _ []byte) {
			rg.p.Handle(bg, body, handler.Meta{RequestID: "fc-1", RetryCount: 0})
			if _, err := rg.p.ReplayKey(bg, outcomeKey(t, body), replay, handler.Meta{}); err != nil {
				t.Fatal(err)
			}
		}},
		{"replay --dlq of a refused notification", 1, true, false, func(t *testing.T, rg *rig, body, _ []byte) {
			rg.p.Handle(bg, body, handler.Meta{RequestID: "fc-1", RetryCount: 0})
			if _, err := rg.p.ReplayDLQ(bg, body, replay, handler.Meta{}); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &model{fn: func(_ context.Context, n int32, _ llm.Request) (llm.Response, error) {
				if tc.modelFail && n == 1 {
					return llm.Response{}, idempotency.Retryable("temporary_unavailable", errors.New("model 503"))
				}
				return llm.Response{Text: "the summary", Model: "scripted"}, nil
			}}
			rg := newRig(t, m, idempotency.WithLease(lease))
			n := &bodies{fail: tc.fail, final: tc.final}
			rg.p.Notify = n
			body := withRequestID(t, notifyEvent(tc.name), "up-1")
			tc.deliver(t, rg, body, withRequestID(t, notifyEvent(tc.name), "up-2"))
			rec, err := rg.store.Get(bg, outcomeKey(t, body))
			if err != nil {
				t.Fatal(err)
			}
			if rec.OriginRequestID != "up-1" {
				t.Fatalf("the record's request id %q, want the first request's up-1", rec.OriginRequestID)
			}
			want, _ := json.Marshal(handler.Outcome{IdempotencyKey: rec.Key, Status: "SUCCEEDED", Duplicate: false,
				Decision: "FIRST", Attempt: rec.Attempt, ResultRef: rec.ResultRef, RequestID: rec.OriginRequestID})
			if len(n.got) != 1 || string(n.got[0]) != string(want) || n.ids[0] != rec.OriginRequestID {
				t.Fatalf("notifications %q, X-Request-Id %q\nwant one: %s, X-Request-Id %s", n.got, n.ids, want, rec.OriginRequestID)
			}
			if tc.modelFail && rec.Attempt != 2 {
				t.Fatalf("attempt %d, want the takeover's 2", rec.Attempt)
			}
		})
	}
}

// withRequestID is the task event body with data.request_id id: the same
// key and payload, another upstream request.
func withRequestID(t *testing.T, body []byte, id string) []byte {
	var ev map[string]any
	if err := json.Unmarshal(body, &ev); err != nil {
		t.Fatal(err)
	}
	ev["data"].(map[string]any)["request_id"] = id
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
