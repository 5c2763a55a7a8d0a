package idemtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
)

// Maintainable is a store with the sweeper's, replay's and stats' operations.
type Maintainable interface {
	idempotency.Store
	idempotency.Maintainer
	idempotency.StatsSink
}

func candidates(t *testing.T, s Maintainable) []idempotency.Record {
	t.Helper()
	got, err := s.Candidates(context.Background(), 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// RunMaintenance checks the maintenance operations on an empty store (the
// candidate scan sees the whole store).
func RunMaintenance(t *testing.T, s Maintainable) {
	ctx := context.Background()
	e := idempotency.New(s, idempotency.WithLogger(testLogger(t)), idempotency.WithMaxAttempts(1))
	do := func(owner string, r idempotency.ClaimRequest, err error) idempotency.Record {
		_, _ = e.Do(ctx, r, func(context.Context, *idempotency.Lease) (string, error) { return "ref-" + owner, err })
		return get(t, e, r.Key)
	}
	done := do("a", req(NewKey(), "a"), nil)
	failed := do("b", req(NewKey(), "b"), idempotency.Retryable("timeout", errors.New("slow"))) // budget 1: FAILED_FINAL
	expired := NewKey()
	claim(t, e, short(req(expired, "c")))
	live := NewKey()
	claim(t, e, req(live, "d"))
	unfinished := NewKey() // completed, its finish's holder died
	r := short(req(unfinished, "f"))
	r.FinishAfter = true
	_, lf := claim(t, e, r)
	if err := lf.Complete(ctx, "ref"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(shortLease + 150*time.Millisecond)

	t.Run("Candidates", func(t *testing.T) {
		got, err := s.Candidates(ctx, 50, 0)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]idempotency.Status{}
		for _, r := range got {
			seen[r.Key] = r.Status
		}
		if seen[expired] != idempotency.StatusRunning {
			t.Errorf("expired lease not a candidate: %v", seen)
		}
		if _, ok := seen[live]; ok {
			t.Error("a live lease is a candidate")
		}
		if _, ok := seen[failed.Key]; ok {
			t.Error("a FAILED_FINAL record is a candidate")
		}
		if _, ok := seen[done.Key]; ok {
			t.Error("a SUCCEEDED record with nothing to finish is a candidate")
		}
		if seen[unfinished] != idempotency.StatusSucceeded {
			t.Error("a SUCCEEDED record whose finish's holder died is not a candidate")
		}
		if got, _ := s.Candidates(ctx, 1, 0); len(got) != 1 {
			t.Errorf("limit 1 gave %d", len(got))
		}
		if got, _ := s.Candidates(ctx, 50, time.Hour); len(got) != 1 || got[0].Key != expired {
			t.Errorf("with an hour's grace only the expired lease is due: %v", got)
		}
	})
	t.Run("DeferHidesUntilATakeover", func(t *testing.T) {
		rec := get(t, e, expired)
		if err := s.Defer(ctx, rec, time.Hour); err != nil {
			t.Fatal(err)
		}
		changed := rec
		changed.Fence++
		if err := s.Defer(ctx, changed, 0); err != nil { // not as listed: no effect
			t.Fatal(err)
		}
		for _, c := range candidates(t, s) {
			if c.Key == expired {
				t.Fatal("a deferred record is a candidate")
			}
		}
		if got := get(t, e, expired); !got.UpdatedAt.Equal(rec.UpdatedAt) || got.SweepAfter.Before(time.Now().Add(59*time.Minute)) {
			t.Fatalf("defer: updated_at %v → %v, sweep_after %v", rec.UpdatedAt, got.UpdatedAt, got.SweepAfter)
		}
		if _, l := claim(t, e, short(req(expired, "g"))); l == nil { // FC's retry takes it over
			t.Fatal("no takeover")
		}
		if !get(t, e, expired).SweepAfter.IsZero() {
			t.Fatal("a takeover kept the deferral")
		}
		time.Sleep(shortLease + 150*time.Millisecond)
		found := false
		for _, c := range candidates(t, s) {
			found = found || c.Key == expired
		}
		if !found {
			t.Fatal("after the takeover's lease ran out the record is not a candidate again")
		}
	})
	t.Run("ResetRefusesAnotherPayload", func(t *testing.T) {
		before := get(t, e, failed.Key)
		_, _, err := s.Reset(ctx, failed.Key, idempotency.Replay{Reason: "dlq", Operator: "op", Source: "dlq", PayloadHash: "other"})
		if !errors.Is(err, idempotency.ErrPayloadMismatch) || !strings.Contains(err.Error(), "other") ||
			!strings.Contains(err.Error(), before.PayloadHash) {
			t.Fatalf("err %v", err)
		}
		if after := get(t, e, failed.Key); after.Status != before.Status || after.Fence != before.Fence {
			t.Fatalf("changed: %+v", after)
		}
		if rps, _ := s.Replays(ctx, failed.Key); len(rps) != 0 {
			t.Fatalf("a refused replay was audited: %+v", rps)
		}
	})
	t.Run("ResetAuditsAndReopens", func(t *testing.T) {
		prior, after, err := s.Reset(ctx, failed.Key, idempotency.Replay{Reason: "fixed", Operator: "op", Source: "key",
			PayloadHash: failed.PayloadHash})
		if err != nil || prior.Status != idempotency.StatusFailedFinal {
			t.Fatalf("reset: %+v %v", prior, err)
		}
		if after.Status != idempotency.StatusReceived || after.Fence != prior.Fence+1 {
			t.Fatalf("after the reset: %s@%d, want RECEIVED@%d (a new fence)", after.Status, after.Fence, prior.Fence+1)
		}
		if got := get(t, e, failed.Key); got.Fence != after.Fence || got.Status != idempotency.StatusReceived {
			t.Fatalf("stored: %s@%d", got.Status, got.Fence)
		}
		res, l := claim(t, e, req(failed.Key, "e"))
		if l == nil || res.Decision != idempotency.DecisionTakeover || l.Attempt != failed.Attempt+1 || l.Fence != after.Fence+1 {
			t.Fatalf("after reset: %+v", res)
		}
		rps, err := s.Replays(ctx, failed.Key)
		if err != nil || len(rps) != 1 || rps[0].Reason != "fixed" || rps[0].Operator != "op" ||
			rps[0].PriorStatus != idempotency.StatusFailedFinal {
			t.Fatalf("audit %+v %v", rps, err)
		}
	})
	t.Run("ResetLeavesSucceededAlone", func(t *testing.T) {
		prior, _, err := s.Reset(ctx, done.Key, idempotency.Replay{Reason: "check", Operator: "op", Source: "key"})
		if err != nil || prior.Status != idempotency.StatusSucceeded || get(t, e, done.Key).Status != idempotency.StatusSucceeded {
			t.Fatalf("%+v %v", prior, err)
		}
	})
	t.Run("ResetRefusesLiveLease", func(t *testing.T) {
		if _, _, err := s.Reset(ctx, live, idempotency.Replay{Reason: "x", Operator: "op"}); !errors.Is(err, idempotency.ErrNotReplayable) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("ResetUnknownKeyIsAudited", func(t *testing.T) {
		k := NewKey()
		prior, _, err := s.Reset(ctx, k, idempotency.Replay{Reason: "dlq", Operator: "op", Source: "dlq"})
		if err != nil || prior.Status != "" {
			t.Fatalf("%+v %v", prior, err)
		}
		if rps, _ := s.Replays(ctx, k); len(rps) != 1 {
			t.Fatalf("audit rows %d", len(rps))
		}
	})
	t.Run("ResetKeepsCheckpoints", func(t *testing.T) {
		k := NewKey()
		_, l := claim(t, e, req(k, "s"))
		if _, err := l.Step(ctx, "generate", func(context.Context) (string, error) { return "output-1", nil }); err != nil {
			t.Fatal(err)
		}
		_, _ = l.Fail(ctx, idempotency.Final("policy_rejected", errors.New("no")))
		if _, _, err := s.Reset(ctx, k, idempotency.Replay{Reason: "policy relaxed", Operator: "op"}); err != nil {
			t.Fatal(err)
		}
		_, l2 := claim(t, e, req(k, "s2"))
		out, err := l2.Step(ctx, "generate", func(context.Context) (string, error) { return "", errors.New("ran again") })
		if err != nil || out != "output-1" {
			t.Fatalf("after reset: %q %v", out, err)
		}
	})
	t.Run("ResetOfSucceededReopensAFailedFinish", func(t *testing.T) {
		k := NewKey()
		r := req(k, "p")
		r.FinishAfter = true
		_, l := claim(t, e, r)
		if err := l.Complete(ctx, "ref"); err != nil {
			t.Fatal(err)
		}
		if err := l.Finisher().Fail(ctx, idempotency.Final("permission_denied", errors.New("403"))); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Reset(ctx, k, idempotency.Replay{Reason: "role fixed", Operator: "op"}); err != nil {
			t.Fatal(err)
		}
		rec := get(t, e, k)
		if rec.Status != idempotency.StatusSucceeded || rec.ResultRef != "ref" || rec.Finish != idempotency.FinishPending {
			t.Fatalf("after reset: %s %q finish %s", rec.Status, rec.ResultRef, rec.Finish)
		}
		if res, g, err := e.ClaimFinish(ctx, k, "replay", -1); err != nil || g == nil {
			t.Fatalf("the reopened finish is not claimable at once: %s %v", res.Decision, err)
		}
	})
	t.Run("Stats", func(t *testing.T) {
		m := time.Now().UTC().Truncate(time.Minute).Add(-time.Minute)
		rows := []idempotency.StatRow{{Minute: m, Name: "first", Count: 2}, {Minute: m, Name: "fast_reject", Count: 1}}
		for range 2 {
			if err := s.AddStats(ctx, rows); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Stats(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		sum := map[string]int64{}
		for _, r := range got {
			if r.Minute.Equal(m) {
				sum[r.Name] += r.Count
			}
		}
		if sum["first"] != 4 || sum["fast_reject"] != 2 {
			t.Fatalf("stats %v", got)
		}
	})
}
