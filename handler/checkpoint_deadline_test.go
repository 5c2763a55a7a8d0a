package handler_test

// Adversarial review of the two-statement first delivery (step checkpoints
// on the record, batched finish marks, the duplicate's plain read, the
// publish from memory). Each test reproduces a case that fails on main.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/idempotency/driver"
)

// A step whose work ends as the invocation's deadline passes (it did not
// watch its context, or returned right at the edge) is done, but its
// checkpoint is written on the expired context and never lands: FC's retry
// runs the step again. The per-step records this replaced wrote the step's
// completion detached, like Complete and Fail.
func TestReviewCheckpointAtTheDeadlineIsNotLost(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		rg := newRigOn(t, store, dir, &model{})
		var prepRuns atomic.Int32
		reg := &handler.Registry{}
		reg.MustRegister(handler.TaskType{Name: "two_steps", Steps: []handler.Step{
			{Name: "prep", Run: func(ctx context.Context, in *handler.StepInput) (string, error) {
				if prepRuns.Add(1) == 1 { // a side effect (a reservation, a charge) …
					<-ctx.Done() // … whose call returns as the invocation times out
				}
				return "reserved-42", nil
			}},
			{Name: "out", Run: func(ctx context.Context, in *handler.StepInput) (string, error) {
				return in.SaveOutput(ctx, handler.Output{Text: "done with " + in.Prior["prep"]})
			}},
		}})
		rg.p.Tasks = reg
		body := event("two_steps", map[string]any{"text": "x"})
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		o1 := outcome(t, rg.p.Handle(ctx, body, handler.Meta{RequestID: "r1", RetryCount: 0}))
		cancel()
		if o1.Status == "SUCCEEDED" {
			t.Fatalf("first try %+v: the deadline did not end it", o1)
		}
		o2 := outcome(t, rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1", RetryCount: 1}))
		if o2.Status != "SUCCEEDED" {
			t.Fatalf("retry %+v", o2)
		}
		if n := prepRuns.Load(); n != 1 {
			rec, _ := store.Get(context.Background(), o2.IdempotencyKey)
			t.Fatalf("step prep ran %d times (first try %s %s); checkpoints now %v", n, o1.Status, o1.ErrorMessage, rec.Steps)
		}
	})
}
