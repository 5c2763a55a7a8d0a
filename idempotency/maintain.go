package idempotency

import (
	"errors"
	"time"
)

// Replay is one audited operator re-drive (table idempotency_replay).
type Replay struct {
	Key         string    `json:"key"`
	Reason      string    `json:"reason"`
	Operator    string    `json:"operator"`
	PriorStatus Status    `json:"prior_status"`
	Source      string    `json:"source"` // "key" or "dlq"
	CreatedAt   time.Time `json:"created_at"`
}

// StatRow is one per-minute counter kept by the function (table
// idempotency_stats): name is a decision, "fast_reject" or "store_conflict".
type StatRow struct {
	Minute time.Time `json:"minute"`
	Name   string    `json:"name"`
	Count  int64     `json:"count"`
}

// ErrNotReplayable: the record is RUNNING under a live lease; replaying it
// would race the worker that holds it.
var ErrNotReplayable = errors.New("idempotency: record is running under a live lease")

// Resettable reports whether an operator replay may reset a record in this
// state to RECEIVED: failed records and abandoned (expired) claims. A
// SUCCEEDED record stays as it is — a replay answers its result.
func Resettable(r Record, now time.Time) (bool, error) {
	switch r.Status {
	case StatusSucceeded:
		return false, nil
	case StatusRunning:
		if now.Before(r.LeaseUntil) {
			return false, ErrNotReplayable
		}
	}
	return true, nil
}
