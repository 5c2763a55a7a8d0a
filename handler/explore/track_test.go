package explore_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
)

// What the world tracks to check its invariants at the moment they could
// break: who holds each key's lease and finish, every effect (object
// written, notification posted) and by whom.

// holder is the actor that holds a key's lease (or its finish) by the
// world's account, until when, at which fence.
type holder struct {
	a     *actor
	fence int64
	until time.Duration
}

// live: the holder may still write under its lease: its process runs (or is
// stopped, and wakes up), FC has not given up on it, and its lease has not
// run out. Nobody else may be granted the key then.
func (h *holder) live(now time.Duration) bool {
	return h != nil && h.a.state != ended && !h.a.dead.Load() && !h.a.timedOut && now < h.until
}

// claimed: a claims key at fence; no other live holder may hold it. A
// first claim after the key's record was purged begins another life.
func (w *world) claimed(a *actor, key string, fence int64, first bool) {
	if first {
		if w.lives[key]++; w.lives[key] > 1 {
			w.tracef("%s begins life %d of %s", a.name, w.lives[key], key)
			w.model.base[key], w.resets[key], w.successes[key], w.posts[key] = w.model.calls[key], 0, nil, nil
		}
	}
	if h := w.holders[key]; h.live(w.now) && h.a != a && !w.fcRetry(a, h.a, key) {
		w.violate("%s: granted %s at fence %d while %s holds its live lease (fence %d, %s left)", a.name, key, fence,
			h.a.name, h.fence, h.until-w.now)
	}
	w.newLease(a, key, first) // windows_test.go
	a.held = true
	w.holders[key] = &holder{a: a, fence: fence, until: w.now + w.lease}
	w.leaseOwner[key] = a
}

// laterTry: a is FC's later try of h's delivery. FC sent it because it
// counts h's try as over (failed, timed out or its instance died); a copy of
// h's try that still runs cannot be told from a dead one, so a takeover
// then is the documented double run, not a stolen lease.
func laterTry(a, h *actor) bool {
	return a.kind == kindTry && h.kind == kindTry && a.d.reqID == h.d.reqID && a.try > h.try
}

// wrote notes a's successful fenced write: a terminal one ends its lease
// and, for a completion, starts its finish.
func (w *world) wrote(a *actor, op, key string, fence int64) {
	switch op {
	case "Renew":
		if h := w.holders[key]; h != nil && h.a == a {
			h.until = w.now + w.lease
		}
		if h := w.finishers[key]; h != nil && h.a == a { // Finisher.Hold's renewal
			h.until = w.now + w.lease
		}
	case "Complete":
		delete(w.holders, key)
		w.finishers[key] = &holder{a: a, fence: fence, until: w.now + w.lease}
	case "Fail":
		delete(w.holders, key)
	}
}

// claimedFinish: a takes key's pending finish; nobody else may hold it live.
func (w *world) claimedFinish(a *actor, key string) {
	if h := w.finishers[key]; h.live(w.now) && h.a != a && !laterTry(a, h.a) {
		w.violate("%s: took the finish of %s while %s holds it live (%s left)", a.name, key, h.a.name, h.until-w.now)
	}
	w.finishers[key] = &holder{a: a, until: w.now + w.lease}
	a.held = true
	if o := w.leaseOwner[key]; o == nil || !sameRequest(a, o) {
		delete(w.copyMarks, key) // the record names another owner now: its try count starts again
	}
	w.leaseOwner[key] = a
}

// finished: a recorded key's finish ended (done, or failed for good).
func (w *world) finished(a *actor, key string, done bool) {
	delete(w.finishers, key)
	if !done {
		return
	}
	for _, p := range w.posts[key] {
		if p.a == a {
			p.settled = true
		}
	}
}

// post is one notification POST that reached the receiver.
type post struct {
	a       *actor
	at      time.Duration
	settled bool   // its poster recorded the finish done, or returned with no failure after it
	spoiled bool   // the poster saw a failure after it (the POST's answer, a write): a repeat is allowed
	late    bool   // posted right after a lease check, woken from a stop at the POST itself
	body    []byte // what it posted (checkNotification)
}

// posted checks docs/design.md §13's "at most once, except across a crash or
// a failed write": a repeat of a POST whose poster recorded it done (or
// returned with nothing failed) is a violation, unless this one was made by
// a poster stopped at the POST itself after its last store call (the
// window between a lease check and the POST, which no check closes).
func (w *world) posted(a *actor, key string) *post {
	p := &post{a: a, at: w.now, late: a.wokeAt == "notify "+key && failClass(a.lastCall) == "store"}
	for _, q := range w.posts[key] {
		if q.settled && !q.spoiled && !p.late {
			w.violate("%s: notified %s again after %s's notification at %s was settled (recorded done)", a.name, key,
				q.a.name, q.at.Round(time.Second))
			break
		}
	}
	w.posts[key] = append(w.posts[key], p)
	return p
}

// settle is called when a ends: its posts are settled if it returned and
// saw no failure after them.
func (w *world) settle(a *actor) {
	for _, ps := range w.posts {
		for _, p := range ps {
			if p.a == a && !a.dead.Load() && !p.spoiled {
				p.settled = true
			}
		}
	}
}

// spoil: a saw a failure; its posts not yet settled may be repeated.
func (w *world) spoil(a *actor) {
	for _, ps := range w.posts {
		for _, p := range ps {
			if p.a == a && !p.settled {
				p.spoiled = true
			}
		}
	}
}

// objectLog is every object written, by key: an object is written once
// per key and life (create-once: a second write with other bytes is a
// violation; the same bytes again is a no-op).
type objectLog struct {
	w    *world
	sums map[string]string
	at   map[string]time.Duration // sim time of the write (object expiry)
	gone map[string]bool          // expired (feature expiry)
	// goneIn: the life of its business key an object expired in (tasks/K/…)
	goneIn map[string]int
}

func (o *objectLog) put(a *actor, key string, body []byte) {
	sum := sha256.Sum256(body)
	h := hex.EncodeToString(sum[:])
	if prev, ok := o.sums[key]; ok && prev != h {
		o.w.violate("%s: object %s written again with other bytes (%s, was %s)", a.name, o.w.objName(key), h[:8], prev[:8])
	}
	if _, ok := o.sums[key]; !ok {
		o.at[key] = o.w.now
	}
	o.sums[key] = h
}

// forget: key expired (a new life may write it again).
func (o *objectLog) forget(key string) {
	delete(o.sums, key)
	delete(o.at, key)
	o.gone[key] = true
	if parts := strings.SplitN(key, "/", 3); len(parts) == 3 {
		o.goneIn[key] = o.w.lives[parts[1]]
	}
}

// mark is the model's tag of a prompt: every answer carries it, so that an
// output names the payload it was made for.
func (m *model) mark(prompt string) string {
	sum := sha256.Sum256([]byte(prompt))
	tag := hex.EncodeToString(sum[:4])
	m.prompts[tag] = prompt
	return tag
}
