package driver

import (
	"context"
	"time"
)

// Store is the durable arbiter: MySQL in production, an embedded file store
// for local runs. Every implementation must pass the conformance suite in
// package idemtest.
//
// Implementations must make Claim atomic (insert-if-absent, else a
// conditional takeover decided by [Decide] on the store's own clock) and guard
// Checkpoint, Complete and Fail on key, fence and status RUNNING, answering
// [ErrLeaseLost] when nothing matched.
type Store interface {
	Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error)
	// Renew extends the lease held at fence to the store's now + lease: a
	// RUNNING record's, or the pending finish of a SUCCEEDED one (its holder
	// renews it before a side effect the next holder would repeat, such as
	// a notification). ErrLeaseLost when the record is at another fence or
	// holds neither.
	Renew(ctx context.Context, key string, fence int64, lease time.Duration) error
	// Checkpoint records the record's step results (all of them: the lease
	// holder is their only writer), guarded on fence and status RUNNING.
	Checkpoint(ctx context.Context, key string, fence int64, steps map[string]string) error
	Complete(ctx context.Context, key string, fence int64, c Completion) error
	// Fail records f and ends the lease (lease_until), leaving lease_owner
	// and lease_try: a copy's mark (ActMarkTry) must outlive the failure,
	// or FC's next retry of the copy counts as the later try of whoever of
	// the request takes the key over next, and takes that live lease over.
	Fail(ctx context.Context, key string, fence int64, f Failure) error
	// ClaimFinish takes over a SUCCEEDED record's pending finish as
	// [DecideFinish] rules, on the store's clock. A takeover increments the
	// fence (the returned Record carries it, and what the task recorded:
	// OriginRequestID, Attempt, ResultRef), so that the holder it replaced
	// can no longer renew the finish, even when it has the same owner and
	// try. A claim [CopyOfFinish] names is answered REPEAT_OTHER
	// and raises lease_try past its try, leaving the fence.
	ClaimFinish(ctx context.Context, req FinishRequest) (ClaimResult, error)
	// Finish ends the pending finish held by owner (try is informational:
	// a copy may have marked lease_try past it): FinishDone (f
	// nil), FinishFailed with f's code and message (f.Final), or, for a
	// retryable f, releases it (still pending, its lease ended now, so the
	// next finisher need not wait; its UpdatedAt is now, so a finish that
	// keeps failing goes behind the sweeper's other work instead of holding
	// the head of its queue). ErrLeaseLost when another finisher holds it
	// now or it is not pending. The fence tells a holder from a later one
	// with the same owner (a copy, or go1's try 0 again): every finish
	// claim moves it, so owner and fence are the guard.
	Finish(ctx context.Context, key, owner string, try int, fence int64, f *Failure) error
	// MarkFinished records the pending finishes of keys done, in one write,
	// whoever holds them now (their work is done; see idempotency.Finisher.DoneLater).
	MarkFinished(ctx context.Context, keys []string) error
	Get(ctx context.Context, key string) (Record, error)
}

// MaxResultRef is the longest result reference (and step result) a record
// holds, in bytes, on every store. A longer one is refused FINAL
// (result_too_large) before anything is written, so a result that cannot
// be recorded never makes the work run again.
const MaxResultRef = 2048

// Completion is what Complete records.
type Completion struct {
	ResultRef string
	// FinishLease, when positive, leaves a finish pending (publishing the
	// result, notifying), held by the completing owner for this long; the
	// holder ends it with [Store.Finish]. Past the lease, a finisher claims it
	// ([Store.ClaimFinish]) and the sweeper lists it, so a finish whose holder
	// died is never lost.
	FinishLease time.Duration
	// Try is the completing holder's try: lease_try becomes the greater of
	// it and a copy's mark (ActMarkTry), which stays so that FC's retry of
	// the copy does not take the holder's live finish over.
	Try int
}

// FinishRequest asks for a SUCCEEDED record's pending finish.
type FinishRequest struct {
	Key   string
	Owner string
	Try   int // as ClaimRequest.Try
	Lease time.Duration
}

// ClaimRequest asks for the lease on Key.
type ClaimRequest struct {
	Key         string
	PayloadHash string
	// LegacyPayloadHash, when set, is another hash of the same payload (as
	// an earlier version of the key derivation computed it): a record that
	// holds it is not a mismatch.
	LegacyPayloadHash string
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
	// FinishAfter: idempotency.Engine.Do completes with a pending finish that the
	// caller ends through idempotency.Lease.Finisher (the pipeline publishes and
	// notifies after the fenced completion).
	FinishAfter bool
	// AllowSalvage: idempotency.Engine.Do calls fn on a salvage lease (see
	// idempotency.Lease.Salvage) instead of recording the budget spent; fn may then
	// only complete from work an earlier attempt saved.
	AllowSalvage bool
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
	// Salvage: the caller owns the record although its attempt budget is
	// spent (a takeover was due): it may complete from saved work, nothing
	// more (see [ActSalvage]).
	Salvage bool
}

// Failure is what Fail records.
type Failure struct {
	Final   bool // FAILED_FINAL rather than FAILED_RETRYABLE
	Code    string
	Message string
	// RetryAfter (retryable failures only): the back-off before another
	// delivery may take the record over, recorded as the store's now + it
	// (Record.RetryAfter). 0: at once.
	RetryAfter time.Duration
}

// Action is what a store must do after [Decide].
type Action int

const (
	ActNone     Action = iota // answer without writing
	ActTakeover               // status RUNNING, fence+1, attempt+1, new owner and lease
	// ActSalvage: a takeover was due but the budget is spent. The caller
	// owns the record (fence+1, new owner and lease) without a new attempt:
	// it completes from an output an earlier attempt saved (one that died
	// after saving it) or records the budget spent (ExhaustedCode).
	ActSalvage
	// ActMarkTry: a copy of the live holder's known try (same owner, try not
	// later) is answered retry_later; the lease's try becomes the copy's
	// try + 1 (nothing else changes), so FC's retry of the copy, which
	// carries that count, waits for the lease like the copy did. The mark
	// outlives the holder's Complete (Completion.Try) and a takeover by the
	// same owner ([TakeoverTry]): FC's retry of the copy may still come.
	ActMarkTry
)

// ExhaustedCode is the error code recorded when a salvage finds nothing.
const ExhaustedCode = "attempts_exhausted"

// Decide is the state machine of a claim on an existing record, shared by
// every store so that they cannot drift apart. now is the store's clock.
func Decide(rec Record, req ClaimRequest, now time.Time) (Decision, Action) {
	if !SamePayload(rec.PayloadHash, req.PayloadHash, req.LegacyPayloadHash) {
		return DecisionPayloadMismatch, ActNone
	}
	var d Decision
	switch rec.Status {
	case StatusSucceeded, StatusFailedFinal:
		return DecisionRepeatDone, ActNone
	case StatusRunning:
		switch {
		case sameOwnerRetry(rec, req.Owner, req.Try, now):
			d = DecisionRepeatSame
		case now.Before(rec.LeaseUntil) && copyOfTry(rec, req.Owner, req.Try):
			// Answered retry_later, FC retries this copy with the next
			// count: raise the lease's try past it, so that its retry is not
			// taken for the holder's own retry (which takes over at once)
			// while the holder is alive (docs/design.md §6).
			return DecisionRepeatOther, ActMarkTry
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
		if now.Before(rec.RetryAfter) && !laterTry(rec, req.Owner, req.Try) {
			// Its back-off runs: nobody retries it yet, so that copies of the
			// action (a batch, a double submit) do not spend the attempt
			// budget on one transient error. The failed request's own later
			// try has waited FC's back-off and goes on.
			return DecisionRepeatOther, ActNone
		}
		d = DecisionTakeover
	}
	if rec.Attempt >= req.MaxAttempts {
		return d, ActSalvage
	}
	return d, ActTakeover
}

// SamePayload reports whether a record holding stored was asked for the
// payload whose hash is hash (or, as an earlier version computed it,
// legacy).
func SamePayload(stored, hash, legacy string) bool {
	return stored == hash || (legacy != "" && stored == legacy)
}

// sameOwnerRetry: the holder's own later try (FC retrying its request) may
// take a lease over at once, and the holder's own expired lease is its own
// at once too. A try that is not known to be later — a copy of the same
// try, or one without a retry count (-1; the go1 runtime reads a missing
// count as 0) — waits for the lease like anyone else: it may be a copy
// running beside the holder. An empty owner is nobody's: it never matches.
func sameOwnerRetry(rec Record, owner string, try int, now time.Time) bool {
	return owner != "" && rec.LeaseOwner == owner && (laterTry(rec, owner, try) || !now.Before(rec.LeaseUntil))
}

// copyOfTry: owner is the live holder and try a known try not yet marked
// past (ActMarkTry). Callers rule a later try out first (sameOwnerRetry), so
// it holds for the lease's own try only.
func copyOfTry(rec Record, owner string, try int) bool {
	return owner != "" && rec.LeaseOwner == owner && try >= 0 && try >= rec.LeaseTry
}

// laterTry: owner is the record's holder (or last holder) and try is a
// known try after the holder's.
func laterTry(rec Record, owner string, try int) bool {
	return owner != "" && rec.LeaseOwner == owner && try >= 0 && try > rec.LeaseTry
}

// RetryLater reports whether a REPEAT_OTHER answer to owner must not be
// acknowledged (the delivery must come again later) because nobody else
// carries its work: the live lease is owner's own (a copy of its try, or a
// retry of a try that may have died: it takes over once the lease ends),
// or the record is a retryable failure waiting out its back-off. Another
// owner's live lease is that owner's delivery to finish (FC retries it if
// it dies; the sweeper re-drives it from its stored input).
func RetryLater(rec Record, owner string) bool {
	return rec.Status != StatusRunning || (owner != "" && rec.LeaseOwner == owner)
}

// DecideFinish is the state machine of [Store.ClaimFinish]: a pending finish
// is taken over when its holder's lease ran out or by the holder's own
// later try (TAKEOVER or REPEAT_SAME, then the store records the new holder
// and lease); it is in progress elsewhere while the lease runs
// (REPEAT_OTHER); REPEAT_DONE when no finish is pending.
func DecideFinish(rec Record, req FinishRequest, now time.Time) Decision {
	switch {
	case rec.Status != StatusSucceeded || rec.Finish != FinishPending:
		return DecisionRepeatDone
	case sameOwnerRetry(rec, req.Owner, req.Try, now):
		return DecisionRepeatSame
	case now.Before(rec.LeaseUntil):
		return DecisionRepeatOther
	}
	return DecisionTakeover
}

// CopyOfFinish: a finish claim that meets the holder's live finish with a
// known try equal to the lease's (a later one takes it over: DecideFinish) —
// a copy of the holder's try, or FC's retry of such a copy after the mark —
// is answered in progress and marks its try
// (lease_try = try + 1, fence unchanged), so that FC's next retry of the
// copy is not taken for the holder's own later try and does not take the
// live finish over (a second notify beside the holder's).
func CopyOfFinish(rec Record, req FinishRequest, now time.Time) bool {
	return rec.Status == StatusSucceeded && rec.Finish == FinishPending && now.Before(rec.LeaseUntil) &&
		copyOfTry(rec, req.Owner, req.Try)
}

// TakeoverTry is the lease's try after owner, at try, takes rec's lease:
// try, or — when owner held it already (its expired lease, a copy of its
// try) — the greater of try and the lease's, and — when owner's copy left
// the record's mark, whoever held the lease since (a sweeper, a double
// submit) — the greater of that and the mark, so that a copy's mark
// (ActMarkTry, CopyOfFinish) survives: FC's retry of that copy is then not
// taken for the new holder's later try, which takes a live lease over at
// once (a second run or notify beside the new holder).
func TakeoverTry(rec Record, owner string, try int) int {
	if owner == "" {
		return try
	}
	if rec.LeaseOwner == owner {
		try = max(rec.LeaseTry, try)
	}
	if rec.MarkOwner == owner {
		try = max(rec.MarkTry, try)
	}
	return try
}

// mark records that owner's try met its own live lease as a copy: the
// lease's try and the record's mark become try + 1 (the mark only rises
// for one owner; another owner's copy replaces it).
func mark(rec *Record, owner string, try int) {
	rec.LeaseTry = try + 1
	if rec.MarkOwner != owner || rec.MarkTry < try+1 {
		rec.MarkOwner, rec.MarkTry = owner, try+1
	}
}

// ApplyFinish decides a finish claim on rec ([DecideFinish]) and performs it
// in memory, as stores that hold records in Go do; it is the reference for
// the SQL of stores that cannot call it. An owned decision takes the finish
// over (new owner and lease, [TakeoverTry], fence+1); a copy's claim marks
// its try ([CopyOfFinish]). write: rec changed and must be stored. The
// caller sets res.Source.
func ApplyFinish(rec *Record, req FinishRequest, now time.Time) (res ClaimResult, write bool) {
	res = ClaimResult{Decision: DecideFinish(*rec, req, now), Record: *rec}
	if res.Decision.Owned() {
		rec.LeaseOwner, rec.LeaseTry, rec.LeaseUntil = req.Owner, TakeoverTry(*rec, req.Owner, req.Try), now.Add(req.Lease)
		rec.Fence++
		res.Record, res.LeaseLeft = *rec, req.Lease
		return res, true
	}
	if rec.Finish == FinishPending && rec.LeaseUntil.After(now) {
		res.LeaseLeft = rec.LeaseUntil.Sub(now)
	}
	if CopyOfFinish(*rec, req, now) { // the fence stays: the holder's writes still land
		mark(rec, req.Owner, req.Try)
		return res, true
	}
	return res, false
}

// Leased reports whether rec holds a lease that [Store.Renew] extends: a
// RUNNING task's, or a SUCCEEDED record's pending finish.
func Leased(rec Record) bool {
	return rec.Status == StatusRunning || rec.Status == StatusSucceeded && rec.Finish == FinishPending
}

// Apply performs act on rec in memory, as stores that hold records in Go do.
// It is the reference for the SQL of stores that cannot call it.
func Apply(rec *Record, act Action, req ClaimRequest, now time.Time) {
	switch act {
	case ActMarkTry:
		mark(rec, req.Owner, req.Try)
		rec.UpdatedAt = now
	case ActTakeover, ActSalvage:
		rec.Status = StatusRunning
		rec.Fence++
		if act == ActTakeover {
			rec.Attempt++
		}
		rec.LeaseOwner, rec.LeaseTry = req.Owner, TakeoverTry(*rec, req.Owner, req.Try)
		rec.LeaseUntil = now.Add(req.Lease)
		rec.SweepAfter, rec.RetryAfter = time.Time{}, time.Time{}
		rec.UpdatedAt = now
	}
}

// NewRecord is the record a FIRST claim inserts.
func NewRecord(req ClaimRequest, now time.Time) Record {
	m := req.Meta
	return Record{
		Key: req.Key, TenantID: m.TenantID, TaskType: m.TaskType, Operation: m.Operation,
		InputVersion: m.InputVersion, OriginRequestID: m.OriginRequestID, EventSource: m.EventSource,
		EventID: m.EventID, InputRef: m.InputRef, TraceParent: m.TraceParent,
		PayloadHash: req.PayloadHash, Status: StatusRunning, Attempt: 1, Fence: 1,
		LeaseOwner: req.Owner, LeaseTry: req.Try, LeaseUntil: now.Add(req.Lease), CreatedAt: now, UpdatedAt: now,
	}
}

// NowReader is a Store that reads a record together with its own clock's
// now, so that a caller can judge the record's instants (a lease still
// running, a record's age) on the clock that set them (idempotency's
// Engine.GetNow) rather than on its own, which may be ahead or behind.
// mysqlstore and boltstore implement it; a store that does not leaves
// those judgements to the function's clock. idemtest.Run checks that the
// now answered agrees with the record's instants.
type NowReader interface {
	GetNow(ctx context.Context, key string) (Record, time.Time, error)
}
