package idempotency

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemgate/idemgate/idempotency/driver"
)

// Outcome is what Do answers, first time and every time after. Its JSON is
// the library's own: it shares idempotency_key, status, duplicate, decision,
// attempt and result_ref with the template's answer (docs/design.md §9,
// handler.Outcome), adds fence, and carries a stored failure as error_code
// and error rather than §9's errorType, errorMessage and retryable.
type Outcome struct {
	Key       string        `json:"idempotency_key"`
	Status    driver.Status `json:"status"`
	Duplicate bool          `json:"duplicate"`
	Decision  Decision      `json:"decision"`
	Attempt   int           `json:"attempt"`
	Fence     int64         `json:"fence"`
	ResultRef string        `json:"result_ref"`
	ErrorCode string        `json:"error_code,omitempty"`
	Error     string        `json:"error,omitempty"`

	holder string // the lease owner the answering record names (Holder)
}

// Holder reports whether owner is the lease owner the record answering a
// duplicate names — for a finished key, the request that completed it or
// last took its finish — unless that record says the finish is done. Such
// a caller is a copy or retry of that request, whose finish may be pending
// (Engine.ClaimFinish asks). The owner itself is another request's id: it
// is not shown.
func (o Outcome) Holder(owner string) bool { return owner != "" && o.holder == owner }

// outcomeOf describes a claim result that the caller did not own.
func outcomeOf(res driver.ClaimResult) Outcome {
	r := res.Record
	if res.Decision == DecisionPayloadMismatch {
		// The record is another payload's: its result and state are not
		// this request's to see (issue 20: no answer carries another
		// payload's result).
		return Outcome{Key: r.Key, Duplicate: true, Decision: res.Decision}
	}
	return Outcome{Key: r.Key, Status: r.Status, Duplicate: res.Decision.Duplicate(), Decision: res.Decision,
		Attempt: r.Attempt, Fence: r.Fence, ResultRef: r.ResultRef, ErrorCode: r.LastErrorCode, Error: r.LastError,
		holder: holderOf(r)}
}

// holderOf is the owner Outcome.Holder compares: none once the record says
// the finish is done (Redis and the cache do not say: their answer names
// the owner that completed the key).
func holderOf(r driver.Record) string {
	if r.Finish == driver.FinishDone {
		return ""
	}
	return r.LeaseOwner
}

// retryLaterCode is the error code of [ErrRetryLater].
const retryLaterCode = "retry_later"

// storedError is the error a duplicate of a finished-but-failed key answers:
// the same class and code as the original failure, without running again.
// In progress is ErrInProgress only while another owner's live lease
// carries the work; else nothing would do it if this delivery were
// acknowledged (driver.RetryLater).
func storedError(res driver.ClaimResult, owner string) error {
	switch {
	case res.Decision == DecisionPayloadMismatch:
		return Final("payload_mismatch", ErrPayloadMismatch)
	case res.Decision == DecisionRepeatOther && driver.RetryLater(res.Record, owner):
		return Retryable(retryLaterCode, fmt.Errorf("%w (%s)", ErrRetryLater, retryLaterWhy(res.Record)))
	case res.Decision == DecisionRepeatOther:
		return ErrInProgress
	case res.Record.Status == driver.StatusFailedFinal, res.Record.FailedFinish():
		// A finish that failed FINAL is answered as failed too, by every
		// delivery: FC's retries then end in the dead-letter queue
		// (docs/design.md §10). The result stands.
		return &Error{Class: ClassFinal, Code: res.Record.LastErrorCode, Err: errors.New(res.Record.LastError)}
	}
	return nil
}

// Do runs fn at most once per effective result of req.Key — the Powertools-
// style entry point. fn returns a result reference (an object name, or a small
// JSON value) that is stored and answered to every later delivery.
//
//   - New key, or a retry that may run: fn runs under a lease that is renewed
//     in the background; its context is cancelled if the lease is lost.
//   - Terminal key: the stored Outcome, Duplicate=true; a FAILED_FINAL key
//     returns its stored *Error again.
//   - Live lease elsewhere: ErrInProgress. The caller's own live lease
//     without a later try, or a retryable failure in its back-off: a
//     RETRYABLE retry_later error wrapping ErrRetryLater. Other payload: a FINAL
//     payload_mismatch error. Store down: ErrStoreUnavailable (retry later).
//
// If fn fails, its error is classified ([Classify]) and recorded; the
// returned error is a *Error whose Retryable tells whether to deliver again.
// A result over [driver.MaxResultRef] bytes is recorded as a FINAL result_too_large
// failure. When the key's attempt budget is spent but a takeover is due (a
// worker died), fn does not run and the key ends FAILED_FINAL
// attempts_exhausted, unless req.AllowSalvage lets fn complete from saved
// work (see [Lease.Salvage]).
// If fn panics, the failure is recorded (code "panic") and the panic goes on.
func (e *Engine) Do(ctx context.Context, req ClaimRequest, fn func(ctx context.Context, l *Lease) (string, error)) (Outcome, error) {
	if e.o.disabled {
		return e.doDisabled(ctx, req, fn)
	}
	res, l, err := e.Claim(ctx, req)
	if err == nil && l == nil && res.Decision == DecisionRepeatOther && e.o.waitInFlight > 0 {
		res, l, err = e.waitInFlight(ctx, req, res)
	}
	if err != nil {
		return Outcome{Key: req.Key}, err
	}
	if l == nil {
		return outcomeOf(res), storedError(res, req.Owner)
	}
	out := Outcome{Key: l.Key, Status: driver.StatusRunning, Duplicate: res.Decision.Duplicate(), Decision: res.Decision,
		Attempt: l.Attempt, Fence: l.Fence}
	kctx, stop := l.KeepAlive(ctx)
	defer stop()
	finished := false
	defer func() {
		if finished {
			return
		}
		// The "finished?" guard: even a panic leaves a recorded state behind.
		r := recover()
		stop()
		if r == nil { // runtime.Goexit: nothing to re-raise
			_, _ = l.Fail(ctx, &Error{Class: ClassUnknown, Code: "aborted", Err: errors.New("goroutine exited")})
			return
		}
		_, _ = l.Fail(ctx, &Error{Class: ClassUnknown, Code: "panic", Err: fmt.Errorf("panic: %v", r)})
		panic(r)
	}()
	var ref string
	var ferr error
	if l.salvage && !req.AllowSalvage {
		ferr = exhaustedError(l.Attempt) // fn cannot complete from saved work: do not run it again
	} else {
		ref, ferr = fn(kctx, l)
	}
	finished = true
	stop() // before the terminal write: no renewal may follow it
	if ferr == nil {
		ferr = checkResult(ref) // recorded FINAL below: never a second run for a result too large to keep
	}
	if ferr == nil {
		if err := l.Complete(ctx, ref); err != nil {
			return out, err
		}
		out.Status, out.ResultRef = driver.StatusSucceeded, ref
		return out, nil
	}
	if errors.Is(context.Cause(kctx), ErrLeaseLost) {
		return out, fmt.Errorf("%w: %w", ErrLeaseLost, ferr)
	}
	ferr = l.budgeted(ferr)
	st, err := l.Fail(ctx, ferr)
	if err != nil {
		return out, err
	}
	class, raw := Classify(ferr)
	code := truncate(raw, maxErrorCode) // as recorded: the first answer and every repeat say the same
	out.Status, out.ErrorCode, out.Error = st, code, truncate(message(ferr), maxErrorText)
	if st == driver.StatusFailedFinal {
		class = ClassFinal
	}
	if e, ok := ferr.(*Error); ok && e.Code == raw {
		ferr = e.Err // re-classed, not re-coded: the code is said once
	}
	return out, &Error{Class: class, Code: code, Err: ferr}
}

func retryLaterWhy(rec driver.Record) string {
	if rec.Status == driver.StatusRunning {
		return "this request's own live lease: a copy of its try, or a retry without a later retry count; it may take over once the lease ends"
	}
	return "a retryable failure waiting out its back-off"
}

// WithDisabled turns idempotency off (default on): Do runs fn every time,
// without claiming, recording or answering from an earlier delivery, and
// Lease.Step runs its function without a checkpoint. For tests that
// exercise the function alone; the engine says so loudly when it starts.
// The FC template reads IDEMPOTENCY_DISABLED=true and refuses it where
// IDEMGATE_ENV=production.
func WithDisabled() Option { return func(o *options) { o.disabled = true } }

func (e *Engine) doDisabled(ctx context.Context, req ClaimRequest, fn func(ctx context.Context, l *Lease) (string, error)) (Outcome, error) {
	// Every run is the first and only attempt of its own: attempts count
	// from 1 wherever they name something (the output object, the logs).
	out := Outcome{Key: req.Key, Decision: DecisionDisabled, Status: driver.StatusSucceeded, Attempt: 1}
	ref, err := fn(ctx, &Lease{e: e, Key: req.Key, Owner: req.Owner, OriginRequestID: req.Meta.OriginRequestID, Attempt: 1,
		disabled: true, decision: DecisionDisabled})
	if err != nil {
		f := failure(err)
		out.Status, out.ErrorCode, out.Error = driver.StatusFailedRetryable, f.Code, f.Message
		if f.Final {
			out.Status = driver.StatusFailedFinal
		}
		return out, err
	}
	out.ResultRef = ref
	return out, nil
}

// exhaustedError is the failure a salvage records when no saved work is
// left to complete from.
func exhaustedError(attempts int) error {
	return Final(driver.ExhaustedCode, fmt.Errorf("attempt budget spent after %d attempts", attempts))
}
