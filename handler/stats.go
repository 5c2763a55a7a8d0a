package handler

import (
	"sort"
	"strings"
	"time"

	"github.com/idemgate/idemgate/idempotency"
)

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
	FastRejects    int64     `json:"fast_rejects"`
	StoreConflicts int64     `json:"store_conflicts"`
	// DuplicateRate = (fast rejects + store conflicts) / claims.
	DuplicateRate float64 `json:"duplicate_rate"`
}

// StatsByMinute folds counter rows into minutes, oldest first.
func StatsByMinute(rows []idempotency.StatRow) []MinuteStats {
	by := map[time.Time]*MinuteStats{}
	for _, r := range rows {
		m := by[r.Minute]
		if m == nil {
			m = &MinuteStats{Minute: r.Minute}
			by[r.Minute] = m
		}
		switch r.Name {
		case strings.ToLower(string(idempotency.DecisionFirst)):
			m.First += r.Count
		case strings.ToLower(string(idempotency.DecisionRepeatSame)):
			m.RepeatSame += r.Count
		case strings.ToLower(string(idempotency.DecisionTakeover)):
			m.Takeover += r.Count
		case strings.ToLower(string(idempotency.DecisionRepeatOther)):
			m.RepeatOther += r.Count
		case strings.ToLower(string(idempotency.DecisionRepeatDone)):
			m.RepeatDone += r.Count
		case strings.ToLower(string(idempotency.DecisionPayloadMismatch)):
			m.Mismatch += r.Count
		case idempotency.StatFastReject:
			m.FastRejects += r.Count
		case idempotency.StatStoreConflict:
			m.StoreConflicts += r.Count
		}
	}
	out := make([]MinuteStats, 0, len(by))
	for _, m := range by {
		m.Claims = m.First + m.RepeatSame + m.Takeover + m.RepeatOther + m.RepeatDone + m.Mismatch
		if m.Claims > 0 {
			m.DuplicateRate = float64(m.FastRejects+m.StoreConflicts) / float64(m.Claims)
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Minute.Before(out[j].Minute) })
	return out
}
