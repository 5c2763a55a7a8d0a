// Package idemtest is the conformance suite that every idempotency store
// configuration runs (MySQL alone, Redis + MySQL, embedded, Redis + embedded).
// It drives the public Engine with real goroutines against the real backends.
package idemtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
)

// Harness describes one store configuration.
type Harness struct {
	// NewEngine builds an engine on the configuration under test. Options are
	// the test's own (lease, budget) and must be passed on to idempotency.New.
	NewEngine func(t *testing.T, opts ...idempotency.Option) *idempotency.Engine
	// Fast is the configuration's fast layer, nil when it has none.
	Fast driver.FastLayer
	// FastDown makes the fast layer hang (block=true) or vanish; FastUp
	// restores it. Nil when there is no fast layer.
	FastDown func(t *testing.T, block bool)
	FastUp   func(t *testing.T)
}

// NewKey returns a fresh 64-hex business key.
func NewKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func req(key, owner string) idempotency.ClaimRequest {
	return idempotency.ClaimRequest{Key: key, Owner: owner, PayloadHash: "ph-" + key[:8],
		Meta: driver.Meta{TenantID: "t1", TaskType: "summarize", Operation: "summarize", InputVersion: "v1",
			OriginRequestID: "origin-" + owner, EventSource: "acs:test", EventID: "ev-" + owner,
			InputRef: "file:///tasks/" + key + "/input.json"}}
}

const shortLease = 400 * time.Millisecond

// short gives a claim the short lease of a worker that is about to "crash";
// the claims that follow keep the default lease, so that slow disks (bbolt
// fsyncs every claim) cannot expire them in the middle of a case.
func short(r idempotency.ClaimRequest) idempotency.ClaimRequest {
	r.Lease = shortLease
	return r
}

// Run runs every conformance case against h.
func Run(t *testing.T, h Harness) {
	t.Run("Race64OneWinner", func(t *testing.T) { race64(t, h) })
	t.Run("SameOwnerRetryTakesOver", func(t *testing.T) { sameOwner(t, h) })
	t.Run("TakeoverAfterExpiryIncrementsFenceAndAttempt", func(t *testing.T) { takeoverAfterExpiry(t, h) })
	t.Run("StaleFenceCannotCompleteFailOrRenew", func(t *testing.T) { staleFence(t, h) })
	t.Run("ConcurrentTakeoverOneWinner", func(t *testing.T) { concurrentTakeover(t, h) })
	t.Run("RetryableUntilBudgetSpent", func(t *testing.T) { retryableBudget(t, h) })
	t.Run("ExpiredLeaseWithBudgetSpentEndsFinal", func(t *testing.T) { expiredExhausted(t, h) })
	t.Run("ExpiredLeaseWithBudgetSpentIsSalvaged", func(t *testing.T) { salvaged(t, h) })
	t.Run("ResultTooLargeRecordedFinalOnce", func(t *testing.T) { resultTooLarge(t, h) })
	t.Run("FinishHeldOnceThenClaimed", func(t *testing.T) { finishOnce(t, h) })
	t.Run("FinishCopysRetriesNeverTakeItOver", func(t *testing.T) { finishCopy(t, h) })
	t.Run("FinishTakeoversAreLabelledAsDecideFinish", func(t *testing.T) { finishLabels(t, h) })
	t.Run("ACopysMarkOutlivesATakeover", func(t *testing.T) { copyMarkOutlivesTakeover(t, h) })
	t.Run("ACopysMarkOutlivesARetryableFailure", func(t *testing.T) { copyMarkOutlivesFailure(t, h) })
	t.Run("ACopysMarkOutlivesAnotherOwnersLease", func(t *testing.T) { copyMarkOutlivesAnotherOwner(t, h) })
	t.Run("AFinishTakeoverIsNamedByEveryAnswer", func(t *testing.T) { finishTakeoverNamed(t, h) })
	t.Run("RenewOfAnEndedLeaseIsLost", func(t *testing.T) { renewEnded(t, h) })
	t.Run("EmptyOwnerNeverTakesALiveLease", func(t *testing.T) { emptyOwner(t, h) })
	t.Run("TryNotLaterNeverTakesItsOwnLiveLease", func(t *testing.T) { ownLeaseRetryLater(t, h) })
	t.Run("AKnownTryIsLaterThanAnUnknownOne", func(t *testing.T) { knownTryAfterUnknown(t, h) })
	t.Run("ACopysRetryWaitsForTheLiveHolder", func(t *testing.T) { copysRetryWaits(t, h) })
	t.Run("RetryableFailureWaitsItsBackoff", func(t *testing.T) { retryBackoff(t, h) })
	t.Run("FinishHoldIsFencedAndBounded", func(t *testing.T) { finishHold(t, h) })
	t.Run("GetNowIsOnTheRecordsClock", func(t *testing.T) { getNow(t, h) })
	t.Run("KeysAreOneRuleOnEveryStore", func(t *testing.T) { keyRule(t, h) })
	t.Run("FailuresAreRecordedWhateverTheirText", func(t *testing.T) { failureText(t, h) })
	t.Run("RecordTextIsOneRuleOnEveryStore", func(t *testing.T) { metaText(t, h) })
	t.Run("ResultsThatAreNotTextEndFinalOnce", func(t *testing.T) { resultText(t, h) })
	t.Run("StepNamesAreText", func(t *testing.T) { stepName(t, h) })
	t.Run("AuditTextIsOneRuleOnEveryStore", func(t *testing.T) { auditText(t, h) })
	t.Run("RunReplaysTypedResults", func(t *testing.T) { runTyped(t, h) })
	t.Run("RunKeepsA1MiBResultByReference", func(t *testing.T) { runLarge(t, h) })
	t.Run("WaitInFlightAnswersTheOwnersResult", func(t *testing.T) { waitInFlight(t, h) })
	t.Run("DisabledRunsEveryTime", func(t *testing.T) { disabled(t, h) })
	t.Run("LocalCacheAnswersFromMemory", func(t *testing.T) { localCache(t, h) })
	t.Run("LegacyHashMatchesInTheCacheAndTheWait", func(t *testing.T) { legacyHash(t, h) })
	t.Run("FailedFinalIsTerminal", func(t *testing.T) { finalTerminal(t, h) })
	t.Run("PayloadMismatch", func(t *testing.T) { payloadMismatch(t, h) })
	t.Run("StepsCheckpointOnTheRecord", func(t *testing.T) { stepsCheckpoint(t, h) })
	t.Run("CheckpointsPastTheRecordAreFinal", func(t *testing.T) { checkpointsTooLarge(t, h) })
	t.Run("DoRunsOnceAndAnswersDuplicates", func(t *testing.T) { doOnce(t, h) })
	t.Run("DoRecordsPanic", func(t *testing.T) { doPanic(t, h) })
	t.Run("LeaseNeverOutlivesDeadline", func(t *testing.T) { leaseDeadline(t, h) })
	t.Run("HTTPMiddleware", func(t *testing.T) { RunHTTP(t, h) }) // idemhttp on this configuration (http.go)
	if h.Fast != nil {
		t.Run("FastLayerAnswersDuplicates", func(t *testing.T) { fastAnswers(t, h) })
		t.Run("FastDownMidClaim", func(t *testing.T) { fastDownMidClaim(t, h) })
		t.Run("FastHangsIsBounded", func(t *testing.T) { fastHangs(t, h) })
		t.Run("FastStaleRunningDoesNotBlockTakeover", func(t *testing.T) { fastStaleRunning(t, h) })
		t.Run("FastStaleVersusStore", func(t *testing.T) { fastStaleVsStore(t, h) })
		t.Run("FastUnconfirmedClaimOfADeadWorker", func(t *testing.T) { fastUnconfirmed(t, h) })
		t.Run("FastUnconfirmedTakeoverOfADeadWorker", func(t *testing.T) { fastUnconfirmedTakeover(t, h) })
		t.Run("FastUnconfirmedClaimOfALiveWorker", func(t *testing.T) { fastUnconfirmedLive(t, h) })
		t.Run("FastUnconfirmedClaimNeverAnswersTheClaimantsRetry", func(t *testing.T) { fastUnconfirmedRetry(t, h) })
		t.Run("FastLatePublishOverRegistration", func(t *testing.T) { fastLatePublishOverRegistration(t, h) })
		t.Run("FastRetryNeverTakesInProgressFromTheFastLayer", func(t *testing.T) { fastRetryAsksTheStore(t, h) })
		t.Run("FastRegistrationOverALiveHolderIsBounded", func(t *testing.T) { fastRegistrationOverALiveHolder(t, h) })
	}
}

func claim(t *testing.T, e *idempotency.Engine, r idempotency.ClaimRequest) (driver.ClaimResult, *idempotency.Lease) {
	t.Helper()
	res, l, err := e.Claim(context.Background(), r)
	if err != nil {
		t.Fatalf("claim %s by %s: %v", r.Key[:8], r.Owner, err)
	}
	return res, l
}

func want[T comparable](t *testing.T, what string, got, exp T) {
	t.Helper()
	if got != exp {
		t.Fatalf("%s = %v, want %v", what, got, exp)
	}
}

func get(t *testing.T, e *idempotency.Engine, key string) driver.Record {
	t.Helper()
	rec, err := e.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	return rec
}

// race64: 64 goroutines claim one key at once; exactly one owns it, every
// other sees it in progress, and after completion everyone sees the result.
func race64(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	key := NewKey()
	var owners atomic.Int32
	var firsts atomic.Int32
	var winner atomic.Pointer[idempotency.Lease]
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			<-start
			res, l, err := e.Claim(context.Background(), req(key, fmt.Sprintf("owner-%02d", i)))
			if err != nil {
				errs <- err
				return
			}
			if l != nil {
				owners.Add(1)
				winner.Store(l)
			}
			if res.Decision == idempotency.DecisionFirst {
				firsts.Add(1)
			}
			if l == nil && res.Decision != idempotency.DecisionRepeatOther {
				errs <- fmt.Errorf("loser decision %s, want REPEAT_OTHER", res.Decision)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want(t, "owners", owners.Load(), 1)
	want(t, "FIRST decisions", firsts.Load(), 1)
	l := winner.Load()
	want(t, "winner fence", l.Fence, 1)
	if err := l.Complete(context.Background(), "ref-"+key[:8]); err != nil {
		t.Fatalf("complete: %v", err)
	}
	res, l2 := claim(t, e, req(key, "late"))
	if l2 != nil || res.Decision != idempotency.DecisionRepeatDone || res.Record.ResultRef != "ref-"+key[:8] {
		t.Fatalf("after completion: %+v", res)
	}
	rec := get(t, e, key)
	want(t, "status", rec.Status, driver.StatusSucceeded)
	want(t, "attempt", rec.Attempt, 1)
}

func sameOwner(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	key := NewKey()
	_, l1 := claim(t, e, req(key, "fc-req-1"))
	// A copy of the same try, concurrently: in progress, not a takeover.
	res, l := claim(t, e, req(key, "fc-req-1"))
	want(t, "same try decision", res.Decision, idempotency.DecisionRepeatOther)
	if l != nil {
		t.Fatal("a concurrent copy of the same try took the lease")
	}
	retry := req(key, "fc-req-1")
	// FC's retry of the request: a try later than any seen (the copy's
	// answer marked try 1 as its retry's, driver.ActMarkTry).
	retry.Try = 2
	res, l2 := claim(t, e, retry)
	want(t, "decision", res.Decision, idempotency.DecisionRepeatSame)
	if l2 == nil {
		t.Fatal("same owner did not take over")
	}
	want(t, "fence", l2.Fence, l1.Fence+1)
	want(t, "attempt", l2.Attempt, 2)
	if err := l1.Complete(context.Background(), "old"); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("old fence complete: %v, want ErrLeaseLost", err)
	}
	if err := l2.Complete(context.Background(), "new"); err != nil {
		t.Fatal(err)
	}
	want(t, "result", get(t, e, key).ResultRef, "new")
}

func takeoverAfterExpiry(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	key := NewKey()
	_, l1 := claim(t, e, short(req(key, "a")))
	res, l := claim(t, e, req(key, "b"))
	want(t, "decision while live", res.Decision, idempotency.DecisionRepeatOther)
	if l != nil {
		t.Fatal("b owns a live lease")
	}
	time.Sleep(shortLease + 150*time.Millisecond)
	res, l2 := claim(t, e, req(key, "b"))
	want(t, "decision after expiry", res.Decision, idempotency.DecisionTakeover)
	want(t, "fence", l2.Fence, l1.Fence+1)
	want(t, "attempt", l2.Attempt, l1.Attempt+1)
	// The lease names the task's request, not the one taking it over (the
	// notification the holder posts says it: docs/design.md §13).
	want(t, "first lease's origin request id", l1.OriginRequestID, "origin-a")
	want(t, "takeover's origin request id", l2.OriginRequestID, "origin-a")
	rec := get(t, e, key)
	want(t, "lease owner", rec.LeaseOwner, "b")
	want(t, "stored fence", rec.Fence, l2.Fence)
	// The first delivery's metadata stays.
	want(t, "origin request id", rec.OriginRequestID, "origin-a")
}

func staleFence(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	ctx := context.Background()
	cases := []struct {
		name string
		op   func(l *idempotency.Lease) error
	}{
		{"complete", func(l *idempotency.Lease) error { return l.Complete(ctx, "stale") }},
		{"fail", func(l *idempotency.Lease) error { _, err := l.Fail(ctx, errors.New("x")); return err }},
		{"renew", func(l *idempotency.Lease) error { return l.Renew(ctx) }},
		{"step", func(l *idempotency.Lease) error {
			_, err := l.Step(ctx, "notify", func(context.Context) (string, error) { return "ran", nil })
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := NewKey()
			_, stale := claim(t, e, short(req(key, "a")))
			time.Sleep(shortLease + 150*time.Millisecond)
			_, fresh := claim(t, e, req(key, "b"))
			if fresh == nil {
				t.Fatal("no takeover")
			}
			if err := c.op(stale); !errors.Is(err, idempotency.ErrLeaseLost) {
				t.Fatalf("stale %s: %v, want ErrLeaseLost", c.name, err)
			}
			rec := get(t, e, key)
			want(t, "status", rec.Status, driver.StatusRunning)
			want(t, "owner", rec.LeaseOwner, "b")
			if err := fresh.Complete(ctx, "fresh"); err != nil {
				t.Fatalf("fresh complete: %v", err)
			}
		})
	}
}

// renewEnded: a lease that its own holder ended (a complete with no finish
// to hold, a failure) renews nothing: Renew answers ErrLeaseLost although the
// fence is still the holder's (driver.Store: the record holds no lease), so a
// holder that renews to check it still holds the key before a side effect
// learns it does not.
func renewEnded(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	ctx := context.Background()
	cases := []struct {
		name string
		end  func(l *idempotency.Lease) error
	}{
		{"completed", func(l *idempotency.Lease) error { return l.Complete(ctx, "done") }},
		{"failed retryably", func(l *idempotency.Lease) error {
			_, err := l.Fail(ctx, idempotency.Retryable("rate_limited", errors.New("429")))
			return err
		}},
		{"failed for good", func(l *idempotency.Lease) error {
			_, err := l.Fail(ctx, idempotency.Final("refused", errors.New("no")))
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := NewKey()
			_, l := claim(t, e, req(key, "a"))
			if err := c.end(l); err != nil {
				t.Fatal(err)
			}
			before := get(t, e, key)
			if err := l.Renew(ctx); !errors.Is(err, idempotency.ErrLeaseLost) {
				t.Fatalf("renew after the lease ended: %v, want ErrLeaseLost", err)
			}
			after := get(t, e, key)
			want(t, "status", after.Status, before.Status)
			want(t, "lease until", after.LeaseUntil.IsZero(), true)
		})
	}
}

func concurrentTakeover(t *testing.T, h Harness) {
	e := h.NewEngine(t, idempotency.WithMaxAttempts(5))
	key := NewKey()
	claim(t, e, short(req(key, "crashed")))
	time.Sleep(shortLease + 150*time.Millisecond)
	var owners atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 32 {
		wg.Go(func() {
			<-start
			_, l, err := e.Claim(context.Background(), req(key, fmt.Sprintf("t-%d", i)))
			if err != nil {
				t.Error(err)
			}
			if l != nil {
				owners.Add(1)
				if l.Fence != 2 || l.Attempt != 2 {
					t.Errorf("takeover fence/attempt %d/%d, want 2/2", l.Fence, l.Attempt)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	want(t, "takeover winners", owners.Load(), 1)
}

func retryableBudget(t *testing.T, h Harness) {
	// Another owner claims at once after each failure: no back-off here
	// (retryBackoff checks it).
	e := h.NewEngine(t, idempotency.WithMaxAttempts(3), idempotency.WithRetryBackoff(0))
	ctx := context.Background()
	key := NewKey()
	for attempt := 1; attempt <= 3; attempt++ {
		res, l := claim(t, e, req(key, fmt.Sprintf("d%d", attempt)))
		if l == nil {
			t.Fatalf("attempt %d not claimable: %s", attempt, res.Decision)
		}
		want(t, "attempt", l.Attempt, attempt)
		st, err := l.Fail(ctx, idempotency.Retryable("rate_limited", errors.New("429")))
		if err != nil {
			t.Fatal(err)
		}
		exp := driver.StatusFailedRetryable
		if attempt == 3 {
			exp = driver.StatusFailedFinal
		}
		want(t, "status after attempt", st, exp)
		want(t, "stored status", get(t, e, key).Status, exp)
	}
	res, l := claim(t, e, req(key, "d4"))
	if l != nil {
		t.Fatal("claimed after the budget was spent")
	}
	want(t, "decision", res.Decision, idempotency.DecisionRepeatDone)
	want(t, "status", res.Record.Status, driver.StatusFailedFinal)
	want(t, "code", res.Record.LastErrorCode, driver.ExhaustedCode) // docs/library.md: the budget, not the last cause
	if !strings.Contains(res.Record.LastError, "rate_limited") {
		t.Fatalf("the last cause is lost: %q", res.Record.LastError)
	}
}

func finalTerminal(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	key := NewKey()
	_, l := claim(t, e, req(key, "a"))
	st, err := l.Fail(context.Background(), idempotency.Final("policy_rejected", errors.New("data_inspection_failed")))
	if err != nil {
		t.Fatal(err)
	}
	want(t, "status", st, driver.StatusFailedFinal)
	for _, owner := range []string{"a", "b"} { // even the same owner does not run it again
		res, l := claim(t, e, req(key, owner))
		if l != nil {
			t.Fatalf("%s re-claimed a FAILED_FINAL key", owner)
		}
		want(t, "decision", res.Decision, idempotency.DecisionRepeatDone)
		var ie *idempotency.Error
		if _, err := e.Do(context.Background(), req(key, owner), never(t)); !errors.As(err, &ie) || ie.Code != "policy_rejected" || ie.Retryable() {
			t.Fatalf("stored error %v", err)
		}
	}
}

func payloadMismatch(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	key := NewKey()
	_, l := claim(t, e, req(key, "a"))
	if err := l.Complete(context.Background(), "ref"); err != nil {
		t.Fatal(err)
	}
	other := req(key, "b")
	other.PayloadHash = "another-payload"
	res, l2 := claim(t, e, other)
	if l2 != nil {
		t.Fatal("mismatching payload owns the key")
	}
	want(t, "decision", res.Decision, idempotency.DecisionPayloadMismatch)
	rec := get(t, e, key)
	want(t, "status unchanged", rec.Status, driver.StatusSucceeded)
	want(t, "payload hash unchanged", rec.PayloadHash, "ph-"+key[:8])
	want(t, "result unchanged", rec.ResultRef, "ref")
	if _, err := e.Do(context.Background(), other, never(t)); !errors.Is(err, idempotency.ErrPayloadMismatch) {
		t.Fatal("mismatch not reported as ErrPayloadMismatch")
	}
}

// stepsCheckpoint: a step runs once per key and its result is checkpointed
// on the record under the fence; a takeover resumes past it, a failing step
// is not recorded, and a stale lease cannot checkpoint.
func stepsCheckpoint(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	ctx := context.Background()
	key := NewKey()
	_, l1 := claim(t, e, short(req(key, "a")))
	var runs atomic.Int32
	step := func(context.Context) (string, error) { runs.Add(1); return "sent", nil }
	for range 2 {
		out, err := l1.Step(ctx, "send", step)
		if err != nil || out != "sent" {
			t.Fatalf("step: %q %v", out, err)
		}
	}
	want(t, "runs", runs.Load(), 1)
	if _, err := l1.Step(ctx, "flaky", func(context.Context) (string, error) {
		return "", idempotency.Retryable("timeout", errors.New("slow"))
	}); err == nil {
		t.Fatal("flaky step did not fail")
	}
	time.Sleep(shortLease + 150*time.Millisecond)
	_, l2 := claim(t, e, req(key, "b"))
	if l2 == nil {
		t.Fatal("no takeover")
	}
	if out, err := l2.Step(ctx, "send", step); err != nil || out != "sent" {
		t.Fatalf("resumed step: %q %v", out, err)
	}
	want(t, "runs after takeover", runs.Load(), 1)
	if out, err := l2.Step(ctx, "flaky", func(context.Context) (string, error) { return "ok", nil }); err != nil || out != "ok" {
		t.Fatalf("flaky retry: %q %v", out, err)
	}
	if _, err := l1.Step(ctx, "late", step); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("the stale lease checkpointed: %v", err)
	}
	rec := get(t, e, key)
	want(t, "checkpoints", len(rec.Steps), 2)
	want(t, "send", rec.Steps["send"], "sent")
	want(t, "flaky", rec.Steps["flaky"], "ok")
}

// checkpointsTooLarge: step results whose JSON passes the record's 60 KiB
// (MySQL's TEXT column) are refused FINAL before the store sees them, and
// the record keeps the checkpoints it held, readable by a takeover.
func checkpointsTooLarge(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	ctx := context.Background()
	key := NewKey()
	_, l := claim(t, e, req(key, "a"))
	big := strings.Repeat("x", driver.MaxResultRef-32)
	var refused error
	n := 0
	for ; n < 40 && refused == nil; n++ {
		_, refused = l.Step(ctx, fmt.Sprintf("step-%02d", n), func(context.Context) (string, error) { return big, nil })
	}
	var ie *idempotency.Error
	if !errors.As(refused, &ie) || ie.Class != idempotency.ClassFinal || ie.Code != "checkpoints_too_large" {
		t.Fatalf("after %d steps of %d bytes: %v, want FINAL checkpoints_too_large", n, len(big), refused)
	}
	if n < 29 {
		t.Fatalf("refused after %d steps, want about 30 (60 KiB)", n)
	}
	rec := get(t, e, key)
	want(t, "checkpoints kept", len(rec.Steps), n-1)
	want(t, "a kept checkpoint", rec.Steps["step-00"], big)
}

func doOnce(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	key := NewKey()
	var runs atomic.Int32
	fn := func(ctx context.Context, l *idempotency.Lease) (string, error) {
		runs.Add(1)
		time.Sleep(20 * time.Millisecond)
		return "result-" + key[:8], nil
	}
	var wg sync.WaitGroup
	var ok atomic.Int32
	for i := range 16 {
		wg.Go(func() {
			out, err := e.Do(context.Background(), req(key, fmt.Sprintf("o%d", i)), fn)
			switch {
			case err == nil && out.Status == driver.StatusSucceeded:
				ok.Add(1)
			case errors.Is(err, idempotency.ErrInProgress):
			default:
				t.Errorf("do: %+v %v", out, err)
			}
		})
	}
	wg.Wait()
	want(t, "runs", runs.Load(), 1)
	out, err := e.Do(context.Background(), req(key, "later"), fn)
	if err != nil || !out.Duplicate || out.ResultRef != "result-"+key[:8] || out.Status != driver.StatusSucceeded {
		t.Fatalf("duplicate outcome %+v %v", out, err)
	}
	want(t, "runs", runs.Load(), 1)
}

func doPanic(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	key := NewKey()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("panic swallowed")
			}
		}()
		_, _ = e.Do(context.Background(), req(key, "a"), func(context.Context, *idempotency.Lease) (string, error) {
			panic("boom")
		})
	}()
	rec := get(t, e, key)
	want(t, "status", rec.Status, driver.StatusFailedRetryable)
	want(t, "code", rec.LastErrorCode, "panic")
}

func leaseDeadline(t *testing.T, h Harness) {
	e := h.NewEngine(t, idempotency.WithLease(time.Hour))
	key := NewKey()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, l, err := e.Claim(ctx, req(key, "a"))
	if err != nil || l == nil {
		t.Fatalf("claim: %v", err)
	}
	if l.Duration() > 300*time.Millisecond {
		t.Fatalf("lease %s outlives the 300ms deadline", l.Duration())
	}
	<-ctx.Done()
	time.Sleep(100 * time.Millisecond)
	_, l2 := claim(t, e, req(key, "b"))
	if l2 == nil {
		t.Fatal("the retry after the deadline could not take over")
	}
}
