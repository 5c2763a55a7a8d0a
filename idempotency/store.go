package idempotency

import (
	"context"
	"fmt"
	"time"
)

// Store is the durable arbiter: MySQL in production, an embedded file store
// for local runs. Every implementation must pass the conformance suite in
// package idemtest.
//
// Implementations must make Claim atomic (insert-if-absent, else a
// conditional takeover decided by [Decide] on the store's own clock) and guard
// Renew, Complete and Fail on key, fence and status RUNNING, answering
// [ErrLeaseLost] when nothing matched.
type Store interface {
	Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error)
	// ClaimStep claims a per-operation record (req.Meta.ParentKey, req.Meta.Op)
	// only while the parent record still carries parentFence; else ErrLeaseLost.
	ClaimStep(ctx context.Context, parentFence int64, req ClaimRequest) (ClaimResult, error)
	Renew(ctx context.Context, key string, fence int64, lease time.Duration) error
	Complete(ctx context.Context, key string, fence int64, resultRef string) error
	Fail(ctx context.Context, key string, fence int64, f Failure) error
	Get(ctx context.Context, key string) (Record, error)
}

// ClaimRequest asks for the lease on Key.
type ClaimRequest struct {
	Key         string
	PayloadHash string
	// Owner identifies the delivery (the FC request id). The same owner
	// coming back with a later Try while its claim is RUNNING (FC retrying a
	// request whose try died) takes over without waiting; a copy of the same
	// try arriving concurrently is answered in progress.
	Owner string
	// Try is the delivery's try number (FC's x-fc-retry-count, 0 first);
	// -1 when unknown, which lets any same-owner claim take over.
	Try         int
	Lease       time.Duration
	MaxAttempts int
	Meta        Meta
}

// ClaimResult is the store's answer. Record is the record after the claim.
type ClaimResult struct {
	Decision Decision
	Record   Record
	// LeaseLeft is how long the holder's lease still runs by the store's
	// clock (0 when nobody holds one); the fast layer mirrors it.
	LeaseLeft time.Duration
	// Source names the layer that answered: "redis" or the store's name.
	Source string
}

// Failure is what Fail records.
type Failure struct {
	Final   bool // FAILED_FINAL rather than FAILED_RETRYABLE
	Code    string
	Message string
}

// StepAllowed reports whether a step may be claimed under a parent record
// in this state by a lease carrying leaseFence: the fence must be current and
// the parent RUNNING (its steps) or SUCCEEDED (publish, notify after it). A
// reset or exhausted parent keeps its fence but admits no step.
func StepAllowed(fence int64, status Status, leaseFence int64) bool {
	return fence == leaseFence && (status == StatusRunning || status == StatusSucceeded)
}

// Action is what a store must do after [Decide].
type Action int

const (
	ActNone     Action = iota // answer without writing
	ActTakeover               // status RUNNING, fence+1, attempt+1, new owner and lease
	ActExhaust                // a takeover was due but the budget is spent: FAILED_FINAL
)

// ExhaustedCode is the error code recorded by ActExhaust.
const ExhaustedCode = "attempts_exhausted"

// Decide is the state machine of a claim on an existing record, shared by
// every store so that they cannot drift apart. now is the store's clock.
func Decide(rec Record, req ClaimRequest, now time.Time) (Decision, Action) {
	if rec.PayloadHash != req.PayloadHash {
		return DecisionPayloadMismatch, ActNone
	}
	var d Decision
	switch rec.Status {
	case StatusSucceeded, StatusFailedFinal:
		return DecisionRepeatDone, ActNone
	case StatusRunning:
		switch {
		case rec.LeaseOwner == req.Owner && (req.Try < 0 || req.Try > rec.LeaseTry || !now.Before(rec.LeaseUntil)):
			d = DecisionRepeatSame
		case now.Before(rec.LeaseUntil):
			return DecisionRepeatOther, ActNone
		default:
			d = DecisionTakeover
		}
	case StatusReceived:
		// A replay reset the record: it gets its attempt whatever the budget
		// (attempt numbers keep counting, so attempt objects never collide).
		return DecisionTakeover, ActTakeover
	default: // FAILED_RETRYABLE
		d = DecisionTakeover
	}
	if rec.Attempt >= req.MaxAttempts {
		return DecisionRepeatDone, ActExhaust
	}
	return d, ActTakeover
}

// Apply performs act on rec in memory, as stores that hold records in Go do.
// It is the reference for the SQL of stores that cannot call it.
func Apply(rec *Record, act Action, req ClaimRequest, now time.Time) {
	switch act {
	case ActTakeover:
		rec.Status = StatusRunning
		rec.Fence++
		rec.Attempt++
		rec.LeaseOwner, rec.LeaseTry = req.Owner, req.Try
		rec.LeaseUntil = now.Add(req.Lease)
		rec.UpdatedAt = now
	case ActExhaust:
		rec.Status = StatusFailedFinal
		rec.LastErrorCode = ExhaustedCode
		rec.LastError = fmt.Sprintf("attempt budget spent after %d attempts", rec.Attempt)
		rec.LeaseUntil = time.Time{}
		rec.UpdatedAt = now
	}
}

// NewRecord is the record a FIRST claim inserts.
func NewRecord(req ClaimRequest, now time.Time) Record {
	m := req.Meta
	return Record{
		Key: req.Key, TenantID: m.TenantID, TaskType: m.TaskType, Operation: m.Operation,
		InputVersion: m.InputVersion, OriginRequestID: m.OriginRequestID, EventSource: m.EventSource,
		EventID: m.EventID, ParentKey: m.ParentKey, Op: m.Op, InputRef: m.InputRef,
		PayloadHash: req.PayloadHash, Status: StatusRunning, Attempt: 1, Fence: 1,
		LeaseOwner: req.Owner, LeaseTry: req.Try, LeaseUntil: now.Add(req.Lease), CreatedAt: now, UpdatedAt: now,
	}
}
