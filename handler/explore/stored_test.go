package explore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/mysqlstore"
)

// Feature stored: keys whose record the world never writes itself — left by
// an earlier version, by migration 005 or by an operator's hand edit — are
// written straight into the backend before the world starts, and delivered
// like any other key. Each key first runs once through the pipeline (its
// objects and record are real), then its record is rewritten in the store
// (as an UPDATE on MySQL, the JSON value on the embedded store) and its
// Redis entry dropped, as an upgrade finds it; two kinds then put a Redis
// entry back (a late mirror, a FINAL answer).

// damage is one kind of stored state.
type damage struct {
	name  string
	about string
	bolt  func(r *driver.Record)
	mysql string // the SET clause of the same rewrite
	// malformed: every read refuses it (driver.ErrMalformedTombstone)
	malformed bool
	unhashed  bool
	legacy    bool // the record holds the payload's legacy hash (a spec with input_version)
	failed    bool // a FAILED finish
}

// old moves a record's timestamps 400 days back: the purge finds it past
// every age.
const oldSQL = `, created_at = created_at - INTERVAL 400 DAY, updated_at = updated_at - INTERVAL 400 DAY`

func old(r *driver.Record) {
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.Add(-400*24*time.Hour), r.UpdatedAt.Add(-400*24*time.Hour)
}

// retireSQL is the purge's own retirement (idempotency/mysqlstore/purge.go).
const retireSQL = `status = CONCAT('TOMB_', IF(status = 'SUCCEEDED', 'SUCCEEDED', 'FAILED')), steps = NULL,
 last_error = '', lease_owner = '', lease_until = NULL, sweep_after = NULL, traceparent = '', origin_request_id = '',
 event_source = '', event_id = ''`

// A FAILED finish is past the retention (2 h) but not the tombstones' age:
// it outlives the purge until an operator acts, and a tombstone of it
// would stay to be seen.
const (
	failedAgeSQL = `, created_at = created_at - INTERVAL 121 MINUTE, updated_at = updated_at - INTERVAL 121 MINUTE`
	failedSQL    = `finish = 'FAILED', last_error_code = 'result_conflict', last_error = 'approved/result.md holds another result'` + failedAgeSQL
)

func failedAge(r *driver.Record) {
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.Add(-121*time.Minute), r.UpdatedAt.Add(-121*time.Minute)
}

func failFinish(r *driver.Record) {
	r.Finish, r.LastErrorCode, r.LastError = driver.FinishFailed, "result_conflict", "approved/result.md holds another result"
	failedAge(r)
}

var damages = []damage{
	{name: "unhashed", about: "a record written before payload hashes existed", unhashed: true,
		bolt: func(r *driver.Record) { r.PayloadHash = "" }, mysql: `payload_hash = ''`},
	{name: "unhashed-tombstone", about: "the tombstone of a record without a payload hash", unhashed: true,
		bolt:  func(r *driver.Record) { driver.Retire(r); r.PayloadHash = "" },
		mysql: retireSQL + `, payload_hash = ''`},
	{name: "legacy-hash", about: "a record holding the payload hash an earlier version computed", legacy: true,
		bolt: func(r *driver.Record) {}, mysql: ``}, // the hash is set by the caller
	{name: "malformed-running", about: "a tombstone that says RUNNING (a hand edit)", malformed: true,
		bolt:  func(r *driver.Record) { driver.Retire(r); r.Status = driver.StatusRunning; old(r) },
		mysql: `status = 'TOMB_RUNNING'` + oldSQL},
	{name: "malformed-pending", about: "a tombstone whose finish is still pending (a hand edit)", malformed: true,
		bolt:  func(r *driver.Record) { driver.Retire(r); r.Finish = driver.FinishPending; old(r) },
		mysql: retireSQL + `, finish = 'PENDING'` + oldSQL},
	{name: "malformed-step", about: "a step record's tombstone (a hand edit)", malformed: true,
		bolt:  func(r *driver.Record) { driver.Retire(r); r.ParentKey = r.Key; old(r) },
		mysql: retireSQL + `, parent_key = request_id` + oldSQL},
	{name: "finish-without-code", about: "a finish migration 005 marked FAILED without an error code", failed: true,
		bolt: func(r *driver.Record) {
			r.Finish, r.LastErrorCode, r.LastError = driver.FinishFailed, "", ""
			failedAge(r)
		},
		mysql: `finish = 'FAILED', last_error_code = '', last_error = ''` + failedAgeSQL},
	{name: "finish-late-mirror", about: "a FAILED finish whose Redis entry still says SUCCEEDED (a duplicate's late mirror); FC retries the failed request", failed: true,
		bolt: failFinish, mysql: failedSQL},
	{name: "finish-replayed", about: "a FAILED finish answered FINAL from Redis; an operator replays it by key", failed: true,
		bolt: failFinish, mysql: failedSQL},
}

func damageNamed(name string) damage {
	for _, d := range damages {
		if d.name == name {
			return d
		}
	}
	panic("no damage " + name)
}

// storedKey is one key of the feature.
type storedKey struct {
	s       *keySpec
	dmg     damage
	want    driver.Record // the record as rewritten
	base    int           // model calls before the world began
	lives   int           // lives begun before the world began
	retired bool          // its FAILED finish was seen retired (reported once)
}

// storedKeys: the feature's keys, by K; strict: the actors whose Redis
// answers are checked against a reopened finish (an enumerated scenario's:
// in a random world a delivery may read the failed finish before a replay
// reopens it and mirror it after, or claim between the reset's commit and
// its drop of the entry, docs/design.md §10).
// overFailure (any key's): the actors Redis answered SUCCEEDED while the
// store's finish had failed FINAL (checkFinishFailedAcked then holds their
// acknowledgment against them, whenever they began); claimOwner: the lease
// owner each actor's last claim was answered with (checkOwnLeaseAcked).
type storedKeys struct {
	keys        map[string]*storedKey
	strict      map[*actor]bool
	overFailure map[*actor]bool
	claimOwner  map[*actor]string
}

// genStored seeds one or two keys with stored state and their deliveries.
func (w *world) genStored() {
	w.stored.keys = map[string]*storedKey{}
	tenant := fmt.Sprintf("t-%s-%s-%d", w.nonce, w.be.name, w.seed)
	for i := range 1 + w.rng.IntN(2) {
		dmg := damages[w.rng.IntN(len(damages))]
		if w.be.fast == nil && (dmg.name == "finish-late-mirror" || dmg.name == "finish-replayed") {
			dmg = damageNamed("finish-without-code") // without Redis, a failed finish of its own
		}
		s := &keySpec{name: fmt.Sprintf("s%d", i), taskType: "summarize", script: scriptOK, token: token(12 + i)}
		if dmg.legacy || w.rng.IntN(3) == 0 {
			s.explicit, s.version = fmt.Sprintf("legacy-%d", i), "v1"
		}
		s.input = specInput(s.taskType, fmt.Sprintf("stored document %d of seed %d %s", i, w.seed, s.token))
		s.k = mustDerive(w.t, tenant, s)
		s.bodies[0], s.bodies[1] = taskEvent(tenant, s, false), taskEvent(tenant, s, false)
		w.model.scripts[s.k.Key] = scriptOK
		w.pairs = append(w.pairs, s.k.Key, s.name)
		w.names = strings.NewReplacer(w.pairs...)
		sk := &storedKey{s: s, dmg: dmg}
		w.seedStored(sk)
		w.stored.keys[s.k.Key] = sk // (after its first delivery, which answered as usual)
		w.tracef("stored: %s is %s (%s)", s.name, dmg.name, dmg.about)
		w.genStoredActors(sk)
	}
}

// seedStored runs the key's first delivery to its end (no faults), then
// rewrites its record.
func (w *world) seedStored(sk *storedKey) {
	k := sk.s.k.Key
	d := &delivery{spec: sk.s, reqID: "fc-" + sk.s.name + "-old", body: sk.s.bodies[0]}
	draining := w.draining
	w.draining = true // no fault, and its finish marks are flushed
	a := w.addActor(&actor{name: d.reqID + "/try0", kind: kindTry, d: d, run: func(a *actor) { w.runTry(a) }})
	w.start(a)
	for a.state == atYield {
		w.resume(a, proceed)
	}
	w.draining = draining
	sk.base, sk.lives = w.model.calls[k], w.lives[k]
	ctx := context.Background()
	rec, err := w.be.store.Get(ctx, k)
	if err != nil || rec.Status != driver.StatusSucceeded || rec.Finish != driver.FinishDone {
		w.t.Fatalf("seed %d: stored %s: its first delivery left %+v %v", w.seed, sk.s.name, rec, err)
	}
	set, edit := sk.dmg.mysql, sk.dmg.bolt
	if sk.dmg.legacy {
		set = fmt.Sprintf("payload_hash = '%s'", sk.s.k.LegacyPayloadHash)
		edit = func(r *driver.Record) { r.PayloadHash = sk.s.k.LegacyPayloadHash }
	}
	if err := rewrite(w.be.store, k, edit, set); err != nil {
		w.t.Fatalf("seed %d: stored %s: rewrite: %v", w.seed, sk.s.name, err)
	}
	sk.want, err = w.be.store.Get(ctx, k)
	switch {
	case sk.dmg.malformed && err == nil:
		w.violate("%s: a malformed tombstone (%s) was read without an error (ErrMalformedTombstone)", k, sk.dmg.name)
	case sk.dmg.malformed != errors.Is(err, driver.ErrMalformedTombstone) || err != nil && !sk.dmg.malformed:
		w.t.Fatalf("seed %d: stored %s (%s): read back %v", w.seed, sk.s.name, sk.dmg.name, err)
	}
	if w.be.fast == nil {
		return
	}
	if err := w.be.fast.Forget(ctx, k); err != nil { // as an upgrade finds it: Redis holds nothing of the key
		w.t.Fatalf("seed %d: forget: %v", w.seed, err)
	}
	var mirror driver.Record
	switch sk.dmg.name {
	case "finish-late-mirror": // what a duplicate read before the finish failed
		mirror = sk.want
		mirror.Finish, mirror.LastErrorCode, mirror.LastError = driver.FinishPending, "", ""
	case "finish-replayed": // what a delivery's claim mirrored of the failed finish
		mirror = sk.want
	default:
		return
	}
	if err := w.be.fast.Publish(ctx, mirror, 0); err != nil {
		w.t.Fatalf("seed %d: publish: %v", w.seed, err)
	}
}

// rewrite edits key's record in the store itself.
func rewrite(s driver.Maintainer, key string, edit func(*driver.Record), set string) error {
	switch s := s.(type) {
	case *boltstore.Store:
		return s.DB().Update(func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte("idempotency_record"))
			var r driver.Record
			if err := json.Unmarshal(b.Get([]byte(key)), &r); err != nil {
				return err
			}
			edit(&r)
			v, err := json.Marshal(r)
			if err != nil {
				return err
			}
			return b.Put([]byte(key), v)
		})
	case *mysqlstore.Store:
		if set == "" {
			return nil
		}
		_, err := s.DB().Exec(`UPDATE idempotency_record SET `+set+` WHERE request_id = ?`, key)
		return err
	}
	return fmt.Errorf("no rewrite for %T", s)
}

// genStoredActors: deliveries of the key from the start (within a Redis
// entry's life), one later; for a late mirror, FC's retries of the request
// whose finish failed; for a replayed finish, the operator's replay by key;
// for a record without a payload hash, library callers that name none.
func (w *world) genStoredActors(sk *storedKey) {
	s := sk.s
	n := 2 + w.rng.IntN(2)
	for j := range n {
		d := &delivery{spec: s, reqID: fmt.Sprintf("fc-%s-%d", s.name, j), body: s.bodies[0]}
		at, try := time.Duration(0), 0
		switch {
		case sk.dmg.name == "finish-late-mirror": // FC's retries of requests answered the failure before
			try = 1
			if j == 0 {
				d.reqID = "fc-" + s.name + "-old" // the request whose finish failed
			}
		case j == n-1:
			at = time.Duration(w.rng.IntN(int(maxExplored/time.Minute))) * time.Minute
		}
		w.addTry(d, try, at)
	}
	switch {
	case sk.dmg.name == "finish-replayed":
		w.addActor(&actor{name: "replay-key-" + s.name, kind: kindReplayKey, run: func(a *actor) { w.runReplayKey(a, s.k.Key) }})
	case sk.dmg.unhashed:
		for i := range 1 + w.rng.IntN(2) {
			w.addActor(&actor{name: fmt.Sprintf("lib-%s-%d", s.name, i), kind: kindLib, run: func(a *actor) { w.runStoredLibrary(a, sk) }})
		}
	}
}

// runStoredLibrary: a library caller that names no payload hash, as the
// record's own did: answered from it (docs/design.md §6, "Retention").
func (w *world) runStoredLibrary(a *actor, sk *storedKey) {
	st := &storeW{a: a, s: w.be.store}
	opts := []idempotency.Option{idempotency.WithLease(w.lease), idempotency.WithMaxAttempts(maxAttempts),
		idempotency.WithLogger(w.log), idempotency.WithFastTimeout(5 * time.Second), idempotency.WithFastBackoff(0)}
	if w.be.fast != nil {
		opts = append(opts, idempotency.WithFastLayer(&fastW{a: a, f: w.be.fast}))
	}
	a.engine = idempotency.New(st, opts...)
	k := sk.s.k.Key
	out, err := a.engine.Do(context.Background(), idempotency.ClaimRequest{Key: k, Owner: "", Try: -1},
		func(context.Context, *idempotency.Lease) (string, error) {
			w.violate("%s: ran the task of %s (%s), which is finished", a.name, k, sk.dmg.name)
			return "", errors.New("explore: ran")
		})
	w.tracef("%s answered %s %s %v", a.name, out.Status, out.Decision, err)
	class, code := idempotency.Classify(err)
	switch {
	case err == nil && (out.Status != driver.StatusSucceeded || out.ResultRef != sk.want.ResultRef):
		w.violate("%s: a caller naming no payload hash, like %s's record (%s), was answered %s %q, want its result %q",
			a.name, k, sk.dmg.name, out.Status, out.ResultRef, sk.want.ResultRef)
	case err != nil && class == idempotency.ClassFinal:
		w.violate("%s: a caller naming no payload hash, like %s's record (%s), was answered FINAL %s", a.name, k,
			sk.dmg.name, code)
	}
}

// checkStoredAnswer: a FINAL malformed_tombstone answers only a malformed
// tombstone; what answers a stored key is what its record says.
func (w *world) checkStoredAnswer(a *actor, o handler.Outcome) {
	for _, k := range sortedKeys(w.stored.keys) {
		if sk := w.stored.keys[k]; sk.dmg.failed {
			w.checkFailedKept(k, sk)
		}
	}
	k := o.IdempotencyKey
	sk := w.stored.keys[k]
	final := o.Retryable != nil && !*o.Retryable
	if o.ErrorType == "malformed_tombstone" && (sk == nil || !sk.dmg.malformed) {
		w.violate("%s: answered %s FINAL malformed_tombstone, which is no malformed tombstone (%s)", a.name, k,
			o.ErrorMessage)
	}
	if sk == nil || w.lives[k] > sk.lives || o.Status == string(driver.StatusRunning) && a.fastOther[k] {
		// (a new life after the purge deleted it; Redis answered another
		// claim's unconfirmed entry: in progress, docs/design.md §14.7)
		return
	}
	switch {
	case sk.dmg.malformed && a.kind == kindSweep:
		w.violate("%s: the sweeper took up %s, a malformed tombstone (%s): answered %s %s", a.name, k, sk.dmg.name,
			o.Status, o.ErrorType)
	case sk.dmg.malformed && (o.ErrorType == "" || final && o.ErrorType != "malformed_tombstone"):
		w.violate("%s: answered %s %s %s %s, a malformed tombstone (%s), want FINAL malformed_tombstone", a.name, k,
			o.Status, o.Decision, o.ErrorType, sk.dmg.name)
	case sk.dmg.unhashed && a.kind != kindSweep && (o.ErrorType == "" || a.kind == kindTry && final && o.ErrorType != "payload_mismatch"):
		w.violate("%s: answered %s %s %s %s %s to a request naming a payload hash; the record (%s) names none: want payload_mismatch",
			a.name, k, o.Status, o.Decision, o.ErrorType, o.ResultRef, sk.dmg.name)
	case sk.dmg.legacy && final && (a.kind == kindTry || o.ErrorType == "payload_mismatch"): // (a replay of a purged key is refused)
		w.violate("%s: answered %s FINAL %s; its record holds the payload's legacy hash (%s)", a.name, k, o.ErrorType,
			o.ErrorMessage)
	case sk.dmg.failed && a.kind == kindTry && final && o.ErrorType != sk.want.LastErrorCode && o.ErrorType != "finish_failed" &&
		o.ErrorType != "objects_expired": // a replay's finish after the objects expired
		w.violate("%s: answered %s FINAL %s, its finish failed %q", a.name, k, o.ErrorType, sk.want.LastErrorCode)
	}
}

// checkFailedKept: the purge never retires a FAILED finish (seen at every
// answer: a later purge may delete its tombstone).
func (w *world) checkFailedKept(k string, sk *storedKey) {
	if sk.retired {
		return
	}
	if rec, err := w.be.store.Get(context.Background(), k); err == nil && rec.Tombstone && rec.Finish == driver.FinishFailed {
		sk.retired = true
		w.violate("%s (%s): the purge retired its FAILED finish; it outlives the purge until an operator acts", k, sk.dmg.name)
	}
}

// checkFastFinish: Redis answers a failed finish (a SUCCEEDED entry with an
// error code) only while the store holds one: a replay that completed it
// dropped it (docs/design.md §10).
func (w *world) checkFastFinish(a *actor, key string, ans driver.FastAnswer, rec driver.Record) {
	if ans.Verdict == driver.FastSucceeded && rec.FailedFinish() {
		if w.stored.overFailure == nil {
			w.stored.overFailure = map[*actor]bool{}
		}
		w.stored.overFailure[a] = true
	}
	if !w.stored.strict[a] {
		return
	}
	if ans.Verdict == driver.FastSucceeded && ans.Record.LastErrorCode != "" && !rec.FailedFinish() {
		w.violate("%s: Redis answered %s's finish failed %s while the store holds its finish %q", a.name, key,
			ans.Record.LastErrorCode, rec.Finish)
	}
}

// checkStoredEnd: a stored key's record is as the world found it, but for
// what its deliveries may change (a replay completing a failed finish, the
// purge retiring a finished record); no task of it ran again.
func (w *world) checkStoredEnd() {
	ctx := context.Background()
	for _, k := range sortedKeys(w.stored.keys) {
		sk := w.stored.keys[k]
		rec, err := w.be.store.Get(ctx, k)
		if w.lives[k] > sk.lives && !sk.dmg.malformed { // purged, then delivered again: the world's checks
			continue
		}
		if calls := w.model.calls[k] - sk.base; calls > 0 {
			w.violate("%s (%s): %d model calls after the world began; it was finished", k, sk.dmg.name, calls)
		}
		switch {
		case sk.dmg.malformed:
			if !errors.Is(err, driver.ErrMalformedTombstone) || rec.Status != sk.want.Status || rec.Fence != sk.want.Fence ||
				rec.Finish != sk.want.Finish || rec.ParentKey != sk.want.ParentKey || !rec.Tombstone ||
				rec.ResultRef != sk.want.ResultRef || rec.PayloadHash != sk.want.PayloadHash {
				w.violate("%s: the malformed tombstone (%s) changed: %s@%d finish %q tombstone %t (%v), was %s@%d finish %q",
					k, sk.dmg.name, rec.Status, rec.Fence, rec.Finish, rec.Tombstone, err, sk.want.Status, sk.want.Fence, sk.want.Finish)
			}
		case rec.Tombstone && rec.Finish == driver.FinishFailed:
			w.checkFailedKept(k, sk)
		case errors.Is(err, driver.ErrNotFound):
			// a finished record past the purge's ages
		case err != nil:
			w.violate("%s (%s): %v", k, sk.dmg.name, err)
		case rec.Status != sk.want.Status || rec.ResultRef != sk.want.ResultRef || rec.PayloadHash != sk.want.PayloadHash:
			w.violate("%s (%s) ended %s %q (payload hash %q), was %s %q (%q)", k, sk.dmg.name, rec.Status, rec.ResultRef,
				rec.PayloadHash, sk.want.Status, sk.want.ResultRef, sk.want.PayloadHash)
		case rec.Finish != driver.FinishDone && rec.Finish != driver.FinishFailed:
			w.violate("%s (%s): its finish %q after the sweeper ran to a standstill", k, sk.dmg.name, rec.Finish)
		}
	}
}

// storedRedisKeys: the feature's keys, whose Redis entries age with the clock.
func (w *world) storedRedisKeys() []string { return sortedKeys(w.stored.keys) }

// The window of a replayed finish: a key whose finish failed FINAL, its
// FINAL answer in Redis; an operator replays it by key, and a delivery
// after the replay is answered from what the replay left (strict: Redis may
// not answer the failure the replay completed). A duplicate racing the
// replay is left out: one that reads the reopened finish before the
// replay's finish claim moves its fence mirrors SUCCEEDED at the old fence
// after it (the same result; checkFastAnswer compares fences), as in the
// documented late mirror of docs/design.md §10.
func init() {
	scenarios = append(scenarios, scenario{name: "replayed-finish-redis", stores: "bolt+redis",
		about: "a replay by key completes a failed finish whose FINAL answer Redis holds; a delivery follows it",
		setup: func(w *world) []*actor {
			s := w.spec(scriptOK, false)
			sk := &storedKey{s: s, dmg: damageNamed("finish-replayed")}
			w.seedStored(sk)
			w.stored.keys = map[string]*storedKey{s.k.Key: sk}
			return nil
		},
		actors: func(w *world) []*actor {
			s := w.specs[0]
			r := w.addActor(&actor{name: "replay-key", kind: kindReplayKey, startAt: w.now,
				run: func(a *actor) { w.runReplayKey(a, s.k.Key) }})
			after := w.tryActor(w.newDelivery(s, "fc-after"), 0)
			after.after = r
			w.stored.strict = map[*actor]bool{after: true}
			return []*actor{r, after}
		}})
}
