package idempotency

import (
	"context"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/idempotency/driver"
)

// Forget evicts key for an operator (driver.ApplyForget): its result, error,
// steps and attempts are gone and its next delivery runs again with the
// whole budget, under a fence past every one the forgotten life used. An
// unknown key is driver.ErrNotFound; a record under a live lease, or one
// that changed while Forget read it, is refused (driver.ErrNotReplayable),
// changing nothing. The audit row says who and why (Source "forget"
// unless rp names one). The store must be a driver.Forgetter.
//
// As for Reset, the fast layer gets the record the store will hold before
// the store does, so that no older state can land there after the store
// changed; this instance's local cache forgets the key, other instances'
// caches answer its old final state until their TTL ends (WithLocalCache).
func (e *Engine) Forget(ctx context.Context, key string, rp driver.Replay) (prior driver.Record, err error) {
	if err := checkKey(key); err != nil {
		return prior, err
	}
	if err := checkAudit(rp); err != nil {
		return prior, err
	}
	f, ok := e.store.(driver.Forgetter)
	if !ok {
		return prior, fmt.Errorf("forget %s: %w: the store cannot forget (it is not a driver.Forgetter)", key, driver.ErrInvalid)
	}
	if rp.Source == "" {
		rp.Source = "forget"
	}
	rec, err := e.store.Get(ctx, key)
	if err != nil {
		return prior, storeErr("forget", err)
	}
	next := rec
	if err := driver.ApplyForget(&next, rp, time.Now()); err != nil {
		return rec, err
	}
	if err := e.republishAhead(ctx, next); err != nil {
		return rec, err
	}
	if rp.ExpectFence == 0 { // else the caller's read, older than this one, is the one that must still hold
		rp.ExpectFence = rec.Fence
	}
	prior, after, err := f.Forget(ctx, key, rp)
	if err != nil {
		e.fastDo(ctx, "forget", func(c context.Context) error { return e.fast.Forget(c, key) })
		return prior, storeErr("forget", err)
	}
	e.republish(ctx, after) // as Reset: the first entry may have expired or been dropped meanwhile
	return prior, nil
}
