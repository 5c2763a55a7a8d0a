package handler_test

// Adversarial review of the two-statement first delivery (step checkpoints
// on the record, batched finish marks, the duplicate's plain read, the
// publish from memory). Each test reproduces a case that fails on main.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/llm"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/ossresult"
)

// The completer publishes approved/result.md from the text it saved, not
// from the output object. encoding/json stores invalid UTF-8 as U+FFFD, so
// the two differ for such a text: approved/result.md is not what the output
// object (result_ref) says, and every later finish (the sweeper's after a
// lost batch of finish marks, a retry of the same request) reads the object
// back, meets the other approved/result.md and fails the finish FINAL
// (result_conflict): the "no-op" repeat the batch relies on is not one.
func TestReviewPublishFromMemoryMatchesTheOutputObject(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		m := &model{fn: func(context.Context, int32, llm.Request) (llm.Response, error) {
			return llm.Response{Text: "caf\xe9 summary", Model: "custom"}, nil // a Model that passes bytes through
		}}
		// The finish marks are never written: the instance is destroyed
		// without its pre-stop.
		rg := newRigOn(t, store, dir, m, idempotency.WithLease(200*time.Millisecond),
			idempotency.WithFinishBatch(24*time.Hour, 1<<20))
		data := summarizeData("utf8")
		o := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-u", data, ""), handler.Meta{RequestID: "u1"}))
		if o.Status != "SUCCEEDED" || o.ErrorType != "" {
			t.Fatalf("first delivery %+v", o)
		}
		rs, _ := rg.p.Results(context.Background(), handler.Credentials{})
		outKey := strings.TrimPrefix(o.ResultRef, strings.TrimSuffix(rs.Ref("x"), "x"))
		body, _, err := rs.Get(context.Background(), outKey)
		if err != nil {
			t.Fatal(err)
		}
		var out handler.Output
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatal(err)
		}
		approvedKey, _ := ossresult.ApprovedKey(o.IdempotencyKey)
		approved, _, err := rs.Get(context.Background(), approvedKey)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(250 * time.Millisecond) // the finish's lease has run out
		rep, err := rg.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := rg.p.Engine.Flush(context.Background()); err != nil { // the sweeper's process ends
			t.Fatal(err)
		}
		rec, _ := store.Get(context.Background(), o.IdempotencyKey)
		if string(approved) != out.Text || rec.Finish != driver.FinishDone {
			t.Fatalf("approved/result.md %q, output object %q; after the sweeper's repeat the finish is %s (%s): %+v",
				approved, out.Text, rec.Finish, rec.LastErrorCode, rep.Results)
		}
	})
}
