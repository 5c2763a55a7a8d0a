package idempotency

import (
	"context"
	"errors"
	"time"

	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/internal/sleep"
)

// WithWaitInFlight lets a duplicate that meets another owner's live lease
// wait up to d (and never past its context's deadline) for the owner's
// outcome, and answer it, instead of ErrInProgress (default 0: answer at
// once). It polls the durable store with a growing back-off; if the owner
// dies and its lease runs out meanwhile, the waiting caller takes the key
// over and runs fn itself. Off in the FC template: FC retries a delivery
// answered in progress, and a waiting invocation holds an instance.
func WithWaitInFlight(d time.Duration) Option { return func(o *options) { o.waitInFlight = d } }

// Poll bounds of WithWaitInFlight.
const (
	waitFirstPoll = 25 * time.Millisecond
	waitMaxPoll   = time.Second
)

// waitInFlight polls key until its record leaves the in-progress state it
// was found in, or the wait ends; then it answers as a claim would. The
// owner's lease is judged on the store's clock (Engine.readNow), which
// stamped it: on the function's, a clock ahead of the database's would end
// the wait at once and one behind would wait out a dead owner's lease.
func (e *Engine) waitInFlight(ctx context.Context, req ClaimRequest, res driver.ClaimResult) (driver.ClaimResult, *Lease, error) {
	end := e.now().Add(e.o.waitInFlight)
	if dl, ok := ctx.Deadline(); ok && dl.Before(end) {
		end = dl
	}
	for pause := waitFirstPoll; ; pause = min(2*pause, waitMaxPoll) {
		pause = min(pause, end.Sub(e.now()))
		if pause <= 0 || !sleep.For(ctx, pause) {
			return res, nil, nil
		}
		rec, now, err := e.readNow(ctx, req.Key)
		codeFailedFinish(&rec)
		switch {
		case errors.Is(err, driver.ErrNotFound): // the claimant never reached the store: claim
		case errors.Is(err, driver.ErrMalformedTombstone): // the claim answers its FINAL error
		case err != nil:
			return res, nil, nil // answer in progress, as without the wait
		case rec.Status.Terminal():
			d := DecisionRepeatDone
			if !driver.SamePayload(rec.PayloadHash, req.PayloadHash, req.LegacyPayloadHash) {
				d = DecisionPayloadMismatch
			}
			e.publish(ctx, rec, 0)
			return driver.ClaimResult{Decision: d, Record: rec, Source: "wait"}, nil, nil
		case rec.Status == driver.StatusRunning && now.Before(rec.LeaseUntil):
			continue // the owner's lease is live
		}
		// Failed, reset, gone, or the owner's lease ran out: the store
		// decides. Another owner's live lease again (a takeover won by a
		// third caller, or a lease this read saw ended and the store did
		// not) is waited for like the first; a retryable failure's back-off
		// is answered, not waited out: its retry belongs to its own request.
		r, l, err := e.Claim(ctx, req)
		if err != nil || l != nil || r.Decision != DecisionRepeatOther || r.Record.Status != driver.StatusRunning {
			return r, l, err
		}
		res = r
	}
}
