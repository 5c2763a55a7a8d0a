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
// so a worker of the forgotten life that wakes up (a frozen instance) can
// write nothing into the new one (docs/design.md §6, "Fences"). A record
// under a live lease (a task or a finish at work) or one that changed since
// the caller read it (rp.ExpectFence) is refused (ErrNotReplayable).
func ApplyForget(rec *Record, rp Replay, now time.Time) error {
	switch {
	case rp.ExpectFence != 0 && rec.Fence != rp.ExpectFence:
		return fmt.Errorf("%w: it changed while forget read it (fence %d, now %d); forget again",
			ErrNotReplayable, rp.ExpectFence, rec.Fence)
	case rec.ParentKey != "":
		return fmt.Errorf("%w: %s is a step record; forget its task %s", ErrNotReplayable, rec.Key, rec.ParentKey)
	case rec.Status == StatusRunning && now.Before(rec.LeaseUntil):
		return fmt.Errorf("%w: %s is running under a live lease (until %s); forget it after the lease", ErrNotReplayable,
			rec.Key, rec.LeaseUntil.UTC().Format(time.RFC3339))
	case rec.Status == StatusSucceeded && rec.Finish == FinishPending && now.Before(rec.LeaseUntil):
		return fmt.Errorf("%w: the finish of %s is at work under a live lease (until %s)", ErrNotReplayable,
			rec.Key, rec.LeaseUntil.UTC().Format(time.RFC3339))
	}
	rec.Status, rec.Fence, rec.Attempt = StatusReceived, rec.Fence+1, 0
	rec.LeaseOwner, rec.LeaseTry, rec.LeaseUntil, rec.SweepAfter = "", 0, time.Time{}, time.Time{}
	rec.ResultRef, rec.LastErrorCode, rec.LastError, rec.Finish, rec.Steps = "", "", "", FinishNone, nil
	rec.UpdatedAt = now
	return nil
}
