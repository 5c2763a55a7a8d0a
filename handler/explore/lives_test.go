package explore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/llm"
	"github.com/idemgate/idemgate/handler/notify"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/ossresult"
)

// The lives of a key: what happens after the purge (tombstones, a key whose
// tombstone went while objects of its previous life stayed, replays of
// purged keys), and notify URLs NOTIFY_ALLOWED_HOSTS refuses
// (docs/design.md §6 "Retention", §8, §11, §13, §14 items 9 and 10).

// Neither feature is in defaultWorld: each changes the seeds' worlds, so
// that mutants killed by a seed of main's world (finish-done-before-post)
// may survive, and forbidden at seed 113 (bolt+redis) moves the world onto
// a duplicate acknowledged by Redis's unconfirmed claim of a copy whose store
// claim then failed, after the key's finish failed FINAL
// (checkFinishFailedAcked). The enumerated livesScenarios cover their rules.
func init() {
	features["forbidden"] = "some deliveries ask for a notify URL NOTIFY_ALLOWED_HOSTS refuses"
	features["latereplay"] = "an operator replays, by key and from a dead letter, keys after the purge (with purge)"
	// First: each takes a second or two, and scenarios run one after
	// another, so the mutation run meets a kill of theirs early.
	scenarios = append(livesScenarios, scenarios...)
}

// livesWorld is what the lives checks track.
type livesWorld struct {
	forbidden map[*delivery]bool // deliveries whose notify URL the allow list refuses
	checked   bool               // checkEnd ran to its end: the caller reports the violations
}

// allowList is the world's NOTIFY_ALLOWED_HOSTS: the receivers of taskEvent.
var allowList = notify.New(notify.Options{Allow: notify.MustParseAllowList("hook.test")})

// Allowed is the notifier's check before the claim (handler.Pipeline's
// prepare asks the notifier for it, as it asks notify.Client).
func (n *notifyW) Allowed(rawURL string) error { return allowList.Allowed(rawURL) }

// forbiddenURL is a receiver the allow list does not name.
const forbiddenURL = "https://intranet.test/"

// genLives adds the lives features' deliveries and actors to a seed's world.
func (w *world) genLives() {
	w.reportOnFatal()
	// A source of its own: the features change no draw of the seed's world
	// before they act.
	rng := rand.New(rand.NewPCG(uint64(w.seed), 0x11fe))
	if w.feat["forbidden"] && rng.IntN(3) == 0 {
		d := w.deliveries[rng.IntN(len(w.deliveries))]
		if bytes.Contains(d.body, []byte("https://hook.test/")) {
			d.body = bytes.Replace(d.body, []byte("https://hook.test/"), []byte(forbiddenURL), 1)
			w.forbid(d)
		}
	}
	if w.feat["latereplay"] && w.feat["purge"] {
		for i := range 1 + rng.IntN(2) {
			at := w.retention + time.Duration(rng.IntN(int((w.maxClock-w.retention)/time.Minute)))*time.Minute
			byKey := rng.IntN(2) == 0
			w.addActor(&actor{name: fmt.Sprintf("replay-late%d", i), kind: kindReplayKey, startAt: at, run: func(a *actor) {
				w.runLateReplay(a, byKey)
			}})
		}
	}
}

func (w *world) forbid(d *delivery) {
	if w.lv.forbidden == nil {
		w.lv.forbidden = map[*delivery]bool{}
	}
	w.lv.forbidden[d] = true
	w.tracef("%s asks for notify at %s", d.reqID, forbiddenURL)
}

// reportOnFatal: a violation seen before a harness failure (t.Fatalf, e.g.
// a read of a record a mutant left malformed) is still reported, in the
// form the mutation run reads.
func (w *world) reportOnFatal() {
	t := w.t
	t.Cleanup(func() {
		if t.Failed() && len(w.violations) > 0 && !w.lv.checked {
			t.Errorf("seed %d on %s: %d violations:\n  %s\n(reported before a harness failure)", w.seed, w.be.name,
				len(w.violations), strings.Join(w.violations, "\n  "))
		}
	})
}

// runLateReplay is an operator who replays a key after the purge, by key or
// from its dead letter: a tombstone's key when there is one.
func (w *world) runLateReplay(a *actor, byKey bool) {
	var tombs []*keySpec
	for _, s := range w.specs {
		if rec, err := w.be.store.Get(context.Background(), s.k.Key); err == nil && rec.Tombstone {
			tombs = append(tombs, s)
		}
	}
	if len(tombs) == 0 {
		tombs = w.specs
	}
	s := tombs[w.rng.IntN(len(tombs))]
	if byKey {
		w.replayKeyChecked(a, s)
	} else {
		w.replayDLQChecked(a, s)
	}
}

// replayKeyChecked: replay --key of s's key; a tombstone's answers
// driver.ErrPurged and changes nothing.
func (w *world) replayKeyChecked(a *actor, s *keySpec) {
	k := s.k.Key
	before, berr := w.be.store.Get(context.Background(), k)
	o, err := w.pipeline(a).ReplayKey(context.Background(), k, handler.ReplayRequest{Reason: "explore", Operator: "sim"},
		handler.Meta{RequestID: a.name, RetryCount: -1})
	if err != nil {
		w.tracef("%s: %v", a.name, err)
	} else {
		w.noteOutcome(a, o)
	}
	if class, _ := idempotency.Classify(err); class == idempotency.ClassRetryable {
		return // an outage the world injected: the operator runs it again
	}
	if berr == nil && before.Tombstone && w.sameRecord(k, before) && !errors.Is(err, driver.ErrPurged) && !a.dead.Load() {
		w.violate("%s: replay --key of the purged %s (its tombstone) answered %q, not that it was purged", a.name, k,
			fmt.Sprint(err, o.ErrorType))
	}
}

// replayDLQChecked: replay --dlq of a dead letter of s's event; a
// tombstone of its payload answers purged and changes nothing.
func (w *world) replayDLQChecked(a *actor, s *keySpec) {
	k := s.k.Key
	before, berr := w.be.store.Get(context.Background(), k)
	d := &delivery{spec: s, reqID: "fc-dead-" + s.name, body: s.bodies[0]}
	a.expect = map[string]string{k: s.k.PayloadHash}
	outs, err := w.pipeline(a).ReplayDLQ(context.Background(), failureDestination(d, 1),
		handler.ReplayRequest{Reason: "explore", Operator: "sim"}, handler.Meta{RequestID: a.name, RetryCount: -1})
	if err != nil {
		w.tracef("%s: %v", a.name, err)
	}
	for _, o := range outs {
		w.noteOutcome(a, o)
	}
	if berr != nil || !before.Tombstone || !w.sameRecord(k, before) || a.dead.Load() || len(outs) != 1 {
		return
	}
	want := "purged"
	if !driver.SamePayload(before.PayloadHash, s.k.PayloadHash, s.k.LegacyPayloadHash) {
		want = "payload_mismatch"
	}
	if o := outs[0]; o.ErrorType != want && (o.Retryable == nil || !*o.Retryable) {
		w.violate("%s: replay --dlq of the purged %s (its tombstone) answered %s %s, not %s", a.name, k, outs[0].Status,
			outs[0].ErrorType, want)
	}
}

// sameRecord: key's record is still before (nothing changed it).
func (w *world) sameRecord(key string, before driver.Record) bool {
	now, err := w.be.store.Get(context.Background(), key)
	return err == nil && sameState(before, now)
}

func sameState(a, b driver.Record) bool {
	return a.Status == b.Status && a.Fence == b.Fence && a.Attempt == b.Attempt && a.Tombstone == b.Tombstone &&
		a.Finish == b.Finish && a.ResultRef == b.ResultRef && a.UpdatedAt.Equal(b.UpdatedAt)
}

// checkTombstoneReset: a reset of a tombstone is refused (driver.ErrPurged,
// or the payload mismatch a dead letter of another payload meets first),
// and changes nothing: not the record, not the audit.
func (w *world) checkTombstoneReset(a *actor, key string, before driver.Record, replays int, err error) {
	if !before.Tombstone {
		return
	}
	ctx := context.Background()
	if err == nil || !errors.Is(err, driver.ErrPurged) && !errors.Is(err, idempotency.ErrPayloadMismatch) &&
		!errors.Is(err, driver.ErrNotReplayable) && !errors.Is(err, errInjected) && !errors.Is(err, errDead) {
		w.violate("%s: a reset of %s's tombstone (%s) was not refused as purged: %v", a.name, key, before.Status, err)
	}
	after, gerr := w.be.store.Get(ctx, key)
	if gerr != nil || !sameState(before, after) {
		w.violate("%s: a reset of %s's tombstone changed it: %s@%d → %s@%d tombstone %v (%v)", a.name, key, before.Status,
			before.Fence, after.Status, after.Fence, after.Tombstone, gerr)
	}
	if rs, _ := w.be.store.Replays(ctx, key); len(rs) != replays {
		w.violate("%s: a reset of %s's tombstone wrote an audit row (%d → %d)", a.name, key, replays, len(rs))
	}
}

// checkPurgeKeepsFailedFinish: a record whose finish failed FINAL outlives
// the purge until an operator acts (docs/design.md §14 item 10); checked
// apart from driver.Purgeable, which a store's purge uses.
func (w *world) checkPurgeKeepsFailedFinish(a *actor, before, after map[string]driver.Record) {
	for k, was := range before {
		if was.Tombstone || was.Status != driver.StatusSucceeded || was.Finish != driver.FinishFailed {
			continue
		}
		if now, ok := after[k]; !ok || now.Tombstone {
			w.violate("%s: purged %s, whose finish failed FINAL (%s), before an operator acted", a.name, k, was.LastErrorCode)
		}
	}
}

// checkModelCall: the current holder of a key calls the model only for the
// payload its record holds and its input.json (when there is one) holds: no
// run takes an object of another payload, a previous life of the key, as its
// own (docs/design.md §8, §14 item 9); and never for a delivery whose notify
// URL the allow list refuses (§13: refused before the claim).
func (w *world) checkModelCall(a *actor, r llm.Request) {
	if a.kind == kindTry && w.lv.forbidden[a.d] {
		w.violate("%s: called the model for %s, whose notify URL NOTIFY_ALLOWED_HOSTS refuses", a.name, r.Key)
	}
	var s *keySpec
	for _, c := range w.specs {
		if c.k.Key == r.Key && strings.Contains(r.Prompt, c.token) {
			s = c
		}
	}
	if h := w.holders[r.Key]; s == nil || h == nil || h.a != a {
		return // a stale worker: its writes are fenced
	}
	ctx := context.Background()
	if rec, err := w.be.store.Get(ctx, r.Key); err == nil && !driver.SamePayload(rec.PayloadHash, s.k.PayloadHash, s.k.LegacyPayloadHash) {
		w.violate("%s: called the model with %s's payload under %s's record of another payload", a.name, s.name, r.Key)
	}
	inputKey, _ := ossresult.InputKey(r.Key)
	if in, _, err := w.results.Get(ctx, inputKey); err == nil && !bytes.Contains(in, []byte(s.token)) {
		w.violate("%s: called the model with %s's payload while %s's input.json holds another payload (a previous life's)",
			a.name, s.name, r.Key)
	}
}

// checkLivesAnswer: no answer carries another payload's result or state
// (docs/design.md §14 item 9): a PAYLOAD_MISMATCH answer names no result and
// no status, an FC delivery's answer names no other payload's hash; the
// sweeper re-drives a record only with its own payload; a delivery whose
// notify URL the allow list refuses is answered notify_forbidden.
func (w *world) checkLivesAnswer(a *actor, o handler.Outcome) {
	if o.Decision == string(driver.DecisionPayloadMismatch) || o.ErrorType == "payload_mismatch" {
		switch o.Status {
		case "", handler.StatusRejected:
		default:
			w.violate("%s: a payload_mismatch answer for %s carries the record's status %s", a.name, o.IdempotencyKey, o.Status)
		}
		if o.ResultRef != "" {
			w.violate("%s: a payload_mismatch answer for %s carries a result_ref (%s)", a.name, o.IdempotencyKey, o.ResultRef)
		}
		if a.kind == kindSweep {
			w.violate("%s: the sweeper re-drove %s with another payload than its record's", a.name, o.IdempotencyKey)
		}
	}
	if a.kind != kindTry {
		return
	}
	for _, s := range w.specs {
		if s.k.Key == a.d.spec.k.Key && s.k.PayloadHash != a.d.spec.k.PayloadHash &&
			strings.Contains(o.ErrorMessage+o.ResultRef, s.k.PayloadHash) {
			w.violate("%s: the answer names %s's payload hash, another payload's: %s", a.name, s.name, o.ErrorMessage)
		}
	}
	if w.lv.forbidden[a.d] && o.ErrorType != notify.CodeForbidden {
		w.violate("%s: a delivery whose notify URL NOTIFY_ALLOWED_HOSTS refuses was answered %s %s %s", a.name, o.Status,
			o.Decision, o.ErrorType)
	}
}

// Enumerated windows of the lives of a key (TestEnumerate; one key, no
// faults): an explicit key reused by another payload while its tombstone
// stands and after it went with objects of the previous life left behind
// (a bucket keeping them longer than the purge keeps tombstones, or a
// lifecycle rule per kind tag), replays of a purged key, a finish that
// failed FINAL at the purge, a malformed tombstone at the embedded sweep.
const livesEnum = "reuse-over-tombstone,reuse-after-tombstone,sweep-after-tombstone,outputs-of-a-previous-life," +
	"failed-finish-purge,forbidden-notify,malformed-tombstone-sweep"

var livesScenarios = []scenario{
	{name: "reuse-over-tombstone", stores: "bolt",
		about: "A's key is purged to its tombstone and A's input.json expired; B reuses the key, an operator replays A by key and from its dead letter",
		setup: func(w *world) []*actor {
			a, _ := w.reuseSpecs()
			w.tombAge = 10 * w.retention // the tombstone stays
			w.lifeOf(a)
			w.expireNow(inputKeyOf(a))
			return nil
		},
		actors: func(w *world) []*actor {
			a, b := w.specs[0], w.specs[1]
			return []*actor{w.tryActor(w.newDelivery(b, "fc-b"), 0), w.replayKeyActor(a), w.replayDLQActor(a)}
		}},
	{name: "reuse-after-tombstone", stores: "bolt",
		about: "A's tombstone went while its objects stayed; B reuses the key (and is refused foreign_objects)",
		setup: func(w *world) []*actor {
			w.pastTombstone()
			return nil
		},
		actors: func(w *world) []*actor {
			return []*actor{w.tryActor(w.newDelivery(w.specs[1], "fc-b"), 0)}
		}},
	{name: "sweep-after-tombstone", stores: "bolt",
		about: "A's tombstone went while its objects stayed; B's delivery claims the key and dies before saving its input; the sweeper comes",
		setup: func(w *world) []*actor {
			w.pastTombstone()
			return nil
		},
		actors: func(w *world) []*actor {
			claim := w.claimerActor(w.specs[1], "fc-b")
			clock := w.clockActor(w.lease + w.grace + time.Second)
			clock.after = claim
			sweep := w.sweepActor()
			sweep.after = clock
			return []*actor{claim, clock, sweep}
		}},
	{name: "outputs-of-a-previous-life", stores: "bolt",
		about: "A's tombstone went with its input.json and approved object (a lifecycle rule per kind tag) while its attempt output stayed; B's first attempt fails at the model, FC retries",
		setup: func(w *world) []*actor {
			a, b := w.pastTombstone()
			w.expireNow(inputKeyOf(a))
			approved, _ := ossresult.ApprovedKey(a.k.Key)
			w.expireNow(approved)
			w.model.scripts[b.k.Key], w.model.calls[b.k.Key] = scriptFailFirst, 0
			return nil
		},
		actors: func(w *world) []*actor {
			return []*actor{w.tryActor(w.newDelivery(w.specs[1], "fc-b"), 0)}
		}},
	{name: "failed-finish-purge", stores: "bolt",
		about: "the receiver refuses the notification for good (the finish fails FINAL); the purge comes past the retention",
		setup: func(w *world) []*actor {
			s := w.spec(scriptOK, true)
			w.notes.refuses[s.k.Key] = true
			w.runToEnd(w.tryActor(w.newDelivery(s, "fc-a"), 0))
			w.advance(w.retention + time.Second)
			return nil
		},
		actors: func(w *world) []*actor {
			return []*actor{w.addActor(&actor{name: "purge", kind: kindPurge, startAt: w.now, run: w.runPurge}),
				w.tryActor(w.newDelivery(w.specs[0], "fc-a2"), 0)}
		}},
	{name: "forbidden-notify", stores: "bolt",
		about: "a delivery asks for a notify URL NOTIFY_ALLOWED_HOSTS refuses; a double submit of the same action asks for an allowed one",
		setup: func(w *world) []*actor {
			w.reportOnFatal()
			w.spec(scriptOK, true)
			return nil
		},
		actors: func(w *world) []*actor {
			s := w.specs[0]
			bad := w.newDelivery(s, "fc-bad")
			bad.body = bytes.Replace(bad.body, []byte("https://hook.test/"), []byte(forbiddenURL), 1)
			w.forbid(bad)
			return []*actor{w.tryActor(bad, 0), w.tryActor(w.newDelivery(s, "fc-ok"), 0)}
		}},
	{name: "malformed-tombstone-sweep", stores: "bolt",
		about: "a malformed tombstone (RUNNING, its lease over) sits in the embedded store beside a delivery; the sweeper runs",
		setup: func(w *world) []*actor {
			w.spec(scriptOK, false)
			w.malformedTombstone()
			return nil
		},
		actors: func(w *world) []*actor {
			return []*actor{w.tryActor(w.newDelivery(w.specs[0], "fc-a"), 0), w.sweepActor()}
		}},
}

// reuseSpecs adds A (explicit key order-0) and B, another payload reusing
// A's key.
func (w *world) reuseSpecs() (a, b *keySpec) {
	w.reportOnFatal()
	w.objectTTL = 0         // the scenario expires objects itself
	w.tombAge = w.retention // a tombstone goes at the next purge after it is retired
	a = &keySpec{name: "k0", taskType: "summarize", explicit: "order-0", script: scriptOK, token: token(0)}
	a.input = specInput(a.taskType, "the enumerated document "+a.token)
	b = &keySpec{name: "k0b", taskType: "summarize", explicit: "order-0", script: scriptOK, token: token(9)}
	b.input = specInput(b.taskType, "another enumerated document "+b.token)
	w.specs = append(w.specs, a, b)
	w.derive(w.tenant)
	return a, b
}

// lifeOf runs s's delivery to its end, then retires the key to its
// tombstone past the retention.
func (w *world) lifeOf(s *keySpec) {
	w.runToEnd(w.tryActor(w.newDelivery(s, "fc-a"), 0))
	w.purgeAfter(w.retention + time.Second)
}

// pastTombstone adds reuseSpecs' A and B, runs A's life and purges past
// its tombstone's age: the key is gone from the store, A's objects stay.
func (w *world) pastTombstone() (a, b *keySpec) {
	a, b = w.reuseSpecs()
	w.lifeOf(a)
	w.purgeAfter(w.retention + time.Second) // the tombstone goes
	return a, b
}

// purgeAfter moves the clock by d and runs one purge.
func (w *world) purgeAfter(d time.Duration) {
	w.advance(d)
	w.runToEnd(w.addActor(&actor{name: "purge-setup", kind: kindPurge, startAt: w.now, run: w.runPurge}))
}

func inputKeyOf(s *keySpec) string {
	k, _ := ossresult.InputKey(s.k.Key)
	return k
}

// expireNow deletes an object, as a lifecycle rule does.
func (w *world) expireNow(key string) {
	p := filepath.Join(w.resultsDir, filepath.FromSlash(key))
	for _, f := range []string{p, p + ".meta.json"} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			w.t.Fatalf("expire %s: %v", key, err)
		}
	}
	w.tracef("object %s expired", w.objName(key))
	w.objects.forget(key)
}

// claimerActor is a delivery of s whose instance dies right after its
// claim, before it saves its input (and whose FC retries are over).
func (w *world) claimerActor(s *keySpec, reqID string) *actor {
	return w.addActor(&actor{name: reqID + "/try0", kind: kindLib, startAt: w.now, run: func(a *actor) {
		p := w.pipeline(a)
		res, _, err := p.Engine.Claim(context.Background(), idempotency.ClaimRequest{Key: s.k.Key, PayloadHash: s.k.PayloadHash,
			Owner: reqID, Try: 0})
		w.tracef("%s claimed %s: %s %v; its instance dies", a.name, s.name, res.Decision, err)
		a.engine = nil
		a.dead.Store(true)
	}})
}

func (w *world) replayKeyActor(s *keySpec) *actor {
	return w.addActor(&actor{name: "replay-key-" + s.name, kind: kindReplayKey, startAt: w.now,
		run: func(a *actor) { w.replayKeyChecked(a, s) }})
}

func (w *world) replayDLQActor(s *keySpec) *actor {
	return w.addActor(&actor{name: "replay-dlq-" + s.name, kind: kindReplayDLQ, startAt: w.now,
		run: func(a *actor) { w.replayDLQChecked(a, s) }})
}

// malformedTombstone writes, under a key of no delivery, a tombstone that
// is no finished task record (RUNNING, its lease over) and an input.json
// for it: nothing may take it up, and the sweeper must not list it.
func (w *world) malformedTombstone() {
	s, ok := w.be.store.(*boltstore.Store)
	if !ok {
		w.t.Fatalf("malformed tombstone: not the embedded store")
	}
	key := strings.Repeat("d", 64)
	past := time.Now().Add(-3 * w.lease)
	rec := driver.Record{Key: key, Status: driver.StatusRunning, Tombstone: true, PayloadHash: "ph", Fence: 1, Attempt: 1,
		LeaseUntil: past, CreatedAt: past, UpdatedAt: past}
	if err := putBolt(s, rec); err != nil {
		w.t.Fatal(err)
	}
	inputKey, _ := ossresult.InputKey(key)
	if _, err := w.results.PutOnce(context.Background(), inputKey, []byte(`{}`), "application/json", ossresult.Meta{IdempotencyKey: key}); err != nil {
		w.t.Fatal(err)
	}
	w.tracef("a malformed tombstone (RUNNING) under %s", key[:8])
}

func putBolt(s *boltstore.Store, rec driver.Record) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return s.DB().Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("idempotency_record")).Put([]byte(rec.Key), v) })
}
