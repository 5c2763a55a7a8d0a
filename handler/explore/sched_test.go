package explore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idemgate/idemgate/idempotency"
)

// instr is the scheduler's answer at a yield point.
type instr int

const (
	proceed instr = iota
	fail          // the call at this point fails (before: not done; after: done, but reported failed)
	crash         // the process dies here: nothing after this point runs
)

// event is what an actor's goroutine tells the scheduler: it reached a yield
// point, or it ended.
type event struct {
	a        *actor
	point    string
	failable bool
	done     bool
}

type actorState int

const (
	pending actorState = iota // not started
	atYield                   // stopped at a yield point, may be resumed
	paused                    // stopped at a yield point and SIGSTOPped
	ended                     // returned or crashed
)

type actorKind int

const (
	kindTry actorKind = iota // one FC try of a delivery
	kindSweep
	kindReplayDLQ
	kindReplayKey
	kindLib   // a library caller of the engine
	kindPurge // the purge timer
	kindClock // moves the clock (an enumerated scenario's)
)

// actor is one process running one call.
type actor struct {
	w       *world
	id      int
	name    string
	kind    actorKind
	state   actorState
	point   string
	fail    bool // the current point accepts a failure
	dead    atomic.Bool
	in      chan instr
	run     func(p *actor)
	startAt time.Duration // sim time from which it may start
	after   *actor        // an enumerated scenario's: it starts once after ended

	// FC tries
	d        *delivery
	try      int
	started  time.Duration // sim time the try started (its deadline is started+lease)
	timedOut bool          // FC gave up on it (deadline passed): its answer is ignored
	// replays: the payload hash each replayed key's event carries
	expect map[string]string
	// keys the model refused for good in this process
	modelFinal map[string]bool
	fastOther  map[string]bool     // keys Redis answered in progress to this process
	engine     *idempotency.Engine // the process's, for its finish marks
	lastCall   string              // the point of its last outside call
	stopped    bool                // SIGSTOPped at the current point
	wokeAt     string              // the point it was last woken at, until it moves on
	failAt     string              // an enumerated scenario's fault: the call at this point fails, once
	held       bool                // the store granted it a lease: the task's, or a finish's
}

// atEnd is the end of the process after its call returned: most often it
// flushes its batched finish marks (FC's pre-stop, SIGTERM); sometimes it is
// destroyed without (the marks are lost).
func (a *actor) atEnd() {
	if a.engine != nil && (a.w.draining || a.w.rng.IntN(4) > 0) {
		_ = a.engine.Flush(context.Background())
	}
}

// yield stops the actor at point until the scheduler answers. A crash ends
// the goroutine here (runtime.Goexit: deferred calls run, but every call
// they make to the outside fails, as after kill -9).
func (a *actor) yield(point string, failable bool) instr {
	if a.dead.Load() {
		return crash
	}
	a.w.events <- event{a: a, point: point, failable: failable}
	ins := <-a.in
	if ins == crash {
		a.dead.Store(true)
		runtime.Goexit()
	}
	return ins
}

// start runs the actor's goroutine up to its first yield point or its end.
func (w *world) start(a *actor) {
	a.in, a.modelFinal, a.fastOther = make(chan instr), map[string]bool{}, map[string]bool{}
	if a.kind == kindTry {
		a.started = w.now
	}
	w.tracef("start %s", a.name)
	go func() {
		defer func() { w.events <- event{a: a, done: true} }()
		a.run(a)
		a.atEnd()
	}()
	w.await(a)
}

// resume answers the actor's current yield point and waits for the next.
func (w *world) resume(a *actor, ins instr) {
	w.tracef("%s %s: %s", a.name, a.point, [...]string{"go", "FAIL", "CRASH"}[ins])
	a.wokeAt = ""
	if a.stopped {
		a.wokeAt, a.stopped = a.point, false
	}
	if ins == crash {
		a.dead.Store(true)
	}
	a.in <- ins
	w.await(a)
}

// await waits for a's next event. Only one actor runs at a time, so the
// next event is a's; an actor blocked in real time is a harness failure.
func (w *world) await(a *actor) {
	select {
	case ev := <-w.events:
		if ev.a != a {
			panic(fmt.Sprintf("event from %s while %s runs", ev.a.name, a.name))
		}
		if ev.done {
			a.state = ended
			w.ended(a)
			return
		}
		a.state, a.point, a.fail = atYield, ev.point, ev.failable
	case <-time.After(30 * time.Second):
		panic(fmt.Sprintf("%s blocked for 30 s in real time after %q", a.name, a.point))
	}
}

// move is one possible next step of the world.
type move struct {
	weight int
	name   string
	do     func()
}

// step picks one move by weight; false when nothing can move.
func (w *world) step() bool {
	moves := w.moves()
	total := 0
	for _, m := range moves {
		total += m.weight
	}
	if total == 0 {
		return false
	}
	n := w.rng.IntN(total)
	for _, m := range moves {
		if n < m.weight {
			m.do()
			return true
		}
		n -= m.weight
	}
	panic("unreachable")
}

// moves lists what may happen next, in a deterministic order.
func (w *world) moves() []move {
	var ms []move
	for _, a := range w.actors {
		switch {
		case a.state == pending && w.now >= a.startAt:
			ms = append(ms, move{10, "start " + a.name, func() { w.start(a) }})
		case a.state == atYield:
			ms = append(ms, move{20, "resume " + a.name, func() {
				if ins, pause := w.pickInstr(a); pause {
					w.tracef("pause %s at %s", a.name, a.point)
					a.state, a.stopped = paused, true
				} else {
					w.resume(a, ins)
				}
			}})
		case a.state == paused:
			ms = append(ms, move{2, "wake " + a.name, func() { w.tracef("wake %s", a.name); a.state = atYield }})
			ms = append(ms, move{1, "kill " + a.name, func() { w.resume(a, crash) }})
		}
	}
	if w.feat["evict"] && w.be.evict != nil && len(w.specs) > 0 {
		s := w.specs[w.rng.IntN(len(w.specs))]
		ms = append(ms, move{1, "evict", func() {
			w.tracef("Redis evicts %s", s.name)
			if err := w.be.evict(s.k.Key); err != nil {
				w.t.Fatalf("seed %d: evict: %v", w.seed, err)
			}
		}})
	}
	for _, d := range []time.Duration{w.grace + time.Second, dedupTTL + time.Second, w.lease + time.Second, inputHorizon + time.Second, w.retention + time.Second} {
		if d > time.Second && w.now+d <= w.maxClock && w.canAdvance(d) {
			ms = append(ms, move{1, "advance", func() { w.advance(d) }})
		}
	}
	return ms
}

// pickInstr decides what happens at a's current point, or that the
// process is paused there.
func (w *world) pickInstr(a *actor) (instr, bool) {
	r := w.rng.Float64()
	switch {
	case r < w.pCrash:
		return crash, false
	case r < w.pCrash+w.pPause:
		return proceed, true
	case a.fail && r < w.pCrash+w.pPause+w.pFail[failClass(a.point)]:
		return fail, false
	}
	return proceed, false
}

// failClass names the kind of call a yield point belongs to.
func failClass(point string) string {
	c, _, _ := strings.Cut(point, ".")
	c, _, _ = strings.Cut(c, " ")
	return c
}

// canAdvance: FC delivers a retry within maxRetryDelay of the moment it is
// due, and a try that is still running times out at its deadline (then FC's
// retry is due); the clock may not jump past either.
func (w *world) canAdvance(d time.Duration) bool {
	to := w.now + d
	for _, a := range w.actors {
		if a.kind != kindTry || a.state == ended || a.timedOut {
			continue
		}
		due := a.startAt
		if a.state != pending {
			due = a.started + w.lease
		}
		if to > due+maxRetryDelay {
			return false
		}
	}
	return true
}

// advance moves the clock: every durable timestamp moves back by d, which
// to every store is d passing; tries past their deadline are timed out.
func (w *world) advance(d time.Duration) {
	w.tracef("advance %s", d)
	if err := w.be.warp(w, d); err != nil {
		w.t.Fatalf("seed %d: warp: %v", w.seed, err)
	}
	w.now += d
	w.shift.Store(int64(w.now)) // w.now for the processes' clocks, which goroutines of theirs read (KeepAlive)
	w.expire()
	if !w.draining && w.sweeps < maxSweeps && w.rng.IntN(2) == 0 { // the timer fired meanwhile
		w.addSweep()
	}
	for _, a := range w.actors {
		if a.kind == kindTry && a.state != pending && a.state != ended && !a.timedOut && w.now >= a.started+w.lease {
			a.timedOut = true
			w.tracef("FC: %s timed out", a.name)
			w.retryOrDLQ(a)
		}
	}
}

// run drives the world: the explored phase, then the drain.
func (w *world) run() {
	for i := 0; i < w.maxSteps && w.step(); i++ {
	}
	w.drain()
}

// drain lets everything finish without faults: paused processes wake up
// (stale workers), pending tries and replays run, the clock moves on for
// retries that are not due yet.
func (w *world) drain() {
	w.draining = true
	w.tracef("drain")
	for {
		var next *actor
		for _, a := range w.actors {
			if a.state == paused {
				a.state = atYield // a.stopped stays: it wakes up at that point
			}
			if a.state == atYield || (a.state == pending && w.now >= a.startAt) {
				next = a
				break
			}
		}
		if next != nil {
			if next.state == pending {
				w.start(next)
			} else {
				w.resume(next, proceed)
			}
			continue
		}
		wait := time.Duration(-1)
		for _, a := range w.actors {
			if a.state == pending && (wait < 0 || a.startAt-w.now < wait) {
				wait = a.startAt - w.now
			}
		}
		if wait < 0 {
			return
		}
		w.advance(wait)
	}
}

func (w *world) tracef(format string, args ...any) {
	w.trace = append(w.trace, fmt.Sprintf("%7s ", w.now.Round(time.Second))+w.names.Replace(fmt.Sprintf(format, args...)))
}

func (w *world) violate(format string, args ...any) {
	msg := w.names.Replace(fmt.Sprintf(format, args...))
	w.tracef("VIOLATION %s", msg)
	w.violations = append(w.violations, msg)
}

// newRand is the seed's random source (PCG: the same sequence on every
// platform and Go version).
func newRand(seed int64) *rand.Rand { return rand.New(rand.NewPCG(uint64(seed), 0x1de1)) }

// sortedKeys returns m's keys in order (deterministic iteration).
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
