package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

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
		if err := e.republishAhead(ctx, next); err != nil {
			return false, err
		}
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

// replicaBehindCode refuses a reset or forget whose fast-layer entry a
// replica did not acknowledge.
const replicaBehindCode = "fast_layer_replica_behind"

// republishAhead is republish for the entry written before the store
// changes (a reset's or a forget's). Where the fast layer has replicas
// (driver.FastReplicated), every connected one must acknowledge it: one
// that lags would, promoted by a failover, hold the old final state and
// answer it after the reset (docs/design.md §7). Then the operation is
// refused, retryable and before the store changed: the primary's entry is
// dropped (the replica's old state is still the store's). A fast layer that
// fails otherwise is republish's case: dropped, and the operation goes on.
func (e *Engine) republishAhead(ctx context.Context, rec driver.Record) error {
	r, ok := e.fast.(driver.FastReplicated)
	if !ok {
		e.republish(ctx, rec)
		return nil
	}
	e.cache.forget(rec.Key)
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), replicaWait)
	defer cancel()
	err := r.PublishReplicated(c, rec)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, driver.ErrFastReplicaBehind):
		e.forgetNow(ctx, rec.Key)
		return Retryable(replicaBehindCode, fmt.Errorf("nothing changed; run it again once the replica caught up "+
			"(a failover to it now would answer the old state): %w", err))
	}
	e.o.log.WarnContext(ctx, "fast layer unavailable, going on with the durable store alone", "op", "republish",
		"error", err.Error())
	e.forgetNow(ctx, rec.Key)
	return nil
}

// replicaWait bounds republishAhead: the layer's own wait for its replicas
// and the round trips around it.
const replicaWait = 3 * time.Second
