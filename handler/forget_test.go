package handler_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/ossresult"
)

var forgetWhy = handler.ReplayRequest{Reason: "wrong summary", Operator: "ops"}

// failingDelete is the local store whose deletes fail (an operator without
// oss:DeleteObject).
type failingDelete struct{ *ossresult.Local }

func (failingDelete) Delete(context.Context, string) error { return errors.New("AccessDenied") }

// noDelete is a result store that cannot delete at all.
type noDelete struct{ handler.ResultStore }

func succeeded(t *testing.T, rg *rig, content string) (handler.Outcome, string) {
	t.Helper()
	o := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-1", order("o-1", content), ""), handler.Meta{RequestID: "r1"}))
	if o.Status != "SUCCEEDED" {
		t.Fatalf("%+v", o)
	}
	if err := rg.p.Engine.Flush(context.Background()); err != nil { // the batched finish mark: a finish still held is refused
		t.Fatal(err)
	}
	in, _ := ossresult.InputKey(o.IdempotencyKey)
	return o, filepath.Join(rg.dir, "results", in)
}

// Refused, changing nothing: a live lease, objects that cannot be deleted,
// a store that cannot delete, an unknown key.
func TestForgetRefusals(t *testing.T) {
	ctx := context.Background()
	t.Run("a live lease", func(t *testing.T) {
		rg := newRig(t, &model{})
		k := "6c0a" + strings.Repeat("0", 60)
		local, _ := ossresult.NewLocal(filepath.Join(rg.dir, "results"))
		in, _ := ossresult.InputKey(k)
		if _, err := local.PutOnce(ctx, in, []byte(`{}`), "application/json", ossresult.Meta{}); err != nil {
			t.Fatal(err)
		}
		if _, l, err := rg.p.Engine.Claim(ctx, idempotency.ClaimRequest{Key: k, PayloadHash: "p", Owner: "w"}); err != nil || l == nil {
			t.Fatalf("claim: %v", err)
		}
		if _, err := rg.p.Forget(ctx, k, forgetWhy, handler.Meta{}); !errors.Is(err, driver.ErrNotReplayable) {
			t.Fatalf("forget under a live lease: %v", err)
		}
		if _, err := os.Stat(filepath.Join(rg.dir, "results", in)); err != nil {
			t.Fatalf("an object went: %v", err)
		}
	})
	for _, c := range []struct {
		name  string
		store func(*ossresult.Local) handler.ResultStore
		says  string
	}{
		{"deletes refused", func(l *ossresult.Local) handler.ResultStore { return failingDelete{l} }, "AccessDenied"},
		{"a store that cannot delete", func(l *ossresult.Local) handler.ResultStore { return noDelete{l} }, "cannot delete"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rg := newRig(t, &model{})
			o, _ := succeeded(t, rg, "x")
			before, _ := rg.p.Engine.Get(ctx, o.IdempotencyKey)
			local, _ := ossresult.NewLocal(filepath.Join(rg.dir, "results"))
			rg.p.Results = func(context.Context, handler.Credentials) (handler.ResultStore, error) { return c.store(local), nil }
			if _, err := rg.p.Forget(ctx, o.IdempotencyKey, forgetWhy, handler.Meta{}); err == nil || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("forget: %v, want an error saying %s", err, c.says)
			}
			after, _ := rg.p.Engine.Get(ctx, o.IdempotencyKey)
			rps, _ := rg.store.Replays(ctx, o.IdempotencyKey)
			if after.Status != driver.StatusSucceeded || after.Fence != before.Fence || after.ResultRef != before.ResultRef || len(rps) != 0 {
				t.Fatalf("changed: %+v, audit %v", after, rps)
			}
		})
	}
	t.Run("an unknown key", func(t *testing.T) {
		rg := newRig(t, &model{})
		if _, err := rg.p.Forget(ctx, strings.Repeat("ab", 32), forgetWhy, handler.Meta{}); !errors.Is(err, handler.ErrUnknownKey) {
			t.Fatalf("%v", err)
		}
	})
	t.Run("no reason", func(t *testing.T) {
		rg := newRig(t, &model{})
		o, input := succeeded(t, rg, "x")
		if _, err := rg.p.Forget(ctx, o.IdempotencyKey, handler.ReplayRequest{Operator: "ops"}, handler.Meta{}); err == nil {
			t.Fatal("forgotten without a reason")
		}
		if _, err := os.Stat(input); err != nil {
			t.Fatal(err)
		}
	})
}

// A forgotten key runs again, and its new life meets none of the old
// objects: an old output left behind would be salvaged or published as the
// new life's (issue 20 case 1, for forget).
func TestForgottenKeyStartsANewLife(t *testing.T) {
	ctx := context.Background()
	m := &model{}
	rg := newRig(t, m)
	first, input := succeeded(t, rg, "the same document")
	if _, err := rg.p.Forget(ctx, first.IdempotencyKey, forgetWhy, handler.Meta{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(input); !os.IsNotExist(err) {
		t.Fatalf("input.json stayed: %v", err)
	}
	again := outcome(t, rg.p.Handle(ctx, taskBody("ev-1", order("o-1", "the same document"), ""), handler.Meta{RequestID: "r2"}))
	if again.Status != "SUCCEEDED" || again.Attempt != 1 || again.Decision == "REPEAT_DONE" || m.calls.Load() != 2 {
		t.Fatalf("after the forget: %+v, %d model calls", again, m.calls.Load())
	}
	rps, err := rg.store.Replays(ctx, first.IdempotencyKey)
	if err != nil || len(rps) != 1 || rps[0].Source != "forget" || rps[0].Operator != "ops" {
		t.Fatalf("audit %+v %v", rps, err)
	}
}

// A purged key's tombstone answers re-sends while its objects may live
// (docs/design.md §6); forget deletes the objects, then the tombstone's
// answer: the key's next delivery runs again and meets none of the old life.
// The key still names the same action: another payload under it stays a
// mismatch (forget re-runs an action, it does not hand its key to another).
func TestForgetOfATombstone(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		ctx := context.Background()
		rg := newRigOn(t, store, dir, &model{})
		a := outcome(t, rg.p.Handle(ctx, taskBody("ev-a", orderData("document A"), ""), handler.Meta{RequestID: "ra"}))
		purgeAged(t, rg, handler.Retention{Records: 300 * time.Millisecond, Tombstones: time.Hour})
		tomb, err := store.Get(ctx, a.IdempotencyKey)
		if err != nil || !tomb.Tombstone {
			t.Fatalf("after the purge: %+v %v, want a tombstone", tomb, err)
		}
		rep, err := rg.p.Forget(ctx, a.IdempotencyKey, forgetWhy, handler.Meta{})
		if err != nil || rep.PriorStatus != "SUCCEEDED" {
			t.Fatalf("forget: %+v %v", rep, err)
		}
		again := outcome(t, rg.p.Handle(ctx, taskBody("ev-a2", orderData("document A"), ""), handler.Meta{RequestID: "ra2"}))
		if again.Status != "SUCCEEDED" || again.Attempt != 1 || again.Decision == "REPEAT_DONE" || rg.m.calls.Load() != 2 {
			t.Fatalf("after the forget: %+v, %d model calls", again, rg.m.calls.Load())
		}
		if rec, err := store.Get(ctx, a.IdempotencyKey); err != nil || rec.Tombstone || rec.Fence <= tomb.Fence {
			t.Fatalf("the new life: %+v %v", rec, err)
		}
		approved, _ := ossresult.ApprovedKey(a.IdempotencyKey)
		if _, _, err := mustLocal(t, dir).Get(ctx, approved); err != nil {
			t.Fatalf("the new life's approved result: %v", err)
		}
		b := outcome(t, rg.p.Handle(ctx, taskBody("ev-b", orderData("document B"), ""), handler.Meta{RequestID: "rb"}))
		if b.ErrorType != "payload_mismatch" || rg.m.calls.Load() != 2 {
			t.Fatalf("another payload under the key: %+v", b)
		}
	})
}

func mustLocal(t *testing.T, dir string) *ossresult.Local {
	t.Helper()
	l, err := ossresult.NewLocal(filepath.Join(dir, "results"))
	if err != nil {
		t.Fatal(err)
	}
	return l
}
