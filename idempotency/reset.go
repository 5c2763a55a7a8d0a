package idempotency

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemgate/idemgate/idempotency/driver"
)

// Reset performs an operator's audited reset of key for a replay (see
// driver.ApplyReset) and returns the record before and after it. A failed
// or abandoned record goes back to RECEIVED with a new fence, so the next
// claim runs it again; a SUCCEEDED record keeps its result and only a failed
// finish is reopened; a record under a live lease, or one that changed
// since Reset read it, is refused (driver.ErrNotReplayable), and so is one
// holding another payload than rp names ([ErrPayloadMismatch]). The store
// must be a driver.Maintainer (it keeps the audit row).
//
// The fast layer gets the record it will hold, at its new fence, before the
// store does: from then on no older state can land there (a duplicate that
// read the record before the reset publishes late), and it never answers a
// final state the store no longer holds. The store then resets only the
// record Reset read, and the fast layer gets the reset record again: the
// first entry may have expired or been dropped (its write failed) while a
// late publish landed. A reset the store refused or failed drops the entry,
// which would otherwise hold a fence the store never reached, or the FINAL
// answer of a failed finish the store may have reopened (its commit's
// answer lost).
func (e *Engine) Reset(ctx context.Context, key string, rp driver.Replay) (prior, after driver.Record, err error) {
	if err := checkKey(key); err != nil {
		return prior, after, err
	}
	if err := checkAudit(rp); err != nil {
		return prior, after, err
	}
	m, ok := e.store.(driver.Maintainer)
	if !ok {
		return prior, after, fmt.Errorf("reset %s: %w: the store keeps no audit (it is not a driver.Maintainer)",
			key, driver.ErrInvalid)
	}
	changes, err := e.fenceAhead(ctx, key, &rp)
	if err != nil {
		return prior, after, err
	}
	if prior, after, err = m.Reset(ctx, key, rp); err != nil {
		if changes {
			e.forgetNow(ctx, key)
		}
		return prior, after, storeErr("reset", err)
	}
	if after.Status == driver.StatusReceived && after.Fence != prior.Fence {
		e.republish(ctx, after)
	}
	if prior.FailedFinish() && !after.FailedFinish() {
		// The fast layer and the cache may hold the failed finish, which
		// they would answer FINAL after the replay completed it.
		e.forgetNow(ctx, key)
	}
	return prior, after, nil
}

// forgetNow drops key from the cache and the fast layer, trying the fast
// layer whatever its back-off says: an entry left there would answer a state
// the store may no longer hold (a failed finish the reset reopened).
func (e *Engine) forgetNow(ctx context.Context, key string) {
	e.cache.forget(key)
	if e.fast == nil {
		return
	}
	e.fastDownUntil.Store(0)
	e.fastDo(ctx, "forget", func(c context.Context) error { return e.fast.Forget(c, key) })
}

// fenceAhead reads key and, if the reset will move its fence, mirrors the
// reset record in the fast layer first; rp then expects the fence it read.
// changes: the reset will change the record (its fence, or a failed finish).
func (e *Engine) fenceAhead(ctx context.Context, key string, rp *driver.Replay) (changes bool, err error) {
	rec, now, err := e.readNow(ctx, key) // the lease judged on the store's clock, as its Reset will
	switch {
	case errors.Is(err, driver.ErrNotFound): // nothing to fence; the audit row records the replay
		return false, nil
	case err != nil:
		return false, storeErr("reset", err)
	}
	next := rec
	kind, err := driver.ApplyReset(&next, *rp, now)
	if err != nil {
		return false, err
	}
	if kind == driver.ResetRecord {
		e.republish(ctx, next)
	}
	rp.ExpectFence = rec.Fence
	return kind != driver.ResetNothing, nil
}

// republish mirrors rec in the fast layer as the store holds it (or is about
// to) after a reset, which moves its fence on. If the fast layer cannot be
// written, the entry is dropped instead; if that fails too, it may answer
// the old state until it expires (DEDUP_TTL_SECONDS).
func (e *Engine) republish(ctx context.Context, rec driver.Record) {
	e.cache.forget(rec.Key)
	if e.fast == nil {
		return
	}
	if !e.fastDo(ctx, "republish", func(c context.Context) error { return e.fast.Publish(c, rec, 0) }) {
		e.forgetNow(ctx, rec.Key) // one more try now, whatever the back-off says
	}
}
