package driver

import (
	"fmt"
	"time"
)

// Status is the state of a record. The machine is
//
//	RECEIVED ─▶ RUNNING ─▶ SUCCEEDED
//	               │ ├───▶ FAILED_RETRYABLE ─▶ RUNNING (takeover, attempt+1)
//	               │ └───▶ FAILED_FINAL
//	               └─(lease expired / same owner retrying)─▶ RUNNING (takeover)
//
// SUCCEEDED and FAILED_FINAL are terminal.
type Status string

const (
	// StatusReceived: recorded but not leased by anyone (a replay resets to it).
	StatusReceived        Status = "RECEIVED"
	StatusRunning         Status = "RUNNING"
	StatusSucceeded       Status = "SUCCEEDED"
	StatusFailedRetryable Status = "FAILED_RETRYABLE"
	StatusFailedFinal     Status = "FAILED_FINAL"
)

// Terminal reports whether no claim can ever run the record again.
func (s Status) Terminal() bool { return s == StatusSucceeded || s == StatusFailedFinal }

// FinishState is the state of the work that follows a completion, such as
// publishing the result and notifying (see [Completion.FinishLease]).
type FinishState string

const (
	// FinishNone: nothing follows the completion (or the record is not
	// SUCCEEDED).
	FinishNone FinishState = ""
	// FinishPending: the finish is held by LeaseOwner until LeaseUntil, then
	// by whoever claims it ([Store.ClaimFinish]); the sweeper lists it.
	FinishPending FinishState = "PENDING"
	// FinishDone: the finish ran to its end.
	FinishDone FinishState = "DONE"
	// FinishFailed: the finish failed FINAL (LastErrorCode says why); an
	// operator's replay reopens it.
	FinishFailed FinishState = "FAILED"
)

// Decision says how a claim was answered. It is the "decision" of the outcome JSON.
type Decision string

const (
	// DecisionFirst: the key was new; the caller owns fence 1, attempt 1.
	DecisionFirst Decision = "FIRST"
	// DecisionRepeatSame: the same owner (e.g. the same FC request retried)
	// came back while its claim was RUNNING; it took the claim over at once.
	DecisionRepeatSame Decision = "REPEAT_SAME"
	// DecisionTakeover: the previous lease expired, or the record waited in
	// FAILED_RETRYABLE or RECEIVED; the caller took it over with a new fence.
	DecisionTakeover Decision = "TAKEOVER"
	// DecisionRepeatOther: another owner holds a live lease: in progress.
	DecisionRepeatOther Decision = "REPEAT_OTHER"
	// DecisionRepeatDone: the record is terminal; its stored outcome answers.
	DecisionRepeatDone Decision = "REPEAT_DONE"
	// DecisionPayloadMismatch: the key exists with another payload hash.
	DecisionPayloadMismatch Decision = "PAYLOAD_MISMATCH"
)

// Owned reports whether the claim gave the caller the lease.
func (d Decision) Owned() bool {
	return d == DecisionFirst || d == DecisionRepeatSame || d == DecisionTakeover
}

// Duplicate reports whether the decision answers an earlier delivery's work.
func (d Decision) Duplicate() bool { return d != DecisionFirst }

// Record is one row of idempotency_record. Key is the business key K (the
// request_id column). ParentKey and Op are set only on the per-operation
// records of earlier versions, which kept steps, publish and notify apart.
type Record struct {
	Key             string    `json:"idempotency_key"`
	TenantID        string    `json:"tenant_id"`
	TaskType        string    `json:"task_type"`
	Operation       string    `json:"operation"`
	InputVersion    string    `json:"input_version"`
	OriginRequestID string    `json:"origin_request_id"`
	EventSource     string    `json:"event_source"`
	EventID         string    `json:"event_id"`
	ParentKey       string    `json:"parent_key,omitempty"`
	Op              string    `json:"op,omitempty"`
	Status          Status    `json:"status"`
	Attempt         int       `json:"attempt"`
	Fence           int64     `json:"fence"`
	LeaseOwner      string    `json:"lease_owner"`
	LeaseTry        int       `json:"lease_try"`   // the holder's try (FC retry count; -1 unknown)
	LeaseUntil      time.Time `json:"lease_until"` // zero when no lease is held
	ResultRef       string    `json:"result_ref"`
	InputRef        string    `json:"input_ref"`
	PayloadHash     string    `json:"payload_hash"`
	LastErrorCode   string    `json:"last_error_code"`
	LastError       string    `json:"last_error"`
	TraceParent     string    `json:"traceparent,omitempty"` // the W3C trace context of the first delivery
	// MarkOwner and MarkTry are the last copy's mark (ActMarkTry,
	// CopyOfFinish: MarkOwner's tries below MarkTry met its live lease as
	// copies), kept apart from the lease so that it outlives a lease of
	// another owner in between: MarkOwner's next lease starts at MarkTry at
	// least ([TakeoverTry]). One pair: a copy of another owner replaces it.
	MarkOwner string `json:"mark_owner,omitempty"`
	MarkTry   int    `json:"mark_try,omitempty"`
	// Finish follows a SUCCEEDED record's completion; while it is PENDING,
	// LeaseOwner, LeaseTry and LeaseUntil belong to its holder.
	Finish FinishState `json:"finish,omitempty"`
	// Steps are the checkpoints of the task's completed steps, by name
	// (idempotency.Lease.Step): a resumed task skips them.
	Steps map[string]string `json:"steps,omitempty"`
	// SweepAfter: the sweeper leaves the record alone until then (zero: as
	// soon as it is due). A takeover clears it.
	SweepAfter time.Time `json:"sweep_after,omitzero"`
	// RetryAfter: a FAILED_RETRYABLE record's back-off ends then (zero:
	// none); until then only the failed request's later try may take it
	// over (see [Decide]). A takeover clears it.
	RetryAfter time.Time `json:"retry_after,omitzero"`
	// Tombstone: the purge retired the record (docs/design.md §6,
	// "Retention"): it keeps the key, payload hash, status, result_ref and
	// error code, so that a re-send is answered from it while the key's
	// objects may still exist, and nothing else (no steps, no audit rows).
	Tombstone bool      `json:"tombstone,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// FailedFinish reports whether r is a SUCCEEDED record whose finish failed
// FINAL: its result stands, but every delivery answers the finish's error
// (LastErrorCode), so that FC's retries end in the dead-letter queue. A
// SUCCEEDED record keeps an error code only then (the fast layer mirrors the
// code, not the finish state).
func (r Record) FailedFinish() bool {
	return r.Status == StatusSucceeded && (r.Finish == FinishFailed || r.LastErrorCode != "")
}

// CheckTombstone refuses a tombstone nothing may be decided on: one that is
// not a finished task record (ErrMalformedTombstone). An empty payload hash
// is no defect: a claim need not name one, and [Decide] compares it as the
// record's own did.
func CheckTombstone(r Record) error {
	if r.Tombstone && (!r.Status.Terminal() || r.ParentKey != "" || r.Finish == FinishPending) {
		// Not its payload hash: the answer may go to a request of another
		// payload (no answer names another payload's state).
		return fmt.Errorf("%w: record %s (status %q, finish %q, step record %t)", ErrMalformedTombstone,
			r.Key, r.Status, r.Finish, r.ParentKey != "")
	}
	return nil
}

// Meta is what a claim records about the action besides the key. Stores keep
// the first delivery's values; later claims do not overwrite them.
type Meta struct {
	TenantID        string
	TaskType        string
	Operation       string
	InputVersion    string
	OriginRequestID string
	EventSource     string
	EventID         string
	InputRef        string
	TraceParent     string // the delivery's W3C traceparent, version 00 (55 characters; MySQL holds no more)
}
