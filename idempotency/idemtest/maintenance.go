package idemtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/keys"
)

// Maintainable is a store with the sweeper's, replay's and stats' operations.
type Maintainable interface {
	idempotency.Store
	Candidates(ctx context.Context, limit int, grace time.Duration) ([]idempotency.Record, error)
	Reset(ctx context.Context, key string, rp idempotency.Replay) (idempotency.Record, error)
	Replays(ctx context.Context, key string) ([]idempotency.Replay, error)
	AddStats(ctx context.Context, rows []idempotency.StatRow) error
	Stats(ctx context.Context, since time.Time) ([]idempotency.StatRow, error)
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
		if seen[done.Key] != idempotency.StatusSucceeded {
			t.Error("a SUCCEEDED record without its publish step is not a candidate")
		}
		if got, _ := s.Candidates(ctx, 1, 0); len(got) != 1 {
			t.Errorf("limit 1 gave %d", len(got))
		}
		if got, _ := s.Candidates(ctx, 50, time.Hour); len(got) != 1 || got[0].Key != expired {
			t.Errorf("with an hour's grace only the expired lease is due: %v", got)
		}
	})
	t.Run("ResetAuditsAndReopens", func(t *testing.T) {
		prior, err := s.Reset(ctx, failed.Key, idempotency.Replay{Reason: "fixed", Operator: "op", Source: "key"})
		if err != nil || prior.Status != idempotency.StatusFailedFinal {
			t.Fatalf("reset: %+v %v", prior, err)
		}
		res, l := claim(t, e, req(failed.Key, "e"))
		if l == nil || res.Decision != idempotency.DecisionTakeover || l.Attempt != failed.Attempt+1 {
			t.Fatalf("after reset: %+v", res)
		}
		rps, err := s.Replays(ctx, failed.Key)
		if err != nil || len(rps) != 1 || rps[0].Reason != "fixed" || rps[0].Operator != "op" ||
			rps[0].PriorStatus != idempotency.StatusFailedFinal {
			t.Fatalf("audit %+v %v", rps, err)
		}
	})
	t.Run("ResetLeavesSucceededAlone", func(t *testing.T) {
		prior, err := s.Reset(ctx, done.Key, idempotency.Replay{Reason: "check", Operator: "op", Source: "key"})
		if err != nil || prior.Status != idempotency.StatusSucceeded || get(t, e, done.Key).Status != idempotency.StatusSucceeded {
			t.Fatalf("%+v %v", prior, err)
		}
	})
	t.Run("ResetRefusesLiveLease", func(t *testing.T) {
		if _, err := s.Reset(ctx, live, idempotency.Replay{Reason: "x", Operator: "op"}); !errors.Is(err, idempotency.ErrNotReplayable) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("ResetUnknownKeyIsAudited", func(t *testing.T) {
		k := NewKey()
		prior, err := s.Reset(ctx, k, idempotency.Replay{Reason: "dlq", Operator: "op", Source: "dlq"})
		if err != nil || prior.Status != "" {
			t.Fatalf("%+v %v", prior, err)
		}
		if rps, _ := s.Replays(ctx, k); len(rps) != 1 {
			t.Fatalf("audit rows %d", len(rps))
		}
	})
	t.Run("ResetReopensFailedSteps", func(t *testing.T) {
		k := NewKey()
		_, l := claim(t, e, req(k, "s"))
		if _, err := l.Step(ctx, "generate", func(context.Context) (string, error) {
			return "", idempotency.Final("policy_rejected", errors.New("no"))
		}); err == nil {
			t.Fatal("step did not fail")
		}
		_, _ = l.Fail(ctx, idempotency.Final("policy_rejected", errors.New("no")))
		if _, err := s.Reset(ctx, k, idempotency.Replay{Reason: "policy relaxed", Operator: "op"}); err != nil {
			t.Fatal(err)
		}
		step := get(t, e, keys.OpKey(k, "generate"))
		if step.Status != idempotency.StatusReceived {
			t.Fatalf("failed step after reset: %s", step.Status)
		}
	})
	t.Run("ResetOfSucceededReopensFailedFinishSteps", func(t *testing.T) {
		k := NewKey()
		_, l := claim(t, e, req(k, "p"))
		if err := l.Complete(ctx, "ref"); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Step(ctx, "publish", func(context.Context) (string, error) {
			return "", idempotency.Final("permission_denied", errors.New("403"))
		}); err == nil {
			t.Fatal("publish did not fail")
		}
		if _, err := s.Reset(ctx, k, idempotency.Replay{Reason: "role fixed", Operator: "op"}); err != nil {
			t.Fatal(err)
		}
		if get(t, e, k).Status != idempotency.StatusSucceeded {
			t.Fatal("the result was reset")
		}
		if st := get(t, e, keys.OpKey(k, "publish")); st.Status != idempotency.StatusReceived {
			t.Fatalf("failed publish after reset: %s", st.Status)
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
