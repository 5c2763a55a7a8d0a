package handler_test

// Adversarial review of the recovery paths: each test reproduces a way work
// can still be lost, stalled or misrouted on main. They fail on main.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/llm"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/jcs"
	"github.com/idemgate/idemgate/idempotency/redisfast"
	"github.com/idemgate/idemgate/internal/dev/testenv"
	"github.com/idemgate/idemgate/ossresult"
)

// downNotifier is a receiver that is down (503) for as long as the test runs.
type downNotifier struct{ posts atomic.Int32 }

func (n *downNotifier) Post(context.Context, string, string, string, []byte) error {
	n.posts.Add(1)
	return idempotency.Retryable("temporary_unavailable", errors.New("503"))
}

// A receiver that is down makes every finish of its tasks fail retryably.
// Each failure releases the finish without moving the record back, so the
// records, ordered by their (old) completion time, stay at the head of
// the sweeper's queue for as long as the receiver is down: with `limit` of
// them, no other task is ever re-driven.
func TestReviewFailingFinishesHoldTheSweeperHead(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		m := &model{fn: func(_ context.Context, _ int32, r llm.Request) (llm.Response, error) {
			if r.Key == "" {
				return llm.Response{}, errors.New("no key")
			}
			return llm.Response{Text: "summary"}, nil
		}}
		rg := newRigOn(t, store, dir, m, idempotency.WithLease(200*time.Millisecond))
		n := &downNotifier{}
		rg.p.Notify = n
		for i := range 2 {
			body := taskBody(fmt.Sprintf("ev-n%d", i), summarizeData(fmt.Sprintf("notify %d", i)), "https://hook.test/down")
			o := outcome(t, rg.p.Handle(context.Background(), body, handler.Meta{RequestID: fmt.Sprintf("n%d", i)}))
			if o.Status != "SUCCEEDED" || o.ErrorType != "temporary_unavailable" {
				t.Fatalf("n%d: %+v", i, o)
			}
			time.Sleep(5 * time.Millisecond)
		}
		// A task that failed retryably after the two completed: the
		// sweeper's job.
		fails := &model{fn: func(context.Context, int32, llm.Request) (llm.Response, error) {
			return llm.Response{}, idempotency.Retryable("rate_limited", errors.New("429"))
		}}
		rg.p.Model = fails
		y := summarizeData("waits for the sweeper")
		if o := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-y", y, ""), handler.Meta{RequestID: "y"})); o.Status != "FAILED_RETRYABLE" {
			t.Fatalf("y: %+v", o)
		}
		rg.p.Model = m
		time.Sleep(250 * time.Millisecond) // whatever held the finishes, its lease has run out
		var reps []handler.SweepReport
		for range 5 { // five timer runs while the receiver stays down
			rep, err := rg.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			reps = append(reps, rep)
		}
		if rec, _ := store.Get(context.Background(), derive(t, y).Key); rec.Status != driver.StatusSucceeded {
			t.Fatalf("the re-drivable task is %s after 5 sweeps (posts to the dead receiver: %d); reports: %+v",
				rec.Status, n.posts.Load(), reps)
		}
	})
}

// legacyPayloadHash is payload_hash as the starting contract defined it and
// the function stored it before the input's hash joined it (docs/design.md
// §15).
func legacyPayloadHash(t *testing.T, taskType, op, version string) string {
	b, err := jcs.Marshal(map[string]any{"task_type": taskType, "operation": op, "input_version": version})
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// A task with an explicit input_version that was in flight when the new
// payload_hash rule was deployed (its record holds the old hash) can never
// be re-driven: every claim is refused payload_mismatch, by FC's retry, by
// the sweeper (which lists it forever, at the head of its queue), and by a
// replay of its dead letter.
func TestReviewInFlightRecordsOfTheOldPayloadHash(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		rg := newRigOn(t, store, dir, &model{})
		data := summarizeData("versioned input")
		data["input_version"] = "v1"
		d := derive(t, data)
		old := legacyPayloadHash(t, "summarize", "summarize", "v1")
		if old == d.PayloadHash {
			t.Fatal("the hashes agree: nothing to test")
		}
		// The old version claimed it, saved its input and failed retryably.
		_, l, err := rg.p.Engine.Claim(context.Background(), idempotency.ClaimRequest{Key: d.Key, PayloadHash: old, Owner: "r1", Try: 0})
		if err != nil || l == nil {
			t.Fatalf("claim: %v", err)
		}
		rs, _ := rg.p.Results(context.Background(), handler.Credentials{})
		in, _ := jcs.Marshal(map[string]any{"tenant_id": "t1", "task_type": "summarize", "operation": "summarize",
			"input_version": "v1", "input": data["input"]})
		inKey, _ := ossresult.InputKey(d.Key)
		if _, err := rs.PutOnce(context.Background(), inKey, in, "application/json", ossresult.Meta{IdempotencyKey: d.Key}); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Fail(context.Background(), idempotency.Retryable("rate_limited", errors.New("429"))); err != nil {
			t.Fatal(err)
		}
		// The new version: FC's retry of the same request.
		o := outcome(t, rg.p.Handle(context.Background(), taskBody("ev-1", data, ""), handler.Meta{RequestID: "r1", RetryCount: 1}))
		rep, err := rg.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		rec, _ := store.Get(context.Background(), d.Key)
		if rec.Status != driver.StatusSucceeded {
			t.Fatalf("an in-flight record of the old payload hash is %s: FC's retry answered %s %s; the sweep %+v",
				rec.Status, o.Status, o.ErrorType, rep)
		}
	})
}

// failingReset is a store whose Reset fails (the database goes away for a
// moment), after the fast layer got the reset record.
type failingReset struct {
	driver.Maintainer
}

func (f failingReset) Reset(context.Context, string, driver.Replay) (driver.Record, driver.Record, error) {
	return driver.Record{}, driver.Record{}, errDropped
}

// A replay whose store reset fails leaves the fast layer holding the reset
// record at a fence the store never reached (RECEIVED, fence+1). A
// duplicate of the FAILED_FINAL key is then answered "in progress" by the
// fast layer (and so acknowledged) while the store holds FAILED_FINAL, and
// the store's own answer can no longer be mirrored (its fence is lower).
func TestReviewFailedResetLeavesAFenceTheStoreNeverReached(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		fast := newFast(t)
		m := &model{fn: func(context.Context, int32, llm.Request) (llm.Response, error) {
			return llm.Response{}, idempotency.Final("policy_rejected", errors.New("content policy"))
		}}
		rg := newRigOn(t, store, dir, m, idempotency.WithFastLayer(fast), idempotency.WithFastTimeout(5*time.Second))
		data := summarizeData(fmt.Sprintf("failed reset %d", time.Now().UnixNano()))
		body := taskBody("ev-1", data, "")
		if o := outcome(t, rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1"})); o.Status != "FAILED_FINAL" {
			t.Fatalf("first: %+v", o)
		}
		brokenStore := failingReset{store}
		brokenEngine := idempotency.New(brokenStore, idempotency.WithFastLayer(fast), idempotency.WithFastTimeout(5*time.Second))
		broken := &handler.Pipeline{Engine: brokenEngine, Results: rg.p.Results, Model: m, Tasks: handler.Builtin(), Log: rg.p.Log}
		if _, err := broken.ReplayKey(context.Background(), derive(t, data).Key, handler.ReplayRequest{Reason: "r", Operator: "op"},
			handler.Meta{RetryCount: -1}); err == nil {
			t.Fatal("the replay did not fail")
		}
		var answers []string
		for i := range 3 { // three double submits, as they come
			o := outcome(t, rg.p.Handle(context.Background(), body, handler.Meta{RequestID: fmt.Sprintf("dup%d", i)}))
			answers = append(answers, o.Status+"/"+o.Decision)
		}
		for _, a := range answers {
			if a != "FAILED_FINAL/REPEAT_DONE" {
				t.Fatalf("duplicates of a FAILED_FINAL key after a failed reset were answered %v", answers)
			}
		}
	})
}

// lostResetAnswer is a store whose Reset commits and then loses its answer
// (the connection drops before the reply).
type lostResetAnswer struct {
	driver.Maintainer
}

func (l lostResetAnswer) Reset(ctx context.Context, key string, rp driver.Replay) (driver.Record, driver.Record, error) {
	if _, _, err := l.Maintainer.Reset(ctx, key, rp); err != nil {
		return driver.Record{}, driver.Record{}, err
	}
	return driver.Record{}, driver.Record{}, errDropped
}

// A replay of a failed finish whose reset committed but reported failure
// (its answer lost) leaves the finish reopened in the store; the FINAL
// answer Redis mirrored from it must go too, or every delivery within
// DEDUP_TTL_SECONDS is answered the failure the store no longer holds and
// dead-lettered (found by the explorer's stored feature, seed 14 on
// bolt+redis).
func TestAReopenedFinishWhoseResetAnswerWasLostIsNotAnsweredFinalByRedis(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		ctx := context.Background()
		fast := newFast(t)
		rg := newRigOn(t, store, dir, &model{}, idempotency.WithFastLayer(fast), idempotency.WithFastTimeout(5*time.Second))
		n := &refusingNotifier{}
		rg.p.Notify = n
		data := summarizeData(fmt.Sprintf("a lost reset answer %d", time.Now().UnixNano()))
		t.Cleanup(func() { _ = fast.Forget(context.Background(), derive(t, data).Key) })
		body := taskBody("ev-1", data, "https://hook.test/x")
		for _, id := range []string{"r1", "r2"} { // the failure, then a duplicate that mirrors it in Redis
			if o := outcome(t, rg.p.Handle(ctx, body, handler.Meta{RequestID: id})); o.ErrorType != "notify_rejected" {
				t.Fatalf("delivery %s: %+v", id, o)
			}
		}
		n.accept.Store(true)
		broken := *rg.p
		broken.Engine = idempotency.New(lostResetAnswer{store}, idempotency.WithFastLayer(fast), idempotency.WithFastTimeout(5*time.Second))
		if _, err := broken.ReplayKey(ctx, derive(t, data).Key, handler.ReplayRequest{Reason: "receiver fixed", Operator: "op"},
			handler.Meta{RetryCount: -1}); err == nil {
			t.Fatal("the replay did not fail")
		}
		if rec, err := store.Get(ctx, derive(t, data).Key); err != nil || rec.Finish != driver.FinishPending {
			t.Fatalf("the store after the reset: %+v %v, want the finish reopened", rec, err)
		}
		r := rg.p.Handle(ctx, body, handler.Meta{RequestID: "r3"})
		if o := outcome(t, r); o.ErrorType == "notify_rejected" {
			t.Fatalf("a delivery after the reopened finish: %d %s (the store's finish is pending)", r.Status, r.Body)
		}
	})
}

// The same on one instance with the local cache: the duplicate that read the
// failed finish cached it, and the replay's lost answer must drop it there
// too, or the instance answers the reopened finish FINAL for the cache's TTL.
func TestAReopenedFinishWhoseResetAnswerWasLostIsNotAnsweredFinalByTheCache(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		ctx := context.Background()
		rg := newRigOn(t, lostResetAnswer{store}, dir, &model{}, idempotency.WithLocalCache(64, time.Minute))
		n := &refusingNotifier{}
		rg.p.Notify = n
		data := summarizeData(fmt.Sprintf("a lost reset answer, cached %d", time.Now().UnixNano()))
		body := taskBody("ev-1", data, "https://hook.test/x")
		for _, id := range []string{"r1", "r2"} { // the failure, then a duplicate that caches it
			if o := outcome(t, rg.p.Handle(ctx, body, handler.Meta{RequestID: id})); o.ErrorType != "notify_rejected" {
				t.Fatalf("delivery %s: %+v", id, o)
			}
		}
		n.accept.Store(true)
		if _, err := rg.p.ReplayKey(ctx, derive(t, data).Key, handler.ReplayRequest{Reason: "receiver fixed", Operator: "op"},
			handler.Meta{RetryCount: -1}); err == nil {
			t.Fatal("the replay did not fail")
		}
		r := rg.p.Handle(ctx, body, handler.Meta{RequestID: "r3"})
		if o := outcome(t, r); o.ErrorType == "notify_rejected" {
			t.Fatalf("a delivery after the reopened finish: %d %s (the store's finish is pending)", r.Status, r.Body)
		}
	})
}

// newFast is the Redis fast layer on the test Redis, under a key prefix of
// the test's own.
func newFast(t *testing.T) driver.FastLayer {
	t.Helper()
	prefix := testenv.RedisPrefix(t)
	rdb, err := redisfast.Dial(testenv.RedisURL(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	testenv.GuardRedisKeys(t, rdb, prefix)
	fast, err := redisfast.New(rdb, redisfast.MaxTTL, redisfast.WithKeyPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	return fast
}

// lateInput answers the first read of input.json "not found": the sweeper
// read it just before FC's retry saved it.
type lateInput struct {
	handler.ResultStore
	missed atomic.Bool
}

func (l *lateInput) Get(ctx context.Context, key string) ([]byte, ossresult.Meta, error) {
	if strings.HasSuffix(key, "/input.json") && l.missed.CompareAndSwap(false, true) {
		return nil, ossresult.Meta{}, ossresult.ErrNotFound
	}
	return l.ResultStore.Get(ctx, key)
}

// Past the input horizon, the sweeper reads no input.json and goes to give
// the key up; between its read and its claim, FC's retry saved the input
// (and failed retryably, say). The sweeper sees the input appear and means
// to leave the key for the next sweep, but its claim took an attempt, and
// the failure it records is escalated to FAILED_FINAL once that attempt is
// the last: a key whose input is there and whose work never ran ends
// final (code input_appeared), and FC's next retry is dead-lettered.
func TestReviewInputThatAppearsDoesNotEndTheKey(t *testing.T) {
	store := testenv.FreshMySQLStore(t) // its clock can be moved back by SQL
	dir := t.TempDir()
	rg := newRigOn(t, store, dir, &model{}, idempotency.WithMaxAttempts(2))
	data := summarizeData("its input comes late")
	d := derive(t, data)
	if _, l, err := rg.p.Engine.Claim(context.Background(), idempotency.ClaimRequest{Key: d.Key, PayloadHash: d.PayloadHash,
		Owner: "r1", Try: 0}); err != nil || l == nil {
		t.Fatalf("claim: %v", err)
	} // … and the process dies before saving its input; an hour and more goes by.
	if _, err := store.DB().Exec(`UPDATE idempotency_record SET updated_at = updated_at - INTERVAL 2 HOUR,
 lease_until = lease_until - INTERVAL 2 HOUR WHERE request_id = ?`, d.Key); err != nil {
		t.Fatal(err)
	}
	base, _ := rg.p.Results(context.Background(), handler.Credentials{})
	in, _ := jcs.Marshal(map[string]any{"tenant_id": "t1", "task_type": "summarize", "operation": "summarize",
		"input_version": d.InputVersion, "input": data["input"]})
	inKey, _ := ossresult.InputKey(d.Key)
	if _, err := base.PutOnce(context.Background(), inKey, in, "application/json", ossresult.Meta{IdempotencyKey: d.Key}); err != nil {
		t.Fatal(err)
	}
	late := &lateInput{ResultStore: base}
	rg.p.Results = func(context.Context, handler.Credentials) (handler.ResultStore, error) { return late, nil }
	rep, err := rg.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rec, _ := store.Get(context.Background(), d.Key); rec.Status == driver.StatusFailedFinal {
		t.Fatalf("the key ended FAILED_FINAL %s (attempt %d) with its input in place; sweep %+v", rec.LastErrorCode, rec.Attempt, rep)
	}
}

// The sweeper sets aside a RUNNING record past its lease that has no input
// yet (its worker may have died). The worker was only late: it renews (a
// renewal checks the fence, not the lease's end), saves nothing, and fails
// retryably. Its record keeps the deferral, made for another state: the
// FAILED_RETRYABLE key is hidden from the sweeper for up to the input
// horizon (an hour), although only a takeover was meant to end it early.
func TestReviewADeferralDoesNotOutliveTheStateItWasMadeFor(t *testing.T) {
	onStores(t, func(t *testing.T, store driver.Maintainer, dir string) {
		rg := newRigOn(t, store, dir, &model{}, idempotency.WithLease(200*time.Millisecond))
		data := summarizeData("a late worker")
		d := derive(t, data)
		_, l, err := rg.p.Engine.Claim(context.Background(), idempotency.ClaimRequest{Key: d.Key, PayloadHash: d.PayloadHash,
			Owner: "r1", Try: 0})
		if err != nil || l == nil {
			t.Fatalf("claim: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
		if rep, err := rg.p.Sweep(context.Background(), handler.Meta{}, handler.SweepOptions{}); err != nil || rep.Deferred != 1 {
			t.Fatalf("sweep %+v %v", rep, err)
		}
		if err := l.Renew(context.Background()); err != nil { // the worker was late, not dead
			t.Fatal(err)
		}
		if _, err := l.Fail(context.Background(), idempotency.Retryable("temporary_unavailable", errors.New("oss 503"))); err != nil {
			t.Fatal(err)
		}
		rec, _ := store.Get(context.Background(), d.Key)
		if !rec.SweepAfter.IsZero() {
			t.Fatalf("%s record still set aside until %s (a deferral made for the expired RUNNING one)", rec.Status,
				rec.SweepAfter.Format(time.RFC3339))
		}
	})
}

// storeOnly hides a store's maintenance side.
type storeOnly struct{ driver.Store }

// A pipeline whose store has no maintenance side refuses sweep, replay and
// purge (unsupported) and changes nothing; before, a replay reset the record
// through the engine and then failed on the missing maintenance side.
func TestReviewMaintenanceUnavailableChangesNothing(t *testing.T) {
	m := &model{fn: func(context.Context, int32, llm.Request) (llm.Response, error) {
		return llm.Response{}, idempotency.Final("policy_rejected", errors.New("content policy"))
	}}
	rg := newRig(t, m)
	data := summarizeData(fmt.Sprintf("no maint %d", time.Now().UnixNano()))
	d := derive(t, data)
	body := taskBody("ev-1", data, "")
	if o := outcome(t, rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1"})); o.Status != "FAILED_FINAL" {
		t.Fatalf("first: %+v", o)
	}
	bare := *rg.p
	bare.Engine = idempotency.New(storeOnly{rg.store})
	ctx, rr := context.Background(), handler.ReplayRequest{Reason: "r", Operator: "op"}
	_, sweepErr := bare.Sweep(ctx, handler.Meta{}, handler.SweepOptions{})
	_, keyErr := bare.ReplayKey(ctx, d.Key, rr, handler.Meta{RetryCount: -1})
	_, dlqErr := bare.ReplayDLQ(ctx, body, rr, handler.Meta{RetryCount: -1})
	_, purgeErr := bare.Purge(ctx, handler.PurgeOptions{})
	for name, err := range map[string]error{"sweep": sweepErr, "replay --key": keyErr, "replay --dlq": dlqErr, "purge": purgeErr} {
		if _, code := idempotency.Classify(err); code != "unsupported" {
			t.Errorf("%s without a maintenance side: %v, want unsupported", name, err)
		}
	}
	rows, _ := rg.store.Replays(ctx, d.Key)
	rec, _ := rg.store.Get(ctx, d.Key)
	if len(rows) != 0 || rec.Status != driver.StatusFailedFinal {
		t.Errorf("a refused operation changed the store: %d audit rows, status %s", len(rows), rec.Status)
	}
}
