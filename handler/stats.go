package handler

import (
	"sort"
	"strings"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/internal/statsrec"
)

// ClaimDecisions are the decisions a claim on a task's key answers: every
// delivery that reaches the claim has exactly one of them, and the
// per-minute counters count each. A delivery refused before its claim
// (REJECTED) has none and is not a delivery of the key.
var ClaimDecisions = []idempotency.Decision{idempotency.DecisionFirst, idempotency.DecisionRepeatSame,
	idempotency.DecisionTakeover, idempotency.DecisionRepeatOther, idempotency.DecisionRepeatDone,
	idempotency.DecisionPayloadMismatch}

// DuplicateDecisions are the claim decisions of a duplicate: a delivery of a
// business key that was already claimed. That is every decision but FIRST
// (idempotency.Decision.Duplicate, the outcome's "duplicate"): REPEAT_OTHER
// and REPEAT_DONE are answered without running; REPEAT_SAME (FC's retry of
// the same request) and TAKEOVER (a retry after a failure or an expired
// lease, or the sweeper's re-drive) run the task again, but under a key that
// was claimed before; PAYLOAD_MISMATCH reuses a claimed key with another
// payload. The duplicate rate is their share of all claims — the one
// definition `main stats`, the README's query and the duplicate-rate alert
// share.
func DuplicateDecisions() []idempotency.Decision {
	var out []idempotency.Decision
	for _, d := range ClaimDecisions {
		if d.Duplicate() {
			out = append(out, d)
		}
	}
	return out
}

// MinuteStats is one minute of `main stats`.
type MinuteStats struct {
	Minute         time.Time `json:"minute"`
	Claims         int64     `json:"claims"`
	First          int64     `json:"first"`
	RepeatSame     int64     `json:"repeat_same"`
	Takeover       int64     `json:"takeover"`
	RepeatOther    int64     `json:"repeat_other"`
	RepeatDone     int64     `json:"repeat_done"`
	Mismatch       int64     `json:"payload_mismatch"`
	FastRejects    int64     `json:"fast_rejects"`    // duplicates answered by Redis without running (0 without it, or while it is out)
	CacheAnswers   int64     `json:"cache_answers"`   // duplicates answered by an instance's local cache (LOCAL_CACHE_SIZE)
	StoreConflicts int64     `json:"store_conflicts"` // duplicates answered by the store without running
	// StoreAbortsRetried are the writes the store ran again after the
	// database aborted them (deadlocks, Galera certification conflicts).
	StoreAbortsRetried int64 `json:"store_aborts_retried"`
	// Duplicates are the claims with a DuplicateDecisions decision.
	Duplicates int64 `json:"duplicates"`
	// DuplicateRate = Duplicates / Claims (0 without claims).
	DuplicateRate float64 `json:"duplicate_rate"`
}

// count adds n claims of decision d.
func (m *MinuteStats) count(d idempotency.Decision, n int64) {
	switch d {
	case idempotency.DecisionFirst:
		m.First += n
	case idempotency.DecisionRepeatSame:
		m.RepeatSame += n
	case idempotency.DecisionTakeover:
		m.Takeover += n
	case idempotency.DecisionRepeatOther:
		m.RepeatOther += n
	case idempotency.DecisionRepeatDone:
		m.RepeatDone += n
	case idempotency.DecisionPayloadMismatch:
		m.Mismatch += n
	}
	m.Claims += n
	if d.Duplicate() { // DuplicateDecisions
		m.Duplicates += n
	}
}

// StatsByMinute folds counter rows into minutes, oldest first.
func StatsByMinute(rows []driver.StatRow) []MinuteStats {
	by := map[time.Time]*MinuteStats{}
	for _, r := range rows {
		m := by[r.Minute]
		if m == nil {
			m = &MinuteStats{Minute: r.Minute}
			by[r.Minute] = m
		}
		switch r.Name {
		case statsrec.StatFastReject:
			m.FastRejects += r.Count
		case statsrec.StatCacheAnswer:
			m.CacheAnswers += r.Count
		case statsrec.StatStoreConflict:
			m.StoreConflicts += r.Count
		case statsrec.StatStoreAbortRetried:
			m.StoreAbortsRetried += r.Count
		default:
			for _, d := range ClaimDecisions {
				if r.Name == strings.ToLower(string(d)) {
					m.count(d, r.Count)
				}
			}
		}
	}
	out := make([]MinuteStats, 0, len(by))
	for _, m := range by {
		if m.Claims > 0 {
			m.DuplicateRate = float64(m.Duplicates) / float64(m.Claims)
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Minute.Before(out[j].Minute) })
	return out
}

// oldestAgeSeconds is the age of the oldest task among the sweeper's
// candidates (since its first claim), 0 without candidates: the sweep log
// line carries it so that an alert sees work left stuck for long.
func oldestAgeSeconds(cands []driver.Record) int64 {
	var oldest time.Time
	for _, r := range cands {
		if !r.CreatedAt.IsZero() && (oldest.IsZero() || r.CreatedAt.Before(oldest)) {
			oldest = r.CreatedAt
		}
	}
	if oldest.IsZero() {
		return 0
	}
	return int64(time.Since(oldest) / time.Second)
}
