package explore_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
)

// The processes' clock. The stores see the world's clock move through warp
// (every stored instant moves back by a jump); a process measures its own
// time on the engine's clock (idempotency.WithClock: a finish's hold, the
// deadline it sets on the notify POST, the fast layer's back-off), which is
// real time plus every jump so far. The two agree on every interval: an
// instant a process took and one the store recorded both lie a jump further
// in the past after it. (Instants the store recorded are still compared with
// the wall clock by the engine, which warp keeps right.)

// retryBackoff is the world's base retry back-off (WithRetryBackoff; the
// engine's default).
const retryBackoff = time.Second

// clock is the processes' clock: real time, moved by every jump.
func (w *world) clock() time.Time { return time.Now().Add(time.Duration(w.shift.Load())) }

// clockOptions are the engine options every process of the world gets.
func (w *world) clockOptions() []idempotency.Option {
	return []idempotency.Option{idempotency.WithClock(w.clock), idempotency.WithRetryBackoff(retryBackoff)}
}

// invocation is the context of an FC try: it ends at FC's timeout (the
// try's start plus the lease, when the world times it out), on the
// processes' clock. Its timer never fires in a seed's real time; the
// engine reads the deadline (a lease is clamped to it) and the world's
// notify receiver honours it (pastDeadline).
func (w *world) invocation(a *actor) (context.Context, context.CancelFunc) {
	return context.WithDeadline(context.Background(), time.Now().Add(a.started+w.lease))
}

// pastDeadline is the HTTP client's check of its request's context: a POST
// whose deadline has passed on the processes' clock (the clock jumped while
// the poster stood before it) is not sent.
func (w *world) pastDeadline(ctx context.Context) error {
	if dl, ok := ctx.Deadline(); ok && !w.clock().Before(dl) {
		return idempotency.Retryable("timeout", context.DeadlineExceeded)
	}
	return nil
}

// retryable is a key's retryable failure as the world saw it recorded.
type retryable struct {
	fence   int64
	attempt int
	owner   string
	try     int
	at      time.Time // on the processes' clock, before the write: no later than the store's now
}

// failedRetryable notes key's retryable failure at fence, written by a
// statement sent at at.
func (w *world) failedRetryable(key string, fence int64, at time.Time) {
	rec, err := w.be.store.Get(context.Background(), key)
	if err != nil || rec.Fence != fence || rec.Status != driver.StatusFailedRetryable {
		return
	}
	if w.retries == nil {
		w.retries = map[string]retryable{}
	}
	w.retries[key] = retryable{fence: fence, attempt: rec.Attempt, owner: rec.LeaseOwner, try: rec.LeaseTry, at: at}
}

// checkBackoff (docs/design.md §6, §14 item 3): a claim that took over a
// retryable failure (the next fence) did so past its back-off, base·2^(n-1)
// for attempt n, at most a lease — unless it is the failed request's own
// known later try. The back-off is measured on the processes' clock from
// before the failure was written to after the claim returned: never shorter
// than the store's own measure, so the check only flags a takeover the store
// should have refused.
func (w *world) checkBackoff(a *actor, req idempotency.ClaimRequest, res driver.ClaimResult) {
	f, ok := w.retries[req.Key]
	if !ok || !res.Decision.Owned() || res.Record.Fence != f.fence+1 {
		return
	}
	delete(w.retries, req.Key)
	if req.Owner != "" && req.Owner == f.owner && req.Try >= 0 && req.Try > f.try {
		return
	}
	want := retryBackoff
	for i := 1; i < f.attempt && want < w.lease; i++ {
		want *= 2
	}
	want = min(want, w.lease)
	const slack = 50 * time.Millisecond // DATETIME(3) and the two clocks of a MySQL store
	if took := w.clock().Sub(f.at); took < want-slack {
		w.violate("%s: took %s over (%s) %s after attempt %d failed retryably, inside its back-off of %s", a.name,
			req.Key, res.Decision, took.Round(time.Millisecond), f.attempt, want)
	}
}

// checkStoreNow: a now the store answered with rec (driver.NowReader) is on
// the world's store clock — the real one, read before and after the call —
// and no instant rec holds that the store stamped (its last change) lies
// after it. A now off that clock (the process's, which every jump moves
// ahead) misjudges every instant read with it: a copy's live finish lease
// ended, a delivery FC still retries past the input horizon.
func (w *world) checkStoreNow(a *actor, rec driver.Record, now, before, after time.Time) {
	const slack = 50 * time.Millisecond // DATETIME(3), and MySQL's clock beside this process's
	if now.Before(before.Add(-slack)) || now.After(after.Add(slack)) || now.Before(rec.UpdatedAt.Add(-slack)) {
		w.violate("%s: the store's GetNow of %s answered %s, not its clock (between %s and %s), or before the record's last change %s",
			a.name, rec.Key, now.Format(time.RFC3339Nano), before.Format(time.RFC3339Nano), after.Format(time.RFC3339Nano),
			rec.UpdatedAt.Format(time.RFC3339Nano))
	}
}

// checkResetBackoff (docs/design.md §6): a reset clears the back-off; a
// record a reset put back to RECEIVED keeps no retry_after.
func (w *world) checkResetBackoff(a *actor, key string) {
	rec, err := w.be.store.Get(context.Background(), key)
	if err == nil && rec.Status == driver.StatusReceived && !rec.RetryAfter.IsZero() {
		w.violate("%s: reset %s to RECEIVED@%d and its back-off (retry_after) stayed", a.name, key, rec.Fence)
	}
}

func init() {
	scenarios = append(scenarios, scenario{name: "slow-sweeper-finish", stores: "bolt",
		about: "the sweeper holds a finish whose holder died after publishing; it is slow past the finish lease and the " +
			"grace, and another sweep takes the finish over (a holder without an invocation deadline: only the hold bounds its POST)",
		setup: func(w *world) []*actor {
			s := w.spec(scriptOK, true)
			w.crashAt(w.tryActor(w.newDelivery(s, "fc-dead"), 0), "fault after_publish")
			return []*actor{w.clockActor(w.lease + w.grace + time.Second)}
		},
		actors: func(w *world) []*actor {
			first := w.sweepActor()
			clock, second := w.sweepAfter(w.lease + w.grace + time.Second)
			return []*actor{first, clock, second}
		}},
		scenario{name: "slow-publish-copy-retry", stores: "bolt",
			about: "FC delivers a try twice; the copy meets the live lease (retry_later, the mark) and FC retries it; the " +
				"holder completes and is slow past a third of its finish lease in its publish, and the copy's retry takes the " +
				"finish over (a known later try) before the holder holds it to notify",
			setup: func(w *world) []*actor {
				w.copyMarkedHolder()
				w.advance(w.lease / 2)
				return nil
			},
			actors: func(w *world) []*actor {
				holder, retry := w.copyMarkedActors()
				holder.after = retry // the holder's hold comes after the takeover (the other orders: copy-retry-takes-finish)
				return []*actor{holder, retry}
			}},
		scenario{name: "copy-retry-takes-finish", stores: "bolt",
			about: "as slow-publish-copy-retry, every order of the holder's hold and notify, the clock and the copy's retry",
			setup: func(w *world) []*actor {
				w.copyMarkedHolder()
				return nil
			},
			actors: func(w *world) []*actor {
				holder, retry := w.copyMarkedActors()
				return []*actor{holder, retry, w.clockActor(w.lease / 2)}
			}},
		scenario{name: "copy-mark-after-takeover", stores: "bolt,mysql",
			about: "FC delivers a try twice; the copy meets the live lease (retry_later, the mark) and FC retries it; the " +
				"holder stops before its Complete past its lease, a late copy of its try takes the key over as the holder's " +
				"own, and the first copy's retry races with it (the mark must outlive that takeover: driver.TakeoverTry)",
			setup: func(w *world) []*actor {
				s := w.spec(scriptOK, true)
				holder := w.tryActor(w.newDelivery(s, "fc-a"), 0)
				w.runTo(holder, "store.Complete "+s.k.Key)
				w.runToEnd(w.tryActor(w.newDelivery(s, "fc-a"), 0))
				w.advance(w.lease + time.Second)
				return nil
			},
			actors: func(w *world) []*actor {
				holder, retry := w.copyMarkedActors()
				late := w.tryActor(w.newDelivery(w.specs[0], "fc-a"), 0)
				return []*actor{holder, late, retry}
			}},
		scenario{name: "sweeper-holds-late", stores: "bolt",
			about: "the sweeper takes over a finish whose holder died after publishing and stands 3 minutes (under a third " +
				"of the lease: no renewal) before its hold, then before its POST past the finish lease and the grace; another " +
				"sweep takes the finish over (the hold bounds the POST from when the finish was taken, not from the hold)",
			setup: func(w *world) []*actor {
				s := w.spec(scriptOK, true)
				w.crashAt(w.tryActor(w.newDelivery(s, "fc-dead"), 0), "fault after_publish")
				w.advance(w.lease + w.grace + time.Second)
				sweep := w.sweepActor()
				w.runTo(sweep, "fault after_publish") // it holds the finish; its hold comes next
				w.advance(3 * time.Minute)
				w.runTo(sweep, "notify "+s.k.Key)
				return nil
			},
			actors: func(w *world) []*actor {
				first := w.actorWhere("the sweep before its POST", func(a *actor) bool { return a.kind == kindSweep && a.state == atYield })
				clock, second := w.sweepAfter(w.lease - 3*time.Minute + w.grace + 30*time.Second)
				return []*actor{first, clock, second}
			}},
		scenario{name: "copy-mark-after-failure", stores: "bolt,mysql",
			about: "FC delivers a try twice; the copy meets the live lease (retry_later, the mark) and so does FC's retry of " +
				"it (marked a try further); the holder's model call fails retryably, and FC's retry of the holder races " +
				"with the copy's second retry (the mark must outlive the failure: a store's Fail keeps lease_try)",
			setup: func(w *world) []*actor {
				s := w.spec(scriptFailFirst, false)
				holder := w.tryActor(w.newDelivery(s, "fc-a"), 0)
				w.runToPrefix(holder, "store.Fail ")
				w.runToEnd(w.tryActor(w.newDelivery(s, "fc-a"), 0))
				w.runToEnd(w.pendingTry("fc-a", 1))
				w.runToEnd(holder)
				w.advance(retryBackoff + time.Second) // past the failure's back-off
				return nil
			},
			actors: func(w *world) []*actor {
				return []*actor{w.pendingTry("fc-a", 1), w.pendingTry("fc-a", 2)}
			}},
		scenario{name: "copy-mark-across-owners", stores: "bolt,mysql",
			about: "FC delivers a try twice; the copy meets the live lease (retry_later, the mark) and so does FC's retry of " +
				"it (marked a try further); the holder stops before its Complete past FC's timeout, the sweeper takes the key " +
				"over and stops too, and FC's retry of the holder races with the copy's second retry once the sweeper's lease " +
				"ran out (the mark must outlive the sweeper's lease: it is kept apart from the lease, driver.TakeoverTry)",
			setup: func(w *world) []*actor {
				s := w.spec(scriptOK, false)
				complete := "store.Complete " + s.k.Key
				hd := w.newDelivery(s, "fc-a")
				holder := w.tryActor(hd, 0)
				w.runTo(holder, complete)
				w.runToEnd(w.tryActor(w.newDelivery(s, "fc-a"), 0))
				w.runToEnd(w.pendingTry("fc-a", 1)) // the copy's retry: the holder has not timed out yet
				w.advance(w.lease + w.grace + time.Second)
				sweep := w.sweepActor()
				w.runTo(sweep, complete)
				w.advance(w.lease + w.grace + time.Second)
				return nil
			},
			actors: func(w *world) []*actor {
				retry := w.actorWhere("FC's retry of the holder", func(a *actor) bool {
					return a.kind == kindTry && a.d == w.deliveries[0] && a.try == 1 && a.state == pending
				})
				return []*actor{retry, w.pendingTry("fc-a", 2)}
			}})
}

// sweepAfter is a clock moving by d and a second sweep ("sweep2") that
// starts once it has.
func (w *world) sweepAfter(d time.Duration) (clock, second *actor) {
	clock, second = w.clockActor(d), w.sweepActor()
	second.name, second.after = "sweep2", clock
	return clock, second
}

// pendingTry is FC's try of reqID that has not started (a retry the world
// added).
func (w *world) pendingTry(reqID string, try int) *actor {
	return w.actorWhere(fmt.Sprintf("pending try %d of %s", try, reqID), func(a *actor) bool {
		return a.kind == kindTry && a.d.reqID == reqID && a.try == try && a.state == pending
	})
}

// actorWhere is the first actor match accepts, failing the scenario (what
// names it) when there is none.
func (w *world) actorWhere(what string, match func(*actor) bool) *actor {
	for _, a := range w.actors {
		if match(a) {
			return a
		}
	}
	w.t.Fatalf("no %s", what)
	return nil
}

// copyMarkedHolder runs fc-a's try to its Complete; a copy of it (FC
// delivering the invocation twice) meets its live lease, is answered
// retry_later, and FC retries it; the try completes and stops after its
// publish.
func (w *world) copyMarkedHolder() {
	s := w.spec(scriptOK, true)
	holder := w.tryActor(w.newDelivery(s, "fc-a"), 0)
	copy0 := w.tryActor(w.newDelivery(s, "fc-a"), 0)
	w.runTo(holder, "store.Complete "+s.k.Key)
	w.runToEnd(copy0)
	w.runTo(holder, "fault after_publish")
}

// copyMarkedActors are copyMarkedHolder's holder and FC's retry of the copy.
func (w *world) copyMarkedActors() (holder, retry *actor) {
	holder = w.actorWhere("holder fc-a/try0 at its publish", func(a *actor) bool {
		return a.kind == kindTry && a.d.reqID == "fc-a" && a.try == 0 && a.state == atYield
	})
	return holder, w.pendingTry("fc-a", 1)
}

// runTo runs a until it stands at point.
func (w *world) runTo(a *actor, point string) {
	w.runUntil(a, point, func(p string) bool { return p == point })
}

// runToPrefix runs a until it stands at a point that starts with prefix.
func (w *world) runToPrefix(a *actor, prefix string) {
	w.runUntil(a, prefix, func(p string) bool { return strings.HasPrefix(p, prefix) })
}

func (w *world) runUntil(a *actor, what string, at func(point string) bool) {
	if a.state == pending {
		w.start(a)
	}
	for a.state == atYield && !at(a.point) {
		w.resume(a, proceed)
	}
	if a.state != atYield {
		w.t.Fatalf("%s ended before %s", a.name, what)
	}
}

// crashAt runs a until it reaches point, and kills it there.
func (w *world) crashAt(a *actor, point string) {
	w.start(a)
	for a.state == atYield {
		ins := proceed
		if a.point == point {
			ins = crash
		}
		w.resume(a, ins)
	}
}
