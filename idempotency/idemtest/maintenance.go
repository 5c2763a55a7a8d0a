package idemtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
)

func candidates(t *testing.T, s driver.Maintainer) []driver.Record {
	t.Helper()
	got, err := s.Candidates(context.Background(), 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// maintFixture is the store state RunMaintenance's cases share.
type maintFixture struct {
	s                         driver.Maintainer
	e                         *idempotency.Engine
	ctx                       context.Context
	done, failed              driver.Record
	expired, live, unfinished string
}

// RunMaintenance checks the maintenance operations on an empty store (the
// candidate scan sees the whole store).
func RunMaintenance(t *testing.T, s driver.Maintainer) {
	ctx := context.Background()
	e := idempotency.New(s, idempotency.WithLogger(TestLogger(t)), idempotency.WithMaxAttempts(1))
	do := func(owner string, r idempotency.ClaimRequest, err error) driver.Record {
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
	f := &maintFixture{s: s, e: e, ctx: ctx, done: done, failed: failed, expired: expired, live: live, unfinished: unfinished}
	t.Run("Candidates", f.candidates)
	t.Run("DeferHidesUntilATakeover", f.deferHidesUntilATakeover)
	t.Run("ResetRefusesAnotherPayload", f.resetRefusesAnotherPayload)
	t.Run("ResetAuditsAndReopens", f.resetAuditsAndReopens)
	t.Run("ResetLeavesSucceededAlone", f.resetLeavesSucceededAlone)
	t.Run("ResetRefusesLiveLease", f.resetRefusesLiveLease)
	t.Run("ResetUnknownKeyIsAudited", f.resetUnknownKeyIsAudited)
	t.Run("ResetKeepsCheckpoints", f.resetKeepsCheckpoints)
	t.Run("ResetClearsTheBackoff", f.resetClearsTheBackoff)
	t.Run("ResetOfSucceededReopensAFailedFinish", f.resetOfSucceededReopensAFailedFinish)
	t.Run("TraceParentOfTheFirstDelivery", func(t *testing.T) { traceFirst(t, s) })
	t.Run("Stats", f.stats)
}

func (f *maintFixture) candidates(t *testing.T) {
	s, ctx, done, failed, expired, live, unfinished := f.s, f.ctx, f.done, f.failed, f.expired, f.live, f.unfinished

	got, err := s.Candidates(ctx, 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]driver.Status{}
	for _, r := range got {
		seen[r.Key] = r.Status
	}
	if seen[expired] != driver.StatusRunning {
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
	if seen[unfinished] != driver.StatusSucceeded {
		t.Error("a SUCCEEDED record whose finish's holder died is not a candidate")
	}
	if got, _ := s.Candidates(ctx, 1, 0); len(got) != 1 {
		t.Errorf("limit 1 gave %d", len(got))
	}
	if got, _ := s.Candidates(ctx, 50, time.Hour); len(got) != 1 || got[0].Key != expired {
		t.Errorf("with an hour's grace only the expired lease is due: %v", got)
	}
}

func (f *maintFixture) deferHidesUntilATakeover(t *testing.T) {
	s, e, ctx, expired := f.s, f.e, f.ctx, f.expired

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
}

func (f *maintFixture) resetRefusesAnotherPayload(t *testing.T) {
	s, e, ctx, failed := f.s, f.e, f.ctx, f.failed

	before := get(t, e, failed.Key)
	_, _, err := s.Reset(ctx, failed.Key, driver.Replay{Reason: "dlq", Operator: "op", Source: "dlq", PayloadHash: "other"})
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
}

func (f *maintFixture) resetAuditsAndReopens(t *testing.T) {
	s, e, ctx, failed := f.s, f.e, f.ctx, f.failed

	prior, after, err := s.Reset(ctx, failed.Key, driver.Replay{Reason: "fixed", Operator: "op", Source: "key",
		PayloadHash: failed.PayloadHash})
	if err != nil || prior.Status != driver.StatusFailedFinal {
		t.Fatalf("reset: %+v %v", prior, err)
	}
	if after.Status != driver.StatusReceived || after.Fence != prior.Fence+1 {
		t.Fatalf("after the reset: %s@%d, want RECEIVED@%d (a new fence)", after.Status, after.Fence, prior.Fence+1)
	}
	if got := get(t, e, failed.Key); got.Fence != after.Fence || got.Status != driver.StatusReceived {
		t.Fatalf("stored: %s@%d", got.Status, got.Fence)
	}
	res, l := claim(t, e, req(failed.Key, "e"))
	if l == nil || res.Decision != idempotency.DecisionTakeover || l.Attempt != failed.Attempt+1 || l.Fence != after.Fence+1 {
		t.Fatalf("after reset: %+v", res)
	}
	rps, err := s.Replays(ctx, failed.Key)
	if err != nil || len(rps) != 1 || rps[0].Reason != "fixed" || rps[0].Operator != "op" ||
		rps[0].PriorStatus != driver.StatusFailedFinal {
		t.Fatalf("audit %+v %v", rps, err)
	}
}

func (f *maintFixture) resetLeavesSucceededAlone(t *testing.T) {
	s, e, ctx, done := f.s, f.e, f.ctx, f.done

	prior, _, err := s.Reset(ctx, done.Key, driver.Replay{Reason: "check", Operator: "op", Source: "key"})
	if err != nil || prior.Status != driver.StatusSucceeded || get(t, e, done.Key).Status != driver.StatusSucceeded {
		t.Fatalf("%+v %v", prior, err)
	}
}

func (f *maintFixture) resetRefusesLiveLease(t *testing.T) {
	s, ctx, live := f.s, f.ctx, f.live

	if _, _, err := s.Reset(ctx, live, driver.Replay{Reason: "x", Operator: "op"}); !errors.Is(err, driver.ErrNotReplayable) {
		t.Fatalf("err %v", err)
	}
}

func (f *maintFixture) resetUnknownKeyIsAudited(t *testing.T) {
	s, ctx := f.s, f.ctx

	k := NewKey()
	prior, _, err := s.Reset(ctx, k, driver.Replay{Reason: "dlq", Operator: "op", Source: "dlq"})
	if err != nil || prior.Status != "" {
		t.Fatalf("%+v %v", prior, err)
	}
	if rps, _ := s.Replays(ctx, k); len(rps) != 1 {
		t.Fatalf("audit rows %d", len(rps))
	}
}

func (f *maintFixture) resetKeepsCheckpoints(t *testing.T) {
	s, e, ctx := f.s, f.e, f.ctx

	k := NewKey()
	_, l := claim(t, e, req(k, "s"))
	if _, err := l.Step(ctx, "generate", func(context.Context) (string, error) { return "output-1", nil }); err != nil {
		t.Fatal(err)
	}
	_, _ = l.Fail(ctx, idempotency.Final("policy_rejected", errors.New("no")))
	if _, _, err := s.Reset(ctx, k, driver.Replay{Reason: "policy relaxed", Operator: "op"}); err != nil {
		t.Fatal(err)
	}
	_, l2 := claim(t, e, req(k, "s2"))
	out, err := l2.Step(ctx, "generate", func(context.Context) (string, error) { return "", errors.New("ran again") })
	if err != nil || out != "output-1" {
		t.Fatalf("after reset: %q %v", out, err)
	}
}

func (f *maintFixture) resetOfSucceededReopensAFailedFinish(t *testing.T) {
	s, e, ctx := f.s, f.e, f.ctx

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
	// Until the replay, every delivery answers the finish's FINAL failure
	// (FC's retries then end in the dead-letter queue), the result kept.
	for _, owner := range []string{"p", "another"} {
		out, err := e.Do(ctx, req(k, owner), func(context.Context, *idempotency.Lease) (string, error) {
			t.Fatal("a duplicate of a SUCCEEDED key ran")
			return "", nil
		})
		if class, code := idempotency.Classify(err); class != idempotency.ClassFinal || code != "permission_denied" ||
			out.Status != driver.StatusSucceeded || out.ResultRef != "ref" {
			t.Fatalf("a delivery after the finish failed: %+v %v, want SUCCEEDED with the FINAL permission_denied", out, err)
		}
	}
	if _, _, err := s.Reset(ctx, k, driver.Replay{Reason: "role fixed", Operator: "op"}); err != nil {
		t.Fatal(err)
	}
	rec := get(t, e, k)
	if rec.Status != driver.StatusSucceeded || rec.ResultRef != "ref" || rec.Finish != driver.FinishPending {
		t.Fatalf("after reset: %s %q finish %s", rec.Status, rec.ResultRef, rec.Finish)
	}
	// The failure is over: a delivery now reads a pending finish, not the
	// FINAL answer it read before (driver.Record.FailedFinish).
	if rec.FailedFinish() || rec.LastErrorCode != "" || rec.LastError != "" {
		t.Fatalf("after reset the finish still reads failed: code %q error %q", rec.LastErrorCode, rec.LastError)
	}
	res, g, err := e.ClaimFinish(ctx, k, "replay", -1)
	if err != nil || g == nil {
		t.Fatalf("the reopened finish is not claimable at once: %s %v", res.Decision, err)
	}
	if err := g.Done(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Do(ctx, req(k, "after"), neverRuns(t)); err != nil {
		t.Fatalf("a delivery after the reopened finish was done: %v, want the success", err)
	}
}

func (f *maintFixture) stats(t *testing.T) {
	s, ctx := f.s, f.ctx

	m := time.Now().UTC().Truncate(time.Minute).Add(-time.Minute)
	rows := []driver.StatRow{{Minute: m, Name: "first", Count: 2}, {Minute: m, Name: "fast_reject", Count: 1}}
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
}

// traceFirst: a takeover keeps the traceparent of the first delivery.
func traceFirst(t *testing.T, s driver.Maintainer) {
	ctx := context.Background()
	k := NewKey()
	first, second := req(k, "t1"), req(k, "t2")
	first.Meta.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	second.Meta.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, r := range []*idempotency.ClaimRequest{&first, &second} {
		r.Lease, r.MaxAttempts = time.Minute, 3
	}
	res, err := s.Claim(ctx, first)
	if err != nil || res.Decision != idempotency.DecisionFirst {
		t.Fatalf("first claim: %s %v", res.Decision, err)
	}
	if err := s.Fail(ctx, k, res.Record.Fence, driver.Failure{Code: "timeout", Message: "slow"}); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Claim(ctx, second); err != nil || res.Decision != idempotency.DecisionTakeover {
		t.Fatalf("second claim: %s %v", res.Decision, err)
	}
	if rec, err := s.Get(ctx, k); err != nil || rec.TraceParent != first.Meta.TraceParent {
		t.Fatalf("traceparent %q (%v), want the first delivery's %q", rec.TraceParent, err, first.Meta.TraceParent)
	}
}

// purgeAge is the retention RunPurge purges with: records are made, then
// left to age past it.
const purgeAge = 2 * time.Second

// RunPurge checks Purge on an empty store, where its counts are exact:
// terminal records older than the retention are retired to tombstones
// (driver.Retire), their steps and their audit rows as old deleted, in
// batches of the limit; non-terminal and younger records, and a finish that
// failed, stay; an audit row younger than its record outlives it until it
// is as old; stats rows go by their own retention. A tombstone answers a
// re-send (REPEAT_DONE, or PAYLOAD_MISMATCH for another payload) and
// refuses a reset, changing nothing, until it is as old as
// TombstonesOlderThan; then it goes, and a re-send is claimed FIRST again
// (docs/design.md §6, "Retention"). One scenario in time order: its counts
// depend on the ages its steps give the records.
func RunPurge(t *testing.T, s driver.Maintainer) {
	ctx := context.Background()
	p := purgeScene{t: t, s: s, e: idempotency.New(s, idempotency.WithLogger(TestLogger(t)), idempotency.WithMaxAttempts(1)),
		e3: idempotency.New(s, idempotency.WithLogger(TestLogger(t)), idempotency.WithMaxAttempts(3))}
	old := p.old()
	time.Sleep(purgeAge + 300*time.Millisecond)

	youngAt := time.Now()
	youngDone, youngFailed := NewKey(), NewKey()
	p.succeeded(youngDone, false)
	p.failedFinal(youngFailed)
	p.audit(old.done, "young") // younger than the retention: it outlives its record
	old.stays[youngDone], old.stays[youngFailed] = driver.StatusSucceeded, driver.StatusFailedFinal
	// A dry run counts what the purge then deletes, and deletes nothing.
	dry, err := s.Purge(ctx, driver.PurgeRequest{OlderThan: purgeAge, StatsOlderThan: 5 * time.Minute, Limit: 100,
		TombstonesOlderThan: time.Hour, DryRun: true})
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if time.Since(youngAt) >= purgeAge { // the counts below would count the young records too
		t.Fatalf("this machine took %s to make two records and count them: the young ones aged past the retention", time.Since(youngAt))
	}
	want(t, "dry run", dry, driver.PurgeReport{Records: 2, Replays: 2, Stats: 3})
	total := purgeAll(t, s, driver.PurgeRequest{OlderThan: purgeAge, StatsOlderThan: 5 * time.Minute, Limit: 1,
		TombstonesOlderThan: time.Hour})
	if time.Since(youngAt) >= purgeAge {
		t.Fatalf("this machine took %s to make and purge two records: the young ones aged past the retention", time.Since(youngAt))
	}
	// (Steps counts the step records of earlier versions; steps are
	// checkpoints on the record now.)
	want(t, "records purged", total, driver.PurgeReport{Records: 2, Replays: 2, Stats: 3})
	old.checkPurged(t, s)
	old.tombstonesAnswer(t, p.e)

	// Once as old, the young records are retired and every tombstone as old
	// as TombstonesOlderThan goes, and the audit row that outlived its record
	// with it; a re-send is then a new action.
	time.Sleep(purgeAge)
	total = purgeAll(t, s, driver.PurgeRequest{OlderThan: purgeAge, Limit: 1, TombstonesOlderThan: purgeAge})
	want(t, "second purge", total, driver.PurgeReport{Records: 2, Replays: 1, Tombstones: 4})
	if rps, _ := s.Replays(ctx, old.done); len(rps) != 0 {
		t.Errorf("the audit row outlived its record past the retention: %+v", rps)
	}
	if _, err := s.Get(ctx, old.done); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("the tombstone past its age: %v", err)
	}
	if res, l := claim(t, p.e, req(old.failed, "late")); res.Decision != idempotency.DecisionFirst || l == nil || l.Attempt != 1 {
		t.Fatalf("a re-send after the tombstone went: %s", res.Decision)
	}
	if _, err := s.Purge(ctx, driver.PurgeRequest{}); err == nil {
		t.Error("a purge without a retention ran")
	}
}

// tombstonesAnswer checks the tombstones of the first purge: a re-send is
// answered from them, another payload is a mismatch, a reset is refused
// ErrPurged, and none of it changes them.
func (o oldRecords) tombstonesAnswer(t *testing.T, e *idempotency.Engine) {
	t.Helper()
	ctx := context.Background()
	s := e.Store().(driver.Maintainer)
	before, _ := s.Get(ctx, o.done)
	if res, l := claim(t, e, req(o.done, "late")); res.Decision != idempotency.DecisionRepeatDone || l != nil ||
		res.Record.Status != driver.StatusSucceeded || res.Record.ResultRef != "ref" {
		t.Errorf("a re-send of a purged key: %s %s %q, want REPEAT_DONE with its result", res.Decision, res.Record.Status, res.Record.ResultRef)
	}
	if res, _ := claim(t, e, req(o.failed, "late")); res.Decision != idempotency.DecisionRepeatDone || res.Record.Status != driver.StatusFailedFinal ||
		res.Record.LastErrorCode != "policy_rejected" {
		t.Errorf("a re-send of a purged failed key: %s %s %q", res.Decision, res.Record.Status, res.Record.LastErrorCode)
	}
	other := req(o.done, "other")
	other.PayloadHash = "another-payload"
	if res, l := claim(t, e, other); res.Decision != idempotency.DecisionPayloadMismatch || l != nil {
		t.Errorf("another payload under a purged key: %s", res.Decision)
	}
	if _, _, err := s.Reset(ctx, o.done, driver.Replay{Reason: "r", Operator: "op", Source: "key"}); !errors.Is(err, driver.ErrPurged) {
		t.Errorf("a reset of a tombstone: %v, want ErrPurged", err)
	}
	after, err := s.Get(ctx, o.done)
	if err != nil || !after.Tombstone || after.Fence != before.Fence || !after.UpdatedAt.Equal(before.UpdatedAt) || after.Status != before.Status {
		t.Errorf("the tombstone changed: %+v → %+v (%v)", before, after, err)
	}
	if rps, _ := s.Replays(ctx, o.done); len(rps) != 1 {
		t.Errorf("a refused reset of a tombstone wrote an audit row: %+v", rps)
	}
}

// purgeScene makes the records RunPurge ages and purges.
type purgeScene struct {
	t     *testing.T
	s     driver.Maintainer
	e, e3 *idempotency.Engine // one attempt, three attempts
}

func (p purgeScene) succeeded(k string, step bool) {
	p.t.Helper()
	_, l := claim(p.t, p.e, req(k, "w-"+k[:6]))
	if step {
		if _, err := l.Step(context.Background(), "generate", func(context.Context) (string, error) { return "out", nil }); err != nil {
			p.t.Fatal(err)
		}
	}
	if err := l.Complete(context.Background(), "ref"); err != nil {
		p.t.Fatal(err)
	}
}

func (p purgeScene) failedFinal(k string) {
	p.t.Helper()
	_, _ = p.e.Do(context.Background(), req(k, "w-"+k[:6]), func(context.Context, *idempotency.Lease) (string, error) {
		return "", idempotency.Final("policy_rejected", errors.New("no"))
	})
}

func (p purgeScene) audit(k, why string) {
	p.t.Helper()
	if _, _, err := p.s.Reset(context.Background(), k, driver.Replay{Reason: why, Operator: "op", Source: "key"}); err != nil {
		p.t.Fatal(err)
	}
}

// oldRecords are what purgeScene.old made: the keys that go, and the
// status of each key that must stay.
type oldRecords struct {
	done, failed, orphan string
	finishFailed         string // SUCCEEDED, its finish failed FINAL: it stays for an operator
	stays                map[string]driver.Status
	now                  time.Time // the minute the stats rows count from
}

// old makes two purgeable records (one with a checkpoint and an audit row),
// an audit row of a key without a record, records that must stay, and stats
// rows of several ages.
func (p purgeScene) old() oldRecords {
	t, ctx := p.t, context.Background()
	o := oldRecords{done: NewKey(), failed: NewKey(), orphan: NewKey()}
	p.succeeded(o.done, true)
	p.audit(o.done, "old") // a SUCCEEDED record is left as it is: an audit row alone
	p.failedFinal(o.failed)
	p.audit(o.orphan, "dead letter of a delivery that never reached the store")
	pending := NewKey() // completed, its finish still pending
	r := req(pending, "p")
	r.FinishAfter = true
	_, lp := claim(t, p.e, r)
	if err := lp.Complete(ctx, "ref"); err != nil {
		t.Fatal(err)
	}
	retrying := NewKey()
	_, lr := claim(t, p.e3, req(retrying, "r"))
	if st, err := lr.Fail(ctx, idempotency.Retryable("timeout", errors.New("slow"))); err != nil || st != driver.StatusFailedRetryable {
		t.Fatalf("retrying: %s %v", st, err)
	}
	running := NewKey()
	claim(t, p.e, req(running, "live"))
	o.finishFailed = NewKey()
	r = req(o.finishFailed, "ff")
	r.FinishAfter = true
	_, lf := claim(t, p.e, r)
	if err := lf.Complete(ctx, "ref"); err != nil {
		t.Fatal(err)
	}
	if err := lf.Finisher().Fail(ctx, idempotency.Final("notify_rejected", errors.New("410"))); err != nil {
		t.Fatal(err)
	}
	o.stays = map[string]driver.Status{pending: driver.StatusSucceeded, retrying: driver.StatusFailedRetryable, running: driver.StatusRunning,
		o.finishFailed: driver.StatusSucceeded}
	o.now = time.Now().UTC().Truncate(time.Minute)
	if err := p.s.AddStats(ctx, []driver.StatRow{{Minute: o.now.Add(-72 * time.Hour), Name: "first", Count: 1},
		{Minute: o.now.Add(-72 * time.Hour), Name: "fast_reject", Count: 1}, {Minute: o.now.Add(-10 * time.Minute), Name: "first", Count: 1},
		{Minute: o.now.Add(-time.Minute), Name: "first", Count: 1}}); err != nil {
		t.Fatal(err)
	}
	return o
}

// checkPurged checks the store after the first purge.
func (o oldRecords) checkPurged(t *testing.T, s driver.Maintainer) {
	t.Helper()
	ctx := context.Background()
	for _, k := range []string{o.done, o.failed} {
		if rec, err := s.Get(ctx, k); err != nil || !rec.Tombstone || !rec.Status.Terminal() || len(rec.Steps) != 0 || rec.PayloadHash == "" {
			t.Errorf("%s… was not retired to a tombstone: %+v %v", k[:8], rec, err)
		}
	}
	if rec, err := s.Get(ctx, o.finishFailed); err != nil || rec.Tombstone || rec.Finish != driver.FinishFailed {
		t.Errorf("a record whose finish failed was purged: %+v %v", rec, err)
	}
	for k, st := range o.stays {
		if got, err := s.Get(ctx, k); err != nil || got.Status != st {
			t.Errorf("%s… (%s) did not stay: %s %v", k[:8], st, got.Status, err)
		}
	}
	if rps, err := s.Replays(ctx, o.done); err != nil || len(rps) != 1 || rps[0].Reason != "young" {
		t.Errorf("audit rows of the purged record: %+v %v; want only the young one", rps, err)
	}
	if rps, _ := s.Replays(ctx, o.orphan); len(rps) != 0 {
		t.Errorf("old audit row without a record stayed: %+v", rps)
	}
	if rows, err := s.Stats(ctx, o.now.Add(-96*time.Hour)); err != nil || len(rows) != 1 || !rows[0].Minute.Equal(o.now.Add(-time.Minute)) {
		t.Errorf("stats after the purge: %+v %v; want the last minute's row alone", rows, err)
	}
}

// purgeAll purges until a batch says nothing more is due; no batch may
// delete more records than the limit.
func purgeAll(t *testing.T, s driver.Maintainer, r driver.PurgeRequest) driver.PurgeReport {
	t.Helper()
	var total driver.PurgeReport
	for i := 0; ; i++ {
		rep, err := s.Purge(context.Background(), r)
		if err != nil {
			t.Fatalf("purge: %v", err)
		}
		if rep.Records > int64(r.Limit) || rep.Stats > int64(r.Limit) {
			t.Fatalf("a batch of limit %d deleted %+v", r.Limit, rep)
		}
		total.Add(rep)
		if !rep.More {
			return total
		}
		if i > 20 {
			t.Fatalf("purge is never done: %+v", total)
		}
	}
}

// RunMalformedTombstone checks that a tombstone nothing may be decided on
// (corrupt makes key's finished record one, as only a hand edit or a bug
// can: the store's own encoding of a tombstone that is not a finished
// task record) gets a clear error (ErrMalformedTombstone)
// from a claim, a read and a reset, and that none of them, nor a purge,
// changes it.
func RunMalformedTombstone(t *testing.T, s driver.Maintainer, corrupt func(t *testing.T, key string)) {
	ctx := context.Background()
	e := idempotency.New(s, idempotency.WithLogger(TestLogger(t)))
	k := NewKey()
	_, l := claim(t, e, req(k, "w"))
	if err := l.Complete(ctx, "ref"); err != nil {
		t.Fatal(err)
	}
	corrupt(t, k)
	if _, err := s.Get(ctx, k); !errors.Is(err, driver.ErrMalformedTombstone) {
		t.Fatalf("get: %v, want ErrMalformedTombstone", err)
	}
	if res, err := s.Claim(ctx, driver.ClaimRequest{Key: k, PayloadHash: "ph", Owner: "late", Try: -1, Lease: time.Minute, MaxAttempts: 3}); !errors.Is(err, driver.ErrMalformedTombstone) {
		t.Fatalf("claim: %s %v, want ErrMalformedTombstone", res.Decision, err)
	}
	_, err := e.Do(ctx, req(k, "late"), func(context.Context, *idempotency.Lease) (string, error) {
		t.Fatal("a delivery ran on a malformed tombstone")
		return "", nil
	})
	if class, code := idempotency.Classify(err); class != idempotency.ClassFinal || code != "malformed_tombstone" {
		t.Fatalf("a delivery: %v (%s %s), want FINAL malformed_tombstone", err, class, code)
	}
	if _, _, err := s.Reset(ctx, k, driver.Replay{Reason: "r", Operator: "op", Source: "key"}); !errors.Is(err, driver.ErrMalformedTombstone) {
		t.Fatalf("reset: %v, want ErrMalformedTombstone", err)
	}
	for _, r := range candidates(t, s) {
		if r.Key == k {
			t.Fatal("the sweeper lists a malformed tombstone: it would head every sweep")
		}
	}
	if _, err := s.Purge(ctx, driver.PurgeRequest{OlderThan: time.Millisecond, TombstonesOlderThan: time.Millisecond}); err != nil {
		t.Fatalf("purge beside a malformed tombstone: %v", err)
	}
	if _, err := s.Get(ctx, k); !errors.Is(err, driver.ErrMalformedTombstone) {
		t.Fatalf("after it all: %v, want it unchanged", err)
	}
	if rps, _ := s.Replays(ctx, k); len(rps) != 0 {
		t.Fatalf("a refused reset wrote an audit row: %+v", rps)
	}
}

// RunPurgeWithoutPayloadHash checks the purge of a finished record claimed
// without a payload hash (ClaimRequest.PayloadHash is optional: the
// library's callers may leave it empty): its tombstone answers a re-send as
// the record did — REPEAT_DONE with its result, PAYLOAD_MISMATCH for a
// request that names a hash — and is no malformed one, which every read
// would refuse and the embedded store's purge would keep for good
// (docs/design.md §6, "Retention").
func RunPurgeWithoutPayloadHash(t *testing.T, s driver.Maintainer) {
	ctx := context.Background()
	e := idempotency.New(s, idempotency.WithLogger(TestLogger(t)))
	k := NewKey()
	r := req(k, "w")
	r.PayloadHash = ""
	_, l := claim(t, e, r)
	if err := l.Complete(ctx, "ref"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	rep, err := s.Purge(ctx, driver.PurgeRequest{OlderThan: 200 * time.Millisecond, TombstonesOlderThan: time.Hour})
	if err != nil || rep.Records != 1 {
		t.Fatalf("purge: %+v %v, want the record retired", rep, err)
	}
	if rec, err := s.Get(ctx, k); err != nil || !rec.Tombstone || rec.ResultRef != "ref" {
		t.Fatalf("the tombstone of a record without a payload hash: %+v %v", rec, err)
	}
	if res, l, err := e.Claim(ctx, req(k, "late")); err != nil || l != nil || res.Decision != idempotency.DecisionPayloadMismatch {
		t.Fatalf("a request with a payload hash: %s %v, want PAYLOAD_MISMATCH", res.Decision, err)
	}
	res, l, err := e.Claim(ctx, r)
	if err != nil || l != nil || res.Decision != idempotency.DecisionRepeatDone || res.Record.ResultRef != "ref" {
		t.Fatalf("a re-send without a payload hash: %s %q %v, want REPEAT_DONE with its result", res.Decision, res.Record.ResultRef, err)
	}
}

// resetClearsTheBackoff: a reset ends a retryable failure's back-off
// (docs/design.md §6, "a takeover or a reset clears it"), on every store
// alike (driver.ApplyReset is the reference).
func (f *maintFixture) resetClearsTheBackoff(t *testing.T) {
	s, e, ctx := f.s, f.e, f.ctx
	key := NewKey()
	r := req(key, "h")
	r.MaxAttempts = 3
	_, l := claim(t, e, r)
	if l == nil {
		t.Fatal("claim not owned")
	}
	if st, _ := l.Fail(ctx, idempotency.Retryable("rate_limited", errors.New("429"))); st != driver.StatusFailedRetryable {
		t.Fatalf("fail: %s", st)
	}
	if get(t, e, key).RetryAfter.IsZero() {
		t.Fatal("a retryable failure recorded no back-off")
	}
	rec := get(t, e, key)
	if _, _, err := s.Reset(ctx, key, driver.Replay{Reason: "fixed", Operator: "op", Source: "key",
		PayloadHash: rec.PayloadHash}); err != nil {
		t.Fatalf("reset: %v", err)
	}
	if got := get(t, e, key); got.Status != driver.StatusReceived || !got.RetryAfter.IsZero() {
		t.Fatalf("after the reset: %s, retry_after %v, want RECEIVED without a back-off", got.Status, got.RetryAfter)
	}
}
