package driver

import (
	"context"
	"fmt"
	"time"
)

// Forgetter is what an operator's forget needs of a store (idempotency's
// Engine.Forget): an audited eviction of one key, refused under a live
// lease. Stores that implement it pass idemtest.RunForget.
type Forgetter interface {
	// Forget applies ApplyForget to key's record under the store's lock,
	// deletes the key's step records, and writes the audit row (Source
	// "forget") in the same transaction; an unknown key is ErrNotFound and
	// a refused forget writes nothing.
	Forget(ctx context.Context, key string, rp Replay) (prior, after Record, err error)
}

// ApplyForget evicts what rec recorded, as every store must: the next
// delivery of the key runs again, from attempt 1, with the whole budget. The
// row stays with its key, payload hash and what the first delivery recorded
// about the action, status RECEIVED at a new fence: a fence never goes back,
// so a worker of an earlier attempt that wakes up (a frozen instance) can
// write nothing into the new life (docs/design.md §6, "Fences"). A tombstone
// is forgotten as its record would be (the caller deleted the key's objects
// first: docs/design.md §11). Refused (ErrNotReplayable): a RUNNING record or
// a pending finish, live or not — its worker may still write objects of the
// old life, so the sweeper or FC's retry settles it first — and a record that
// changed since the caller read it (rp.ExpectFence).
func ApplyForget(rec *Record, rp Replay, now time.Time) error {
	switch {
	case rp.ExpectFence != 0 && rec.Fence != rp.ExpectFence:
		return fmt.Errorf("%w: it changed while forget read it (fence %d, now %d); forget again",
			ErrNotReplayable, rp.ExpectFence, rec.Fence)
	case rec.ParentKey != "":
		return fmt.Errorf("%w: %s is a step record; forget its task %s", ErrNotReplayable, rec.Key, rec.ParentKey)
	case rec.Status == StatusRunning:
		return fmt.Errorf("%w: %s is RUNNING (lease until %s): its worker may still write; forget it once FC's retry "+
			"or the sweeper has settled it", ErrNotReplayable, rec.Key, rec.LeaseUntil.UTC().Format(time.RFC3339))
	case rec.Status == StatusSucceeded && rec.Finish == FinishPending:
		return fmt.Errorf("%w: the finish of %s is pending (lease until %s): forget it once it is done", ErrNotReplayable,
			rec.Key, rec.LeaseUntil.UTC().Format(time.RFC3339))
	}
	rec.Status, rec.Fence, rec.Attempt, rec.Tombstone = StatusReceived, rec.Fence+1, 0, false
	rec.LeaseOwner, rec.LeaseTry, rec.LeaseUntil, rec.SweepAfter, rec.RetryAfter = "", 0, time.Time{}, time.Time{}, time.Time{}
	rec.ResultRef, rec.LastErrorCode, rec.LastError, rec.Finish, rec.Steps = "", "", "", FinishNone, nil
	rec.UpdatedAt = now
	return nil
}
