package explore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handler"
)

// Enumeration: windows that random sampling rarely reaches, explored
// exhaustively in a small world — one key, two or three actors, no faults —
// where every order of the actors' outside calls (each one's point before
// the call) is run once.

var (
	flagEnum      = flag.String("enum", defaultEnum+","+livesEnum, "scenarios TestEnumerate runs, comma-separated, or all")
	flagEnumDepth = flag.Int("enum-depth", 0, "decisions per run of TestEnumerate (orders past it run in a fixed order; default 10, or 6 without -seeds)")
)

// defaultEnum: the scenarios TestEnumerate runs by default (all of them:
// every finding is fixed).
const defaultEnum = "late-publish-over-reset,stale-step,double-submit-notify,copies-without-retry-count,claim-reported-failed," +
	"slow-finish-holder,slow-sweeper-finish,slow-publish-copy-retry,copy-retry-takes-finish,copy-mark-after-takeover,copy-mark-after-failure,copy-mark-across-owners,sweeper-holds-late," + // clock_test.go
	"copy-retry-waits,copy-then-finish,replaced-finish-holder,ownerless-tries,copy-retry-finish-takeover," + // windows_test.go
	"replayed-finish-redis," + // stored_test.go
	"input-horizon-store-clock" // getnow_test.go

// scenario is one small world: setup brings the key to the state the
// window opens from (run to its end, in order); actors then race.
type scenario struct {
	name   string
	about  string
	stores string // the configurations it runs on
	depth  int    // decisions enumerated per run, when fewer than enumDepth's (0: enumDepth's)
	setup  func(w *world) []*actor
	actors func(w *world) []*actor
}

var scenarios = []scenario{
	{name: "late-publish-over-reset", stores: "bolt+redis",
		about: "a duplicate reads a FAILED_FINAL record while its Redis entry has expired; a replay resets the key meanwhile; the duplicate's publish comes late",
		setup: func(w *world) []*actor {
			s := w.spec(scriptFinal, false)
			d := w.newDelivery(s, "fc-first")
			return []*actor{w.tryActor(d, 0), w.clockActor(dedupTTL + time.Second)}
		},
		actors: func(w *world) []*actor {
			s := w.specs[0]
			return []*actor{w.tryActor(w.newDelivery(s, "fc-dup"), 0), w.replayActor(s)}
		}},
	{name: "stale-step", stores: "bolt",
		about: "a worker stops after its checkpointed step; its lease runs out and another delivery takes the key over",
		setup: func(w *world) []*actor { return nil },
		actors: func(w *world) []*actor {
			s := w.spec(scriptOK, false)
			s.taskType = "keywords"
			s.input = specInput(s.taskType, "the enumerated document "+s.token)
			w.derive(w.tenant)
			clock := w.clockActor(w.lease + time.Second)
			b := w.tryActor(w.newDelivery(s, "fc-b"), 0)
			b.after = clock // FC delivers it after the jump (an earlier one is another scenario's order)
			return []*actor{w.tryActor(w.newDelivery(s, "fc-a"), 0), clock, b}
		}},
	{name: "double-submit-notify", stores: "bolt",
		about: "a delivery asking for notify saves its input and stops; a double submit without notify takes the key over",
		setup: func(w *world) []*actor { return nil },
		actors: func(w *world) []*actor {
			s := w.spec(scriptOK, true)
			clock := w.clockActor(w.lease + time.Second)
			d := w.newDelivery(s, "fc-b")
			d.body = s.bodies[1] // the same action, without notify
			b := w.tryActor(d, 0)
			b.after = clock
			return []*actor{w.tryActor(w.newDelivery(s, "fc-a"), 0), clock, b}
		}},
	{name: "slow-finish-holder", stores: "bolt",
		about: "the completing try's finish outlasts its lease and the sweeper's grace; the sweeper takes the finish over",
		setup: func(w *world) []*actor { return nil },
		actors: func(w *world) []*actor {
			s := w.spec(scriptOK, true)
			clock := w.clockActor(w.lease + w.grace + time.Second)
			sweep := w.sweepActor()
			sweep.after = clock // before the jump it lists nothing
			return []*actor{w.tryActor(w.newDelivery(s, "fc-slow"), 0), clock, sweep}
		}},
	{name: "copies-without-retry-count", stores: "bolt",
		about: "three copies of one request without x-fc-retry-count (RetryCount -1)",
		setup: func(w *world) []*actor { return nil },
		actors: func(w *world) []*actor {
			s := w.spec(scriptOK, false)
			var as []*actor
			for range 3 {
				d := w.newDelivery(s, "fc-copy")
				d.norc = true
				as = append(as, w.tryActor(d, 0))
			}
			return as
		}},
}

// TestEnumerate runs every order of each scenario's actors' outside calls.
func TestEnumerate(t *testing.T) {
	t.Parallel() // beside TestExplore
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	nonce := hex.EncodeToString(b)
	on := map[string]bool{}
	for _, n := range strings.Split(*flagEnum, ",") {
		on[n] = true
	}
	for _, sc := range scenarios {
		if !on[sc.name] && !on["all"] || *flagStop && stopped.Load() {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			for _, name := range strings.Split(sc.stores, ",") {
				if !strings.Contains(","+*flagStores+",", ","+name+",") {
					continue
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel() // beside TestExplore's configurations
					be := newBackend(t, name)
					start := time.Now()
					runs := enumerate(t, be, sc, nonce)
					t.Logf("%s on %s: %d orders in %s", sc.name, name, runs, time.Since(start).Round(time.Millisecond))
				})
			}
		})
	}
}

// chooser replays a prefix of choices, then takes the first option, and
// records how many options each decision had.
type chooser struct {
	prefix, taken, options []int
}

func (c *chooser) choose(n int) int {
	i := len(c.taken)
	v := 0
	if i < len(c.prefix) {
		v = c.prefix[i]
	}
	c.taken, c.options = append(c.taken, v), append(c.options, n)
	return v
}

// next is the prefix of the next order (depth first), or false after the last.
func (c *chooser) next() ([]int, bool) {
	for i := len(c.taken) - 1; i >= 0; i-- {
		if c.taken[i]+1 < c.options[i] {
			return append(append([]int(nil), c.taken[:i]...), c.taken[i]+1), true
		}
	}
	return nil, false
}

// enumerate runs every order; it stops at the first that breaks an
// invariant (with -stop) and returns the number of runs.
func enumerate(t *testing.T, be *backend, sc scenario, nonce string) int {
	var prefix []int
	for runs := 1; ; runs++ {
		if *flagStop && stopped.Load() {
			t.Logf("%s on %s: stopped after %d orders: a violation was found", sc.name, be.name, runs-1)
			return runs - 1
		}
		c := &chooser{prefix: prefix}
		w := runOrder(t, be, sc, nonce, c, runs)
		if len(w.violations) > 0 {
			t.Logf("order %v of %s on %s, trace:\n%s", c.taken, sc.name, be.name, strings.Join(w.trace, "\n"))
			t.Errorf("seed %d on %s: %d violations:\n  %s\nscenario %s, order %v (go test ./handler/explore -run 'TestEnumerate/%s')",
				runs, "enum:"+sc.name+"/"+be.name, len(w.violations), strings.Join(w.violations, "\n  "), sc.name, c.taken, sc.name)
			stopped.Store(true)
			return runs
		}
		var ok bool
		if prefix, ok = c.next(); !ok {
			return runs
		}
	}
}

// runOrder runs one order of sc.
func runOrder(t *testing.T, be *backend, sc scenario, nonce string, c *chooser, run int) *world {
	be.fresh(t)
	w := newBareWorld(t, 1, be, nonce)
	w.draining, w.fcTries, w.sweepLimit = true, 3, 5 // no faults, no timer of its own: the scenario's actors are the world
	w.tenant = fmt.Sprintf("t-%s-%s-e%s", nonce, be.name, sc.name)
	for _, a := range sc.setup(w) {
		w.runToEnd(a)
	}
	w.tracef("setup done")
	actors := sc.actors(w)
	maxDepth := enumDepth()
	if sc.depth > 0 {
		maxDepth = min(maxDepth, sc.depth)
	}
	for depth := 0; ; {
		var runnable []*actor
		for _, a := range actors {
			if a.state != ended && (a.after == nil || a.after.state == ended) {
				runnable = append(runnable, a)
			}
		}
		if len(runnable) == 0 {
			break
		}
		i := 0
		if len(runnable) > 1 && depth < maxDepth {
			i = c.choose(len(runnable))
			depth++
		}
		for j, b := range runnable { // the others wait at their points: stopped there, to the checks
			b.stopped = j != i && b.state == atYield
		}
		w.stepToNextCall(runnable[i])
	}
	w.drain()
	w.final()
	w.checkEnd()
	return w
}

// enumDepth: a plain `go test ./...` (no -seeds) runs a shallower
// enumeration than CI's explorer step.
func enumDepth() int {
	switch {
	case *flagEnumDepth > 0:
		return *flagEnumDepth
	case *flagSeeds == 0:
		return 6
	}
	return 10
}

// stepToNextCall runs a up to the point before its next outside call (or its
// end): the points after a call are not decisions.
func (w *world) stepToNextCall(a *actor) {
	if a.state == pending {
		w.start(a)
	} else {
		w.resume(a, a.instr())
	}
	for a.state == atYield && !decision(a.point) {
		w.resume(a, a.instr())
	}
}

// instr: the scenario's fault at its point, else proceed.
func (a *actor) instr() instr {
	if a.failAt != "" && a.point == a.failAt && a.fail {
		a.failAt = ""
		return fail
	}
	return proceed
}

// decision: the orders enumerated are those of the store and Redis calls
// and the clock's moves (object and model calls in between are not).
func decision(point string) bool {
	c := failClass(point)
	return !strings.HasSuffix(point, " done") && (c == "store" || c == "redis" || c == "clock" || c == "notify")
}

func (w *world) runToEnd(a *actor) {
	for a.state != ended {
		w.stepToNextCall(a)
	}
}

// spec adds the scenario's key.
func (w *world) spec(sc script, notify bool) *keySpec {
	s := &keySpec{name: "k0", taskType: "summarize", notify: notify, script: sc, token: token(0)}
	s.input = specInput(s.taskType, "the enumerated document "+s.token)
	w.specs = append(w.specs, s)
	w.derive(w.tenant)
	return s
}

func (w *world) newDelivery(s *keySpec, reqID string) *delivery {
	d := &delivery{spec: s, reqID: reqID, body: s.bodies[0]}
	w.deliveries = append(w.deliveries, d)
	return d
}

func (w *world) tryActor(d *delivery, try int) *actor {
	return w.addActor(&actor{name: fmt.Sprintf("%s/try%d", d.reqID, try), kind: kindTry, d: d, try: try, startAt: w.now,
		run: func(a *actor) { w.runTry(a) }})
}

func (w *world) replayActor(s *keySpec) *actor {
	d := &delivery{spec: s, reqID: "fc-dead", body: s.bodies[0]}
	return w.addActor(&actor{name: "replay-dlq", kind: kindReplayDLQ, startAt: w.now,
		expect: map[string]string{s.k.Key: s.k.PayloadHash},
		run:    func(a *actor) { w.runReplayDLQ(a, failureDestination(d, 1)) }})
}

func (w *world) sweepActor() *actor {
	return w.addActor(&actor{name: "sweep", kind: kindSweep, startAt: w.now, run: func(a *actor) {
		rep, err := w.pipeline(a).Sweep(context.Background(), handler.Meta{RequestID: "timer-sweep", RetryCount: -1},
			handler.SweepOptions{Limit: 5, Grace: w.grace})
		if err != nil {
			w.tracef("sweep: %v", err)
		}
		for _, o := range rep.Results {
			w.noteOutcome(a, o)
		}
	}})
}

// clockActor moves the clock by d, as one of the racing actors: where it
// falls among the others' calls is enumerated too.
func (w *world) clockActor(d time.Duration) *actor {
	return w.addActor(&actor{name: "clock", kind: kindClock, startAt: w.now, run: func(a *actor) {
		a.yield("clock +"+d.String(), false)
		w.advance(d)
	}})
}
