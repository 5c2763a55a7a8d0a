package explore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/ossresult"
)

// The invariants checked at the moment they could break.

// checkFastAnswer: a terminal state answered by Redis is the one the
// durable store holds (Redis never contradicts the store).
func (w *world) checkFastAnswer(a *actor, key string, ans driver.FastAnswer) {
	if w.now < w.staleUntil[key] {
		return
	}
	rec, err := w.be.store.Get(context.Background(), key)
	if err != nil {
		w.violate("%s: Redis answered %s@%d for a key the store does not hold (%v)", a.name, ans.Verdict, ans.Record.Fence, err)
		return
	}
	// A finish claim moves a SUCCEEDED record's fence (Finisher), which Redis
	// is not told: a mirror read before it answers the same result at the
	// fence before.
	finishMoved := rec.Status == driver.StatusSucceeded && ans.Record.Fence < rec.Fence
	if string(rec.Status) != string(ans.Verdict) || rec.Fence != ans.Record.Fence && !finishMoved || rec.ResultRef != ans.Record.ResultRef {
		w.violate("%s: Redis answered %s@%d while the store holds %s@%d", a.name, ans.Verdict, ans.Record.Fence,
			rec.Status, rec.Fence)
	}
	w.checkFastFinish(a, key, ans, rec)
}

// checkReset: a replay never changes a record whose payload hash differs
// from the replayed event's.
func (w *world) checkReset(a *actor, key string, before driver.Record) {
	after, err := w.be.store.Get(context.Background(), key)
	if err != nil || before.Status == "" {
		return
	}
	changed := after.Status != before.Status || after.Fence != before.Fence || after.Attempt != before.Attempt
	if changed {
		w.resets[key]++
	}
	if want, ok := a.expect[key]; ok && want != before.PayloadHash && changed {
		w.violate("%s: replay of a dead letter with payload %s reset %s (payload %s): %s → %s", a.name, want[:8], key,
			before.PayloadHash[:8], before.Status, after.Status)
	}
}

// checkFail: a FINAL answer of the model is recorded FINAL by the attempt
// that got it (then no later attempt pays for the same refusal again).
func (w *world) checkFail(a *actor, key string, f driver.Failure) {
	k := w.parent[key]
	if a.modelFinal[k] && !f.Final {
		w.violate("%s: the model refused %s for good, and %s was recorded %s (retryable)", a.name, k, key, f.Code)
	}
}

// checkHeld: a delivery answered "in progress" (HTTP 200: FC stops there)
// by the store only while the key has a record. (Redis answers in progress
// for a claim the store has not confirmed yet, whose claimant may then
// fail: the documented window of docs/design.md §14, item 7.)
func (w *world) checkHeld(a *actor, key string) {
	if a.fastOther[key] {
		return
	}
	if _, err := w.be.store.Get(context.Background(), key); err == nil {
		return
	}
	w.violate("%s: answered in progress (HTTP 200) for %s, which has no record and no claim", a.name, key)
}

// checkAbandon: the sweeper gives a key up for a missing input (or one its
// re-checks could not read) only when no delivery of its event is still to
// be retried by FC.
func (w *world) checkAbandon(a *actor, key, code string) {
	for _, b := range w.actors {
		if b.kind != kindTry || b.d.spec.k.Key != key || b.d.resolved || b.state == ended || b.timedOut {
			continue
		}
		if b.d.late { // a new submission: a FINAL answer sends it to the dead-letter queue
			continue
		}
		w.violate("%s: recorded %s FAILED_FINAL %s while FC still delivers %s", a.name, key, code, b.name)
		return
	}
}

// The invariants checked when the world has drained and the sweeper has run
// to a standstill.
func (w *world) checkEnd() {
	ctx := context.Background()
	seen := map[string]bool{}
	for _, s := range w.specs {
		k := s.k.Key
		if seen[k] {
			continue
		}
		seen[k] = true
		rec, err := w.be.store.Get(ctx, k)
		if errors.Is(err, driver.ErrNotFound) {
			if len(w.successes[k]) > 0 && !w.feat["purge"] {
				w.violate("%s answered SUCCEEDED but has no record", k)
			}
			continue
		}
		if err != nil {
			w.t.Fatalf("seed %d: get %s: %v", w.seed, k, err)
		}
		w.checkRecord(rec)
	}
	w.checkAcked()
	w.checkLibrary()
	w.lv.checked = true // explore and enumerate report the violations now (lives_test.go: reportOnFatal)
	w.checkStoredEnd()
	for k, n := range w.notes.posts {
		if !seen[k] {
			w.violate("a notification carried %s, which is no business key of this world (%d posts)", k, n)
		}
	}
}

func (w *world) checkRecord(rec driver.Record) {
	k := rec.Key
	if !rec.Status.Terminal() {
		w.violate("%s ended %s (attempt %d, fence %d, %s)", k, rec.Status, rec.Attempt, rec.Fence, rec.LastErrorCode)
		return
	}
	w.checkNotifyAsked(rec)
	calls, resets := w.model.calls[k]-w.model.base[k], w.resets[k]
	if calls > rec.Attempt {
		w.violate("%s: %d model calls for %d recorded attempts", k, calls, rec.Attempt)
	}
	if rec.Attempt > maxAttempts+resets {
		w.violate("%s: %d attempts, budget %d + %d replays", k, rec.Attempt, maxAttempts, resets)
	}
	if rec.Status == driver.StatusSucceeded {
		w.checkSucceeded(rec)
	}
}

// checkSucceeded: one approved object, equal to the output result_ref names;
// every success answer named that result_ref; notified if the stored input
// asks for it.
func (w *world) checkSucceeded(rec driver.Record) {
	ctx, k := context.Background(), rec.Key
	// A FINAL finish failure stays for an operator (alert finish-failed):
	// checkFinishFailedAcked sees that no delivery of it was acknowledged.
	if rec.Finish != driver.FinishDone && rec.Finish != driver.FinishFailed {
		w.violate("%s: SUCCEEDED with its finish %q (%s) after the sweeper ran to a standstill", k, rec.Finish, rec.LastErrorCode)
	}
	for _, ref := range w.successes[k] {
		if ref != rec.ResultRef {
			w.violate("%s: a success answer named %s, the record %s", k, ref, rec.ResultRef)
		}
	}
	outKey := strings.TrimPrefix(rec.ResultRef, w.results.Ref("")+"/")
	body, _, err := w.results.Get(ctx, outKey)
	if err != nil {
		if !w.objects.gone[outKey] {
			w.violate("%s: result_ref %s: %v", k, rec.ResultRef, err)
		}
		return
	}
	var out handler.Output
	_ = json.Unmarshal(body, &out)
	approvedKey, _ := ossresult.ApprovedKey(k)
	approved, _, err := w.results.Get(ctx, approvedKey)
	switch {
	case err != nil && w.objects.gone[approvedKey]:
	case err != nil && rec.Finish == driver.FinishFailed: // never published
	case err != nil:
		w.violate("%s: SUCCEEDED without its approved object: %v", k, err)
	case string(approved) != out.Text:
		w.violate("%s: approved object %q is not the output result_ref names (%q)", k, approved, out.Text)
	}
	inputKey, _ := ossresult.InputKey(k)
	in, _, err := w.results.Get(ctx, inputKey)
	if err != nil {
		if !w.objects.gone[inputKey] {
			w.violate("%s: SUCCEEDED without input.json: %v", k, err)
		}
		return
	}
	var doc struct {
		Notify *struct{ URL string } `json:"notify"`
	}
	_ = json.Unmarshal(in, &doc)
	if doc.Notify != nil && w.notes.posts[k] == 0 && !w.notes.refused[k] {
		w.violate("%s: SUCCEEDED by %s%s, its stored input asks for notify, and nothing was posted", k, rec.LeaseOwner,
			w.ownerNotify(rec.LeaseOwner))
	}
}

// specOf is the spec whose payload rec holds.
func (w *world) specOf(rec driver.Record) *keySpec {
	for _, s := range w.specs {
		if s.k.Key == rec.Key && s.k.PayloadHash == rec.PayloadHash {
			return s
		}
	}
	return &keySpec{}
}

// ownerNotify says whether the FC delivery named owner carried notify.
func (w *world) ownerNotify(owner string) string {
	for _, d := range w.deliveries {
		if d.reqID == owner {
			if strings.Contains(string(d.body), `"notify"`) {
				return " (its event asks for notify)"
			}
			return " (a double submit without notify)"
		}
	}
	return ""
}

// checkNotification: a notification describes the task's effect, whichever
// delivery posts it — never a duplicate's answer, which a receiver dropping
// duplicates would drop, losing the only notification, nor the posting
// delivery's own request id (docs/design.md §13). So every post of key in
// one life is byte for byte the same, and names what the record keeps: K,
// SUCCEEDED, its attempt, result_ref and origin request id (X-Request-Id
// too). p is this post (w.posted), its body set here.
func (w *world) checkNotification(a *actor, key, requestID string, body []byte, p *post) {
	p.body = append([]byte(nil), body...)
	var o handler.Outcome
	if err := json.Unmarshal(body, &o); err != nil || o.IdempotencyKey != key || o.Status != string(driver.StatusSucceeded) ||
		o.Duplicate || o.Decision != string(idempotency.DecisionFirst) || o.ResultRef == "" || o.ErrorType != "" {
		w.violate("%s: the notification of %s describes the delivery, not the task's effect: %s", a.name, key, body)
		return
	}
	// The finish is held while it posts: the record's fields stand.
	if rec, err := w.be.store.Get(context.Background(), key); err == nil && (o.Attempt != rec.Attempt ||
		o.ResultRef != rec.ResultRef || o.RequestID != rec.OriginRequestID || requestID != rec.OriginRequestID) {
		w.violate("%s: the notification of %s (X-Request-Id %q) is not its record's (attempt %d, result_ref %s, request id %q): %s",
			a.name, key, requestID, rec.Attempt, rec.ResultRef, rec.OriginRequestID, body)
		return
	}
	for _, q := range w.posts[key] {
		if q != p && q.body != nil && !bytes.Equal(q.body, p.body) {
			w.violate("%s: two notifications of %s in one life differ: %s's %s, then %s", a.name, key, q.a.name, q.body, body)
			return
		}
	}
}
