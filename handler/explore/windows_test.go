package explore_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemgate/idemgate/idempotency/driver"
)

// Windows of copies and finish holders that random sampling does not reach
// at CI's seeds, enumerated (TestEnumerate) on the embedded store and MySQL,
// and the checks that see what breaks in them.

func init() { scenarios = append(scenarios, windowScenarios...) }

var windowScenarios = []scenario{
	{name: "copy-retry-waits", stores: "bolt",
		about:  "a copy of the live holder's try 0 is answered retry_later and FC retries the copy (count 1) while the holder runs",
		setup:  func(w *world) []*actor { return nil },
		actors: func(w *world) []*actor { return copyOfLiveTry(w, false, true) }},
	{name: "copy-then-finish", stores: "bolt,mysql",
		about:  "a copy of the live holder's try 0 is answered retry_later; the holder completes and notifies (the copy's retries come later)",
		setup:  func(w *world) []*actor { return nil },
		actors: func(w *world) []*actor { return copyOfLiveTry(w, true, false) }},
	// Not in defaultEnum: it finds a second notification on main. The
	// holder's Complete sets lease_try back to its own try, so FC's retry of
	// the copy (count 1) counts as the holder's later try and takes the
	// pending finish over at once (driver.DecideFinish) while the holder is
	// alive; the holder's Hold does not ask the store within the first third
	// of its finish lease, and both POST.
	{name: "copy-retry-finish-takeover", stores: "bolt",
		about:  "copy-retry-waits, the holder's event asking for notify",
		setup:  func(w *world) []*actor { return nil },
		actors: func(w *world) []*actor { return copyOfLiveTry(w, true, true) }},
	// Eight decisions reach the window (its orders on MySQL are the costly
	// part of TestEnumerate).
	{name: "replaced-finish-holder", stores: "bolt,mysql", depth: 8,
		about: "a try's finish outlasts its lease; a copy of the same request and try takes it over; the receiver refuses the first POST for good, and the replaced holder records that late",
		setup: func(w *world) []*actor { return nil },
		actors: func(w *world) []*actor {
			s := w.spec(scriptOK, true)
			w.feat["notifyfinal"], w.notes.refuses[s.k.Key] = true, true
			// Try 1 (its try 0 died before its first call): a copy of it
			// claims the finish with the same owner and try.
			h := w.tryActor(w.newDelivery(s, "fc-a"), 1)
			clock := w.clockActor(w.lease + time.Second)
			c := w.tryActor(w.newDelivery(s, "fc-a"), 1)
			c.after = clock
			return []*actor{h, clock, c}
		}},
	{name: "ownerless-tries", stores: "bolt",
		about: "two library callers without an owner on one key, with known tries 0 and 1, the first call failing retryably: an empty owner is nobody's, its try never makes it the holder's retry (nor lets it past the back-off)",
		setup: func(w *world) []*actor { return nil },
		actors: func(w *world) []*actor {
			sum := sha256.Sum256([]byte("lib-" + w.tenant))
			key := hex.EncodeToString(sum[:])
			w.libKeys, w.parent[key], w.model.scripts[key] = append(w.libKeys, key), key, scriptFailFirst
			w.names = strings.NewReplacer(append(w.pairs, key, "lib")...)
			var as []*actor
			for try := range 2 {
				as = append(as, w.addActor(&actor{name: fmt.Sprintf("lib%d", try), kind: kindLib, startAt: w.now,
					run: func(a *actor) { w.runLibrary(a, key, try) }}))
			}
			return as
		}},
}

// copyOfLiveTry: the holder fc-a/try0, a copy of its try, and, with
// retry, FC's retry of the copy racing with them (else only FC's own
// retries of the copy, in the drain).
func copyOfLiveTry(w *world, notify, retry bool) []*actor {
	s := w.spec(scriptOK, notify)
	w.notes.refuses[s.k.Key] = false
	h := w.tryActor(w.newDelivery(s, "fc-a"), 0)
	cd := w.newDelivery(s, "fc-a") // FC delivers the holder's try twice
	c := w.tryActor(cd, 0)
	if !retry {
		return []*actor{h, c}
	}
	// FC's retry of the copy, with the next count, if the copy was not
	// acknowledged (FC's own retry of it, in the drain, is then a copy of
	// this one).
	r := w.tryActor(cd, 1)
	r.after, r.run = c, func(a *actor) {
		if !cd.resolved {
			w.runTry(a)
		}
	}
	return []*actor{h, c, r}
}

// storeTry is the try a's claims carry to the store (ClaimRequest.Try), as
// runTry builds its meta.
func storeTry(a *actor) int {
	switch {
	case a.kind != kindTry:
		return -1
	case a.d.go1:
		return 0
	case a.d.norc:
		return -1
	}
	return a.try
}

// noteCopy: a claim of the live holder's owner at a known try answered in
// progress told the store that this try is a copy of the holder's
// (driver.ActMarkTry): FC's retry of it, at most one count later, is not
// the holder's own later try and must wait for the lease like the copy did
// (docs/design.md §6).
func (w *world) noteCopy(a *actor, req driver.ClaimRequest, r driver.ClaimResult) {
	h := w.holders[req.Key]
	if r.Decision != driver.DecisionRepeatOther || req.Try < 0 || h == nil || a.kind != kindTry || h.a.kind != kindTry ||
		h.a.d.reqID != req.Owner {
		return
	}
	if w.copyMarks == nil {
		w.copyMarks = map[string]int{}
	}
	if m, ok := w.copyMarks[req.Key]; !ok || req.Try+1 > m {
		w.copyMarks[req.Key] = req.Try + 1
	}
}

// ownerMark is a record's copy mark kept apart from its lease
// (driver.Record.MarkOwner, MarkTry): it outlives a lease of another owner.
type ownerMark struct {
	owner string
	try   int
}

// noteMark: the store's answer to a copy's claim shows the record's mark
// of that copy's request at the copy's next try (whether this claim set it
// or an earlier one did). The world takes it from the answer, not from its
// own account, as a copy answered below its lease's try marks nothing; it
// outlives every lease until another request's copy replaces it
// (docs/design.md §6).
func (w *world) noteMark(a *actor, req driver.ClaimRequest, r driver.ClaimResult) {
	if a.kind != kindTry || req.Try < 0 || r.Record.MarkOwner != req.Owner || r.Record.MarkTry != req.Try+1 {
		return
	}
	if w.ownerMarks == nil {
		w.ownerMarks = map[string]ownerMark{}
	}
	w.ownerMarks[req.Key] = ownerMark{owner: req.Owner, try: req.Try + 1}
}

// sameRequest: a and b are tries of one FC request (one lease owner).
func sameRequest(a, b *actor) bool {
	return a.kind == kindTry && b.kind == kindTry && a.d.reqID == b.d.reqID
}

// fcRetry: a's takeover of h's live lease is FC's later try of h's
// delivery (laterTry), and the store was not told that a's try is a copy's.
func (w *world) fcRetry(a, h *actor, key string) bool {
	m, marked := w.copyMarks[key]
	om, owned := w.ownerMarks[key]
	return laterTry(a, h) && (!marked || storeTry(a) > m) && (!owned || om.owner != a.d.reqID || storeTry(a) > om.try)
}

// checkFinishRefused: the store refuses a finish holder's record of its
// finish (done, failed, released) only when another holder took the finish
// over, or it is no longer pending (a batched mark of an earlier holder
// recorded it done): never while the world counts a as its live holder.
func (w *world) checkFinishRefused(a *actor, key string, err error) {
	if !errors.Is(err, driver.ErrLeaseLost) {
		return
	}
	if h := w.finishers[key]; h.live(w.now) && h.a == a {
		w.violate("%s: the store refused its finish of %s (lease lost) while it holds it live and nobody took it over",
			a.name, key)
	}
}

// backoff is a retryable failure's back-off as the store recorded it: from
// no earlier than sent (real time) plus d, moved back by every jump of the
// world's clock since sim.
type backoff struct {
	a      *actor
	sent   time.Time
	sim    time.Duration
	d      time.Duration
	resets int
}

// noteBackoff: a recorded f for key.
func (w *world) noteBackoff(a *actor, key string, f driver.Failure, sent time.Time) {
	if w.backoffs == nil {
		w.backoffs = map[string]*backoff{}
	}
	delete(w.backoffs, key)
	if !f.Final && f.RetryAfter > 0 {
		w.backoffs[key] = &backoff{a: a, sent: sent, sim: w.now, d: f.RetryAfter, resets: w.resets[key]}
	}
}

// backoffMargin covers MySQL's millisecond DATETIME(3).
const backoffMargin = 5 * time.Millisecond

// newLease: a was granted key's lease. A retryable failure's back-off, while
// it certainly runs on the store's clock, lets only the failed request's own
// known later try take the record over (driver.Decide): not a copy, a double
// submit, a caller without an owner or the sweeper (docs/design.md §6,
// issue 20 case 8). A replay's reset clears the back-off.
func (w *world) newLease(a *actor, key string, first bool) {
	if o := w.leaseOwner[key]; first || o == nil || !sameRequest(a, o) {
		delete(w.copyMarks, key) // another request's lease: no copy of its try yet
	} // the same request's takeover keeps a copy's mark (driver.TakeoverTry), past a Fail too: FC may still retry that copy
	if first {
		delete(w.ownerMarks, key) // a new life: a new record
	}
	b := w.backoffs[key]
	delete(w.backoffs, key)
	if b == nil || first || w.resets[key] != b.resets {
		return
	}
	passed := time.Since(b.sent) + (w.now - b.sim)
	own := a.kind == kindTry && b.a.kind == kindTry && a.d.reqID == b.a.d.reqID && storeTry(a) >= 0 &&
		storeTry(a) > storeTry(b.a)
	if passed < b.d-backoffMargin && !own {
		w.violate("%s: took %s over inside the back-off of %s's retryable failure (%s of %s passed)", a.name, key,
			b.a.name, passed.Round(time.Millisecond), b.d)
	}
}
