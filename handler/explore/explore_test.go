package explore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/ossresult"
)

var (
	flagSeed   = flag.Int64("seed", 0, "explore only this seed (with its trace)")
	flagSeeds  = flag.Int("seeds", 0, "seeds per store configuration (default 25; 5 with -short)")
	flagFirst  = flag.Int64("first", 1, "first seed")
	flagStores = flag.String("stores", "bolt,bolt+redis,mysql,mysql+redis", "store configurations to explore")
	flagTrace  = flag.Bool("trace", false, "print every seed's trace")
	flagCopies = flag.Bool("copies", false, "FC sometimes delivers a try twice (changes every seed's world)")
	flagStop   = flag.Bool("stop", false, "stop every configuration at the first violation (the mutation run)")
)

// stopped is set at the first violation when -stop is given.
var stopped atomic.Bool

// TestExplore explores seeds on every store configuration; a failing seed
// prints its trace and the command that reproduces it.
func TestExplore(t *testing.T) {
	t.Parallel() // beside TestEnumerate
	seeds := seedList()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	nonce := hex.EncodeToString(b) // keeps concurrent runs' keys apart on a shared Redis
	for _, name := range strings.Split(*flagStores, ",") {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			be := newBackend(t, name)
			start, failed := time.Now(), 0
			for _, seed := range seeds {
				if *flagStop && stopped.Load() {
					t.Logf("%s: stopped after seed %d: a violation was found", name, seed-1)
					break
				}
				t.Run(fmt.Sprint(seed), func(t *testing.T) {
					if !explore(t, be, seed, nonce) {
						failed++
						stopped.Store(true)
					}
				})
			}
			t.Logf("%s: %d seeds explored in %s, %d failed", name, len(seeds), time.Since(start).Round(time.Millisecond), failed)
		})
	}
}

func seedList() []int64 {
	if *flagSeed != 0 {
		return []int64{*flagSeed}
	}
	n := *flagSeeds
	if n == 0 {
		n = 25
		if testing.Short() {
			n = 5
		}
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = *flagFirst + int64(i)
	}
	return out
}

// explore runs one seed and reports whether every invariant held.
func explore(t *testing.T, be *backend, seed int64, nonce string) bool {
	be.fresh(t)
	w := newWorld(t, seed, be, nonce)
	w.run()
	w.final()
	w.checkEnd()
	if len(w.violations) == 0 && !*flagTrace && *flagSeed == 0 {
		return true
	}
	t.Logf("seed %d on %s, sweep limit %d, trace:\n%s", seed, be.name, w.sweepLimit, strings.Join(w.trace, "\n"))
	if len(w.violations) > 0 {
		t.Errorf("seed %d on %s: %d violations:\n  %s\nreproduce: go test ./handler/explore -run 'TestExplore/%s/%d$' -seed %d",
			seed, be.name, len(w.violations), strings.Join(w.violations, "\n  "), strings.ReplaceAll(be.name, "+", `\+`), seed, seed)
		return false
	}
	return true
}

// final runs the sweeper to a standstill: first with the timer's grace
// (nothing with its input.json may be left due: no record blocks the ones
// behind it), then past the input horizon (every key ends terminal).
func (w *world) final() {
	w.draining = true
	w.tracef("final sweeps")
	w.advance(w.lease + time.Second)
	w.sweepToStandstill("a")
	cands, err := w.be.store.Candidates(context.Background(), 1000, 0)
	if err != nil {
		w.t.Fatalf("seed %d: candidates: %v", w.seed, err)
	}
	for _, r := range cands {
		key, _ := ossresult.InputKey(r.Key)
		if _, _, err := w.results.Get(context.Background(), key); !errors.Is(err, ossresult.ErrNotFound) {
			w.violate("%s (%s) is still due after the sweeper ran to a standstill", r.Key, r.Status)
		}
	}
	w.advance(inputHorizon + time.Second)
	w.sweepToStandstill("b")
}

func (w *world) sweepToStandstill(phase string) {
	for i := range 3*len(w.specs)*maxAttempts + 5 {
		w.advance(w.grace + time.Second)
		var scanned int
		a := w.addActor(&actor{name: fmt.Sprintf("final-%s%d", phase, i), kind: kindSweep, run: func(a *actor) {
			rep, err := w.pipeline(a).Sweep(context.Background(), handler.Meta{RequestID: a.name, RetryCount: -1},
				handler.SweepOptions{Limit: w.sweepLimit, Grace: w.grace})
			if err != nil {
				w.t.Errorf("seed %d: final sweep: %v", w.seed, err)
			}
			for _, o := range rep.Results {
				w.noteOutcome(a, o)
			}
			scanned = rep.Scanned
		}})
		w.start(a)
		for a.state == atYield {
			w.resume(a, proceed)
		}
		if scanned == 0 {
			return
		}
	}
}
