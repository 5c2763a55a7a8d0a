package idempotency

import "sync/atomic"

// Stats are the engine's counters since start. The duplicate rate of the
// operations guide is (FastRejects + StoreConflicts) / Claims.
type Stats struct {
	Claims         int64              `json:"claims"`
	Decisions      map[Decision]int64 `json:"decisions"`
	FastRejects    int64              `json:"fast_rejects"`    // duplicates answered by the fast layer
	StoreConflicts int64              `json:"store_conflicts"` // duplicates answered by the durable store
	FastErrors     int64              `json:"fast_errors"`     // fast-layer calls that failed or timed out
	FastSkipped    int64              `json:"fast_skipped"`    // calls skipped during the back-off window
}

type counters struct {
	decisions                   [6]atomic.Int64
	fastRejects, storeConflicts atomic.Int64
	fastErrors, fastSkipped     atomic.Int64
	observe                     func(Decision, bool)
}

var decisionOrder = [...]Decision{DecisionFirst, DecisionRepeatSame, DecisionTakeover, DecisionRepeatOther,
	DecisionRepeatDone, DecisionPayloadMismatch}

func (c *counters) count(d Decision, fast bool) {
	if c.observe != nil {
		c.observe(d, fast)
	}
	for i, x := range decisionOrder {
		if x == d {
			c.decisions[i].Add(1)
		}
	}
	// A takeover or the same owner retrying is not a duplicate delivery's
	// rejection: it goes on to execute.
	if d == DecisionRepeatOther || d == DecisionRepeatDone || d == DecisionPayloadMismatch {
		if fast {
			c.fastRejects.Add(1)
		} else {
			c.storeConflicts.Add(1)
		}
	}
}

// Stats returns a snapshot of the counters.
func (e *Engine) Stats() Stats {
	s := Stats{Decisions: map[Decision]int64{}}
	for i, d := range decisionOrder {
		n := e.stats.decisions[i].Load()
		s.Decisions[d] = n
		s.Claims += n
	}
	s.FastRejects = e.stats.fastRejects.Load()
	s.StoreConflicts = e.stats.storeConflicts.Load()
	s.FastErrors = e.stats.fastErrors.Load()
	s.FastSkipped = e.stats.fastSkipped.Load()
	return s
}

// WithObserver calls fn for every claim decision (fast: answered by the fast
// layer), e.g. to keep per-minute counters in the store.
func WithObserver(fn func(d Decision, fast bool)) Option { return func(o *options) { o.observe = fn } }
