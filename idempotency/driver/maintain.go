package driver

import (
	"context"
	"fmt"
	"time"
)

// Maintainer is a durable store with its maintenance side: what the
// sweeper, replays, purges and `main stats` need (mysqlstore and boltstore
// implement it; idemtest.RunMaintenance checks it).
type Maintainer interface {
	Store
	StatsSink
	// Candidates lists up to limit task records (not step records) the
	// sweeper should take up, oldest change first: RUNNING past its lease;
	// FAILED_RETRYABLE and RECEIVED untouched for grace (FC's own retry goes
	// first); SUCCEEDED with a finish pending past its lease and grace.
	// Records whose SweepAfter lies ahead are left out.
	Candidates(ctx context.Context, limit int, grace time.Duration) ([]Record, error)
	// Defer sets SweepAfter to the store's now + d on rec's record, if it is
	// still as rec shows it (fence, status and UpdatedAt): the sweeper leaves
	// it alone until then without it holding the head of the queue. A
	// takeover clears it.
	Defer(ctx context.Context, rec Record, d time.Duration) error
	// Reset performs an audited operator reset ([ApplyReset]) and returns the
	// record before and after (zero Status when there was none; the audit
	// row is written then too).
	Reset(ctx context.Context, key string, rp Replay) (prior, after Record, err error)
	Replays(ctx context.Context, key string) ([]Replay, error)
	Stats(ctx context.Context, since time.Time) ([]StatRow, error)
	// Purge retires and deletes, in one bounded batch, what outlived its
	// retention: up to r.Limit task records that are [Purgeable] and
	// unchanged, like each of their step records, for r.OlderThan by the
	// store's clock are turned into their tombstones ([Retire]), their step
	// records and the audit rows of their replays as old deleted; up to
	// r.Limit tombstones unchanged for r.TombstonesOlderThan are deleted; up
	// to r.Limit audit rows as old whose key has no record; up to r.Limit
	// stats rows older than r.StatsOlderThan. A record that is not
	// purgeable, or changed within r.OlderThan, is never touched, also when
	// it changes while the purge runs; traffic and other purges may run at
	// the same time. A tombstone answers duplicates as its record did (claims
	// decide on it with [Decide]) and refuses resets ([ErrPurged]); only once
	// it is deleted is a duplicate of the key a new action (docs/design.md
	// §6, "Retention").
	Purge(ctx context.Context, r PurgeRequest) (PurgeReport, error)
}

// PurgeRequest bounds one purge batch.
type PurgeRequest struct {
	OlderThan      time.Duration // records and audit rows; must be positive
	StatsOlderThan time.Duration // stats rows; 0 keeps them
	Limit          int           // per kind of row; DefaultPurgeLimit when 0
	// TombstonesOlderThan: a tombstone goes once its record's last change
	// is this old: at least as long as the key's objects may live (their
	// expiry plus a margin), so that no re-send meets them without it.
	// DefaultTombstoneAge when 0; never less than OlderThan.
	TombstonesOlderThan time.Duration
	// DryRun: select the batch as a purge would and count it, deleting
	// nothing (main purge --dry-run). Run again, it counts the same rows.
	DryRun bool
}

// DefaultTombstoneAge is TombstonesOlderThan when unset: the objects'
// default expiry (30 days) plus two days' margin (docs/design.md §6).
const DefaultTombstoneAge = 32 * 24 * time.Hour

// DefaultPurgeLimit is the batch of one purge: small enough that its
// transaction holds its row locks for milliseconds.
const DefaultPurgeLimit = 500

// PurgeReport counts what a purge deleted.
type PurgeReport struct {
	Records int64 `json:"records"` // task records
	Steps   int64 `json:"steps"`   // their step records
	Replays int64 `json:"replays"` // audit rows
	Stats   int64 `json:"stats"`   // stats rows (one per minute and name)
	// Tombstones: tombstones deleted, their objects' lifetime over
	// (Records counts the records the batch turned into tombstones).
	Tombstones int64 `json:"tombstones"`
	// More: a batch was full, so more may be due; purge again.
	More bool `json:"more"`
}

// Add sums o into r.
func (r *PurgeReport) Add(o PurgeReport) {
	r.Records += o.Records
	r.Steps += o.Steps
	r.Replays += o.Replays
	r.Stats += o.Stats
	r.Tombstones += o.Tombstones
	r.More = o.More
}

// Check refuses a request no store should run (a zero retention would
// purge every terminal record at once) and fills in the default limit. The
// operator's floor (RETENTION_DAYS) is the configuration's.
func (r PurgeRequest) Check() (PurgeRequest, error) {
	if r.OlderThan <= 0 || r.StatsOlderThan < 0 || r.Limit < 0 {
		return r, fmt.Errorf("%w: purge: older than %s, stats older than %s, limit %d: "+
			"want a positive retention and a non-negative stats retention and limit", ErrInvalid, r.OlderThan, r.StatsOlderThan, r.Limit)
	}
	if r.Limit == 0 {
		r.Limit = DefaultPurgeLimit
	}
	if r.TombstonesOlderThan <= 0 {
		r.TombstonesOlderThan = DefaultTombstoneAge
	}
	r.TombstonesOlderThan = max(r.TombstonesOlderThan, r.OlderThan)
	return r, nil
}

// Purgeable reports whether rec is a task record a purge may retire (turn
// into a tombstone) once it is old enough: terminal, FAILED_FINAL or
// SUCCEEDED with its finish neither pending (work to do) nor failed (an
// operator must see it: docs/operations.md), and not a tombstone already.
func Purgeable(rec Record) bool {
	return rec.ParentKey == "" && !rec.Tombstone && (rec.Status == StatusFailedFinal ||
		rec.Status == StatusSucceeded && rec.Finish != FinishPending && rec.Finish != FinishFailed)
}

// Retire turns rec into its tombstone, as every store's purge must: it
// keeps the key, payload hash, status, attempt, fence, result_ref, error
// code and times (its UpdatedAt is not moved: the tombstone's age counts
// from the record's last change), and drops the rest.
func Retire(rec *Record) {
	*rec = Record{Key: rec.Key, Status: rec.Status, Attempt: rec.Attempt, Fence: rec.Fence, ResultRef: rec.ResultRef,
		PayloadHash: rec.PayloadHash, LastErrorCode: rec.LastErrorCode, Finish: rec.Finish, TaskType: rec.TaskType,
		TenantID: rec.TenantID, Operation: rec.Operation, InputVersion: rec.InputVersion, InputRef: rec.InputRef,
		Tombstone: true, CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt}
}

// Replay is one audited operator re-drive (table idempotency_replay).
type Replay struct {
	Key         string    `json:"key"`
	Reason      string    `json:"reason"`
	Operator    string    `json:"operator"`
	PriorStatus Status    `json:"prior_status"`
	Source      string    `json:"source"` // "key" or "dlq"
	CreatedAt   time.Time `json:"created_at"`
	// PayloadHash, when set, is the payload hash of the replayed event: a
	// record with another one belongs to another payload under the same key
	// and is not touched (ErrPayloadMismatch). Empty for a replay by key.
	PayloadHash string `json:"-"`
	// LegacyPayloadHash: the same payload's hash as an earlier version
	// computed it (see [ClaimRequest.LegacyPayloadHash]).
	LegacyPayloadHash string `json:"-"`
	// ExpectFence, when set, is the fence the replay read: a record that
	// moved on since is not touched (ErrNotReplayable).
	ExpectFence int64 `json:"-"`
}

// StatsSink stores per-minute counters (mysqlstore and boltstore implement it).
type StatsSink interface {
	AddStats(ctx context.Context, rows []StatRow) error
}

// StatRow is one per-minute counter kept by the function (table
// idempotency_stats): name is a decision, "fast_reject" or "store_conflict".
type StatRow struct {
	Minute time.Time `json:"minute"`
	Name   string    `json:"name"`
	Count  int64     `json:"count"`
}

// ResetKind says what a reset changed.
type ResetKind int

const (
	ResetNothing ResetKind = iota // a SUCCEEDED record whose finish did not fail
	ResetRecord                   // back to RECEIVED with a new fence
	ResetFinish                   // a SUCCEEDED record's failed finish reopened
)

// ApplyReset performs an operator's reset on rec, as every store must. A
// failed or abandoned (expired) record goes back to RECEIVED with a new
// fence: a worker or a duplicate that read it before can then never write,
// or mirror into the fast layer, its old state over the reset; its sweeper
// deferral is cleared. A SUCCEEDED record keeps its result: only a FAILED
// finish is reopened (PENDING, claimable at once). A record under a live
// lease is refused (ErrNotReplayable), and so is one of another payload
// (ErrPayloadMismatch, naming both hashes).
func ApplyReset(rec *Record, rp Replay, now time.Time) (ResetKind, error) {
	if rp.ExpectFence != 0 && rec.Fence != rp.ExpectFence {
		return ResetNothing, fmt.Errorf("%w: it changed while the replay read it (fence %d, now %d); replay again",
			ErrNotReplayable, rp.ExpectFence, rec.Fence)
	}
	if rp.PayloadHash != "" && !SamePayload(rec.PayloadHash, rp.PayloadHash, rp.LegacyPayloadHash) {
		return ResetNothing, fmt.Errorf("%w: the dead letter's payload hash is %s, the record's %s: it is another "+
			"payload under the same key, which stays as it is", ErrPayloadMismatch, rp.PayloadHash, rec.PayloadHash)
	}
	switch {
	case rec.Tombstone:
		return ResetNothing, fmt.Errorf("%w: key %s (%s, last changed %s): re-send or replay it and it is answered "+
			"from the tombstone; nothing was changed", ErrPurged, rec.Key, rec.Status, rec.UpdatedAt.UTC().Format(time.RFC3339))
	case rec.Status == StatusSucceeded && rec.Finish != FinishFailed:
		return ResetNothing, nil
	case rec.Status == StatusSucceeded:
		rec.Finish, rec.LeaseUntil, rec.LastErrorCode, rec.LastError = FinishPending, now, "", ""
		rec.UpdatedAt = now
		return ResetFinish, nil
	case rec.Status == StatusRunning && now.Before(rec.LeaseUntil):
		return ResetNothing, ErrNotReplayable
	}
	rec.Status, rec.LeaseUntil, rec.SweepAfter, rec.Finish = StatusReceived, time.Time{}, time.Time{}, FinishNone
	rec.RetryAfter = time.Time{}
	rec.Fence++
	rec.UpdatedAt = now
	return ResetRecord, nil
}
