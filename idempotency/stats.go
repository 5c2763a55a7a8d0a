package idempotency

import "sync/atomic"

// Stats are the engine's counters since start. The duplicate rate of the
// operations guide is (FastRejects + CacheAnswers + StoreConflicts) / Claims.
type Stats struct {
	Claims         int64              `json:"claims"`
	Decisions      map[Decision]int64 `json:"decisions"`
	FastRejects    int64              `json:"fast_rejects"`    // duplicates answered by the fast layer (Redis); 0 without one
	CacheAnswers   int64              `json:"cache_answers"`   // duplicates answered by the local cache (WithLocalCache)
	StoreConflicts int64              `json:"store_conflicts"` // duplicates answered by the durable store
	FastErrors     int64              `json:"fast_errors"`     // fast-layer calls that failed or timed out
	FastSkipped    int64              `json:"fast_skipped"`    // calls skipped during the back-off window
}

// Tier is the layer that answered a claim: the observer's second argument.
type Tier string

// The tiers, from the nearest.
const (
	TierCache Tier = "cache" // the instance's local cache (WithLocalCache), with or without a fast layer
	TierFast  Tier = "fast"  // the fast layer (WithFastLayer)
	TierStore Tier = "store" // the durable store, which decides
)

type counters struct {
	decisions                                 [6]atomic.Int64
	fastRejects, cacheAnswers, storeConflicts atomic.Int64
	fastErrors, fastSkipped                   atomic.Int64
	observe                                   func(Decision, Tier)
}

var decisionOrder = [...]Decision{DecisionFirst, DecisionRepeatSame, DecisionTakeover, DecisionRepeatOther,
	DecisionRepeatDone, DecisionPayloadMismatch}

func (c *counters) count(d Decision, by Tier) {
	if c.observe != nil {
		c.observe(d, by)
	}
	for i, x := range decisionOrder {
		if x == d {
			c.decisions[i].Add(1)
		}
	}
	// A takeover or the same owner retrying is not a duplicate delivery's
	// rejection: it goes on to execute.
	if d == DecisionRepeatOther || d == DecisionRepeatDone || d == DecisionPayloadMismatch {
		switch by {
		case TierCache:
			c.cacheAnswers.Add(1)
		case TierFast:
			c.fastRejects.Add(1)
		default:
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
	s.CacheAnswers = e.stats.cacheAnswers.Load()
	s.StoreConflicts = e.stats.storeConflicts.Load()
	s.FastErrors = e.stats.fastErrors.Load()
	s.FastSkipped = e.stats.fastSkipped.Load()
	return s
}

// WithObserver calls fn for every claim decision and the tier that answered
// it, e.g. to keep per-minute counters in the store.
func WithObserver(fn func(d Decision, by Tier)) Option { return func(o *options) { o.observe = fn } }
