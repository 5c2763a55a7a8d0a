package explore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/llm"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/ossresult"
)

// The world's features, each behind its name in -world, so that a feature
// that finds a bug not fixed yet can wait without the others.
var features = map[string]string{
	"delay":       "FC delivers a retry after a back-off of up to 10 minutes, not at once",
	"late":        "a double submit arrives long after the first deliveries (after purges, with the purge feature)",
	"library":     "library callers (Engine.Do) without an owner share a key of their own",
	"copies":      "FC delivers the same try twice",
	"go1":         "deliveries over the go1 runtime API: no retry count on any try (the SDK reports 0)",
	"norc":        "deliveries over the custom runtime without x-fc-retry-count (RetryCount -1)",
	"notifyfinal": "the notify receiver sometimes refuses FINAL (410)",
	"purge":       "the daily purge runs (retention 2 h of the world's clock, which runs for 7.5 h)",
	"expiry":      "objects expire 1 to 3 retentions after their write (the bucket's lifecycle rule; with purge)",
	"resend":      "the late double submit may come after its key was purged (with purge and late)",
	"cache":       "every process keeps a local cache of terminal answers (WithLocalCache)",
	"evict":       "Redis evicts a key's entry before its TTL (memory pressure)",
	"acked":       "check that every delivery answered HTTP 200 has its work done or dead-lettered",
	"stored":      "keys with stored state the world never writes: no payload hash, a malformed tombstone, a FAILED finish without a code or under a stale Redis entry (stored_test.go)",
}

// defaultWorld is what CI explores: every feature whose findings are fixed.
const defaultWorld = "delay,late,library,purge,cache,evict,expiry,notifyfinal,go1,norc,copies,resend,acked,stored"

var flagWorld = flag.String("world", defaultWorld, "the world's features, comma-separated, or all (see features in features_test.go)")

func worldFeatures() map[string]bool {
	on := map[string]bool{}
	for _, f := range strings.Split(*flagWorld, ",") {
		switch f = strings.TrimSpace(f); {
		case f == "":
		case f == "all":
			for k := range features {
				on[k] = true
			}
		case features[f] == "":
			panic(fmt.Sprintf("-world: unknown feature %q (known: %s)", f, strings.Join(sortedKeys(features), ", ")))
		default:
			on[f] = true
		}
	}
	if *flagCopies {
		on["copies"] = true
	}
	return on
}

// genLibrary: two or three callers of the engine as a library, without an
// owner (ClaimRequest.Owner ""), on one key of their own.
func (w *world) genLibrary() {
	sum := sha256.Sum256([]byte(fmt.Sprintf("lib-%s-%d-%s", w.be.name, w.seed, w.nonce)))
	key := hex.EncodeToString(sum[:]) // a business key like K: the sweeper may list it
	w.libKeys = append(w.libKeys, key)
	w.names = strings.NewReplacer(append(w.pairs, key, "lib")...)
	w.parent[key] = key
	w.model.scripts[key] = pickScript(w.rng.IntN(10))
	for i := range 2 + w.rng.IntN(2) {
		w.addActor(&actor{name: fmt.Sprintf("lib%d", i), kind: kindLib, startAt: time.Duration(w.rng.IntN(3)) * w.grace,
			run: func(a *actor) { w.runLibrary(a, key, -1) }})
	}
}

// runLibrary is one library call: Do with an empty owner and try (-1:
// unknown), its function one model call.
func (w *world) runLibrary(a *actor, key string, try int) {
	st := &storeW{a: a, s: w.be.store}
	opts := []idempotency.Option{idempotency.WithLease(w.lease), idempotency.WithMaxAttempts(maxAttempts),
		idempotency.WithLogger(w.log), idempotency.WithFastTimeout(5 * time.Second), idempotency.WithFastBackoff(0)}
	opts = append(opts, w.clockOptions()...)
	if w.be.fast != nil {
		opts = append(opts, idempotency.WithFastLayer(&fastW{a: a, f: w.be.fast}))
	}
	a.engine = idempotency.New(st, opts...)
	m := &modelW{a: a, m: w.model}
	out, err := a.engine.Do(context.Background(), idempotency.ClaimRequest{Key: key, PayloadHash: "lib", Owner: "", Try: try},
		func(ctx context.Context, l *idempotency.Lease) (string, error) {
			resp, err := m.Complete(ctx, llm.Request{Key: key, Prompt: "library " + key})
			return "lib:" + resp.Text, err
		})
	w.tracef("%s answered %s %s %v", a.name, out.Status, out.Decision, err)
}

// runPurge is the daily purge timer.
func (w *world) runPurge(a *actor) {
	rep, err := w.pipeline(a).Purge(context.Background(), handler.PurgeOptions{Limit: 1 + w.rng.IntN(3)})
	w.tracef("%s: purged %d records (%v)", a.name, rep.Records, err)
}

// expire deletes the objects older than the object expiry, as the bucket's
// lifecycle rule does.
func (w *world) expire() {
	if w.objectTTL <= 0 {
		return
	}
	for _, key := range sortedKeys(w.objects.at) {
		if w.now-w.objects.at[key] < w.objectTTL {
			continue
		}
		p := filepath.Join(w.resultsDir, filepath.FromSlash(key))
		for _, f := range []string{p, p + ".meta.json"} {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				w.t.Fatalf("seed %d: expire %s: %v", w.seed, key, err)
			}
		}
		w.tracef("object %s expired", w.objName(key))
		w.objects.forget(key)
	}
}

func (w *world) objName(key string) string { return w.names.Replace(key) }

var markRE = regexp.MustCompile(`\[([0-9a-f]{8})\]`)

// checkAnswerPayload: a success answered to a delivery (or a replay) of a
// spec carries a result made for that spec's payload: the output object's
// text names the prompt it was made from, which holds the spec's token.
func (w *world) checkAnswerPayload(a *actor, o handler.Outcome) {
	var want []*keySpec
	switch {
	case a.kind == kindTry:
		want = []*keySpec{a.d.spec}
	case a.kind == kindReplayDLQ:
		for _, s := range w.specs {
			if a.expect[s.k.Key] == s.k.PayloadHash {
				want = append(want, s)
			}
		}
	}
	if len(want) == 0 {
		return
	}
	outKey := strings.TrimPrefix(o.ResultRef, w.results.Ref("")+"/")
	body, _, err := w.results.Get(context.Background(), outKey)
	if err != nil {
		return // expired: the end checks see the record
	}
	var out handler.Output
	_ = json.Unmarshal(body, &out)
	m := markRE.FindStringSubmatch(out.Text)
	if m == nil {
		return
	}
	prompt := w.model.prompts[m[1]]
	for _, s := range want {
		if s.k.Key == o.IdempotencyKey && strings.Contains(prompt, s.token) {
			return
		}
	}
	w.violate("%s: answered %s with a result made for another payload (prompt %q)", a.name, o.IdempotencyKey,
		w.names.Replace(prompt))
}

// checkAcked: every delivery FC was answered HTTP 200 for (it stops there)
// has its work done — the key SUCCEEDED, or FAILED_FINAL after the task ran,
// its input kept for a replay by key — or held in the dead-letter queue by
// another delivery of the same payload.
func (w *world) checkAcked() {
	if !w.feat["acked"] {
		return
	}
	for _, d := range w.deliveries {
		if !d.acked || w.inDLQ(d.spec) {
			continue
		}
		k := d.spec.k.Key
		rec, err := w.be.store.Get(context.Background(), k)
		inputKey, _ := ossresult.InputKey(k)
		_, _, ierr := w.results.Get(context.Background(), inputKey)
		switch {
		case errors.Is(err, driver.ErrNotFound):
			if w.lives[k] == 0 { // never claimed (a purged tombstone's key has had a life)
				w.violate("%s was acknowledged (HTTP 200) and %s has no record and no dead letter", d.reqID, k)
			}
		case err != nil:
			w.t.Fatalf("seed %d: get %s: %v", w.seed, k, err)
		case rec.Status == driver.StatusFailedFinal && (rec.LastErrorCode == "input_missing" || ierr != nil) &&
			!(w.objects.gone[inputKey] && w.objects.goneIn[inputKey] == w.lives[k]):
			// An input.json the bucket's lifecycle expired before the
			// sweeper re-drove it is the documented limit (docs/design.md
			// §14 item 5: OBJECT_EXPIRE_DAYS bounds a sweeper outage); the world
			// expires objects within hours of their write to reach it.
			// Only an input of the key's current life counts: one of an
			// earlier life says nothing of this one's.
			w.violate("%s was acknowledged (HTTP 200), %s ended FAILED_FINAL %s without a dead letter", d.reqID, k,
				rec.LastErrorCode)
		}
	}
}

// inDLQ: a dead letter carries s's payload.
func (w *world) inDLQ(s *keySpec) bool {
	for _, d := range w.deliveries {
		if d.dlq && d.spec.k.Key == s.k.Key && d.spec.k.PayloadHash == s.k.PayloadHash {
			return true
		}
	}
	return false
}

// checkNotifyAsked: a key whose stored input does not ask for notify is
// never notified, nor one that did not succeed.
func (w *world) checkNotifyAsked(rec driver.Record) {
	if len(w.posts[rec.Key]) == 0 {
		return
	}
	if rec.Status != driver.StatusSucceeded {
		w.violate("%s ended %s and was notified %d times", rec.Key, rec.Status, len(w.posts[rec.Key]))
		return
	}
	if asks, read := w.storedNotify(rec.Key); read && !asks {
		w.violate("%s: its stored input does not ask for notify, and it was notified %d times (by %s)", rec.Key,
			len(w.posts[rec.Key]), w.posts[rec.Key][0].a.name)
	}
}

// checkLibrary: a library key ends terminal, with no more model calls than
// attempts.
func (w *world) checkLibrary() {
	for _, k := range w.libKeys {
		rec, err := w.be.store.Get(context.Background(), k)
		if errors.Is(err, driver.ErrNotFound) {
			continue
		}
		if err != nil {
			w.t.Fatalf("seed %d: get %s: %v", w.seed, k, err)
		}
		if calls := w.model.calls[k] - w.model.base[k]; calls > rec.Attempt {
			w.violate("%s: %d model calls for %d recorded attempts", k, calls, rec.Attempt)
		}
	}
}

// records reads every record of the world's keys.
func (w *world) records() map[string]driver.Record {
	out := map[string]driver.Record{}
	for _, k := range append(sortedKeys(w.parent), w.libKeys...) {
		rec, err := w.be.store.Get(context.Background(), k)
		switch {
		case err == nil:
			out[k] = rec
		case !errors.Is(err, driver.ErrNotFound):
			w.t.Fatalf("seed %d: get %s: %v", w.seed, k, err)
		}
	}
	return out
}

// checkOwnLeaseAcked: a delivery is never acknowledged "in progress" on its
// own request's live lease (a copy of its try, or a retry without a later
// retry count): that lease's try may be dead, and it answers retry_later
// (docs/design.md §14, item 5). The lease is the one its claim was answered
// with (by the store or Redis), not the one the store holds by now.
func (w *world) checkOwnLeaseAcked(a *actor, key string) {
	if owner, ok := w.stored.claimOwner[a]; ok && owner == a.d.reqID {
		w.violate("%s: acknowledged (HTTP 200) in progress on its own request's live lease of %s", a.name, key)
	}
}

// checkOwnFinishAcked: a try without a known later try (go1, no retry
// count) that held no lease is never acknowledged beside its own request's
// pending finish when the stored input asks for a notification: that
// finish's holder may be a dead try of the request, and FC's retry — this
// delivery — is what takes it over before the sweeper (docs/design.md, the
// Finish bullet). Acknowledged, the POST waits for a sweep.
func (w *world) checkOwnFinishAcked(a *actor, key string) {
	if a.held {
		return
	}
	rec, err := w.be.store.Get(context.Background(), key)
	if err != nil || rec.Status != driver.StatusSucceeded || rec.Finish != driver.FinishPending || rec.LeaseOwner != a.d.reqID {
		return
	}
	if asks, _ := w.storedNotify(key); !asks {
		return
	}
	w.violate("%s: acknowledged (HTTP 200) beside its own request's pending finish of %s, which notifies (try %d)", a.name, key,
		rec.LeaseTry)
}

// storedNotify: whether key's stored input asks for a notification, and
// whether it could be read at all.
func (w *world) storedNotify(key string) (asks, read bool) {
	inputKey, _ := ossresult.InputKey(key)
	in, _, err := w.results.Get(context.Background(), inputKey)
	if err != nil {
		return false, false
	}
	var doc struct {
		Notify *struct{ URL string } `json:"notify"`
	}
	_ = json.Unmarshal(in, &doc)
	return doc.Notify != nil, true
}

// claimAnswered notes the lease owner a's claim was last answered with.
func (w *world) claimAnswered(a *actor, owner string) {
	if w.stored.claimOwner == nil {
		w.stored.claimOwner = map[*actor]string{}
	}
	w.stored.claimOwner[a] = owner
}

// finishFailed: key's finish failed FINAL, as the store holds it now.
func (w *world) finishFailed(key string) bool {
	rec, err := w.be.store.Get(context.Background(), key)
	return err == nil && rec.FailedFinish()
}

// checkFinishFailedAcked: a finish that failed FINAL reaches the dead-letter
// queue: no delivery of its key that began after the failure was recorded,
// or was answered by Redis after it, is acknowledged (docs/design.md §14).
// One that began before may have read the record before it and been
// answered from the finish another holder held.
func (w *world) checkFinishFailedAcked(a *actor, key string) {
	rec, err := w.be.store.Get(context.Background(), key)
	if err == nil && rec.Status == driver.StatusSucceeded && rec.Finish == driver.FinishFailed {
		w.violate("%s: acknowledged (HTTP 200) a delivery of %s, whose finish failed FINAL (%s)", a.name, key, rec.LastErrorCode)
	}
}
