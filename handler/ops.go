package handler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemgate/idemgate/handler/event"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/keys"
	"github.com/idemgate/idemgate/internal/logx"
	"github.com/idemgate/idemgate/ossresult"
)

// SweepOptions bound one sweep.
type SweepOptions struct {
	Limit  int           // records per run (default 50)
	Budget time.Duration // wall time per run (default 40 s, inside a 60 s timer)
	Grace  time.Duration // a failed or finished record is left to FC's own retry this long (0: none)
	// Progress, when set, is called after each record with the report so
	// far (main sweep prints progress lines from it).
	Progress func(SweepReport)
}

// SweepReport is the sweep's answer (the timer invocation's outcome). Every
// record it took up has an entry in Results; a deferred one says why.
type SweepReport struct {
	Scanned  int       `json:"scanned"`
	Redriven int       `json:"redriven"` // tasks run again from their stored input
	Finished int       `json:"finished"` // SUCCEEDED records whose publish/notify were completed
	Deferred int       `json:"deferred"` // set aside, not run: no input.json yet (left to FC's retry), it could not be read
	Backoff  int       `json:"backoff"`  // not run: a retryable failure's back-off still runs (FC's retry or a later sweep runs it)
	Skipped  int       `json:"skipped"`  // left for the next run (budget spent)
	Results  []Outcome `json:"results"`
}

func newOwner(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + ":" + hex.EncodeToString(b)
}

// Sweep takes up stuck work, each through a normal fenced claim: tasks
// RUNNING past their lease (the worker died), waiting in FAILED_RETRYABLE or
// RECEIVED are re-driven from their stored input; SUCCEEDED records whose
// finish (publish, notify) was left pending are finished. Two sweepers at
// once are safe: the claims arbitrate.
func (p *Pipeline) Sweep(ctx context.Context, meta Meta, o SweepOptions) (SweepReport, error) {
	m := p.maint()
	if m == nil {
		return SweepReport{}, errNoMaint
	}
	if o.Limit <= 0 {
		o.Limit = 50
	}
	if o.Budget <= 0 {
		o.Budget = 40 * time.Second
	}
	end := time.Now().Add(o.Budget)
	cands, err := m.Candidates(ctx, o.Limit, o.Grace)
	if err != nil {
		return SweepReport{}, fmt.Errorf("sweep: %w", err)
	}
	rep := SweepReport{Scanned: len(cands), Results: []Outcome{}}
	owner := newOwner("sweep")
	for i, rec := range cands {
		if time.Now().After(end) || ctx.Err() != nil {
			rep.Skipped = len(cands) - i
			break
		}
		out, f := p.sweepOne(ctx, rec, meta, owner, i)
		switch {
		case f == fateSetAside:
			rep.Deferred++
		case f == fateBackoff:
			rep.Backoff++
		case rec.Status == driver.StatusSucceeded:
			rep.Finished++
		default:
			rep.Redriven++
		}
		rep.Results = append(rep.Results, out)
		if o.Progress != nil {
			o.Progress(rep)
		}
	}
	p.Log.InfoContext(ctx, "sweep done", "scanned", rep.Scanned, "redriven", rep.Redriven, "finished", rep.Finished,
		"deferred", rep.Deferred, "backoff", rep.Backoff, "skipped", rep.Skipped, "oldest_age_s", oldestAgeSeconds(cands))
	return rep, nil
}

// fate is what the sweep did with a record: took it up (re-driven or
// finished), set it aside, or left it in its back-off.
type fate int

const (
	fateTakenUp fate = iota
	fateSetAside
	fateBackoff
)

// sweepOne takes up rec's pending finish or re-drives it, and reports
// its fate. A panic there (a bug reading its input, say)
// sets rec aside too: the sweep goes on to the others, and later sweeps do
// not meet rec first on every run.
func (p *Pipeline) sweepOne(ctx context.Context, rec driver.Record, meta Meta, owner string, i int) (out Outcome, f fate) {
	defer func() {
		if v := recover(); v != nil {
			c := logx.With(ctx, slog.String("idempotency_key", rec.Key), slog.String("request_id", rec.OriginRequestID))
			p.Log.ErrorContext(c, "panic while sweeping a record", "panic", fmt.Sprint(v))
			o := Outcome{IdempotencyKey: rec.Key, Status: string(rec.Status), Attempt: rec.Attempt, RequestID: rec.OriginRequestID}
			// Set aside as it is now: the sweep's own claim moved its fence,
			// and a Defer of the record as listed would change nothing.
			rc, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordReadTimeout)
			defer cancel()
			if now, err := p.Engine.Get(rc, rec.Key); err == nil {
				rec = now
			}
			out, f = p.setAside(c, o, rec, readBackoff, idempotency.Retryable("panic", fmt.Errorf("panic: %v", v))), fateSetAside
		}
	}()
	if rec.Status == driver.StatusSucceeded {
		return p.refinish(ctx, rec, meta, owner), fateTakenUp
	}
	return p.redrive(ctx, rec, meta, fmt.Sprintf("%s#%d", owner, i))
}

// storedTask rebuilds the task of rec from its input.json, and how its K
// was derived.
func (p *Pipeline) storedTask(ctx context.Context, rs ResultStore, rec driver.Record) (*event.Task, keying, error) {
	doc, err := readInput(ctx, rs, rec.Key)
	if err != nil {
		return nil, keying{}, err
	}
	data, _ := json.Marshal(map[string]any{"tenant_id": doc.TenantID, "task_type": doc.TaskType, "operation": doc.Operation,
		"input": doc.Input, "input_version": doc.InputVersion, "request_id": rec.OriginRequestID})
	t := doc.task()
	t.RequestID, t.Data, t.EventSource, t.EventID = rec.OriginRequestID, data, rec.EventSource, rec.EventID
	d, k, err := doc.derive(t)
	if err != nil || d.Key != rec.Key {
		return nil, k, idempotency.Final("bad_input", fmt.Errorf("input.json of %s derives another key", rec.Key))
	}
	if !driver.SamePayload(rec.PayloadHash, d.PayloadHash, d.LegacyPayloadHash) {
		return nil, k, samePayload(doc, keys.Derived{Key: rec.Key, PayloadHash: rec.PayloadHash})
	}
	if _, ok := p.Tasks.Get(t.TaskType); !ok {
		return nil, k, idempotency.Final("invalid_request", fmt.Errorf("unknown task_type %q", t.TaskType))
	}
	return t, k, nil
}

// Horizons of the sweeper. inputHorizon is how long a record without
// input.json is left to FC's own retries, which carry the event, before the
// sweeper gives up on it: it must exceed the span of FC's async retries of
// one request (a hung instance's retry comes after the function timeout).
// readBackoff sets aside a record whose input could not be read.
const (
	inputHorizon = time.Hour
	readBackoff  = time.Minute
)

// redrive runs rec's task again from its stored input under owner, and
// reports whether it set the record aside instead.
//
// A record without input.json (its worker died, or the object store failed,
// before saving it) is left to FC's retries until inputHorizon has passed
// since its last change, and set aside (Defer) so that it does not hold the
// head of the sweeper's queue; then, and for an input that no longer parses
// or names an unknown task type, the record is taken over and recorded
// FAILED_FINAL, so that its delivery ends in the dead-letter queue, from
// which it is replayed.
func (p *Pipeline) redrive(ctx context.Context, rec driver.Record, meta Meta, owner string) (Outcome, fate) {
	ctx = p.traceRecord(ctx, rec)
	ctx = logx.With(ctx, slog.String("idempotency_key", rec.Key), slog.String("request_id", rec.OriginRequestID))
	o := Outcome{IdempotencyKey: rec.Key, Status: string(rec.Status), Attempt: rec.Attempt, RequestID: rec.OriginRequestID}
	rs, err := p.Results(ctx, meta.Credentials)
	if err != nil {
		return failure(o, classifyResultErr("result store", err)), fateTakenUp
	}
	t, k, err := p.storedTask(ctx, rs, rec)
	missing, age, aged := errors.Is(err, ossresult.ErrNotFound), time.Duration(0), false
	if missing {
		age, aged = p.age(ctx, rec)
	}
	switch class, _ := idempotency.Classify(err); {
	case err == nil:
		out := p.runKeyed(ctx, t, k, meta, owner)
		switch {
		case out.ErrorType == retryLater: // in its back-off: left for FC's retry or a later sweep
			return out, fateBackoff
		case out.Decision != DecisionRejected:
			return out, fateTakenUp
		}
		// Refused before any claim (a limit lowered since, notify no longer
		// configured): without an answer of its own the record would head
		// every sweep. A FINAL refusal ends it; another sets it aside.
		cause := idempotency.Retryable(out.ErrorType, errors.New(out.ErrorMessage))
		if out.Retryable != nil && !*out.Retryable {
			return p.abandon(ctx, rs, rec, owner, idempotency.Final(out.ErrorType, errors.New(out.ErrorMessage))), fateTakenUp
		}
		return p.setAside(ctx, o, rec, readBackoff, cause), fateSetAside
	case missing && !aged:
		return p.setAside(ctx, o, rec, readBackoff, idempotency.Retryable("input_missing",
			errors.New("no input.json, and the record's age unknown (its read failed, or it changed since listed): left for a later sweep"))), fateSetAside
	case missing && age < inputHorizon:
		return p.setAside(ctx, o, rec, inputHorizon-age, idempotency.Retryable("input_missing",
			fmt.Errorf("no input.json yet: left to FC's retry until %s", time.Now().Add(inputHorizon-age).Format(time.RFC3339)))), fateSetAside
	case missing:
		return p.abandon(ctx, rs, rec, owner, idempotency.Final("input_missing",
			errors.New("no input.json (the worker died before saving it): replay from the dead-letter queue"))), fateTakenUp
	case class == idempotency.ClassFinal:
		return p.abandon(ctx, rs, rec, owner, err), fateTakenUp
	default:
		return p.setAside(ctx, o, rec, readBackoff, err), fateSetAside
	}
}

// age is how long ago rec last changed, read again with the store's
// clock, which stamped it (this process's may be ahead: a delivery FC
// still retries would look past the input horizon and be given up FINAL).
// aged is false when the store could not be read or another claim moved
// the record on since it was listed: giving it up then could lose a live
// delivery, so it waits for a later sweep.
func (p *Pipeline) age(ctx context.Context, rec driver.Record) (age time.Duration, aged bool) {
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordReadTimeout)
	defer cancel()
	cur, now, err := p.Engine.GetNow(c, rec.Key)
	if err != nil || cur.Fence != rec.Fence || cur.Status != rec.Status {
		return 0, false
	}
	return now.Sub(cur.UpdatedAt), true
}

// setAside defers rec for d and answers why.
func (p *Pipeline) setAside(ctx context.Context, o Outcome, rec driver.Record, d time.Duration, why error) Outcome {
	if err := p.maint().Defer(ctx, rec, d); err != nil {
		p.Log.WarnContext(ctx, "sweeper could not set a record aside", "error", err.Error())
	}
	p.Log.InfoContext(ctx, "sweeper set a record aside", "status", rec.Status, "reason", why.Error())
	return failure(o, why)
}

// abandon takes rec over and records cause FAILED_FINAL (for input_missing
// only once input.json is read again and known missing). Its claim is a
// salvage lease whatever the budget (MaxAttempts 1): giving a key up runs
// nothing, so it takes no attempt from it.
func (p *Pipeline) abandon(ctx context.Context, rs ResultStore, rec driver.Record, owner string, cause error) Outcome {
	o := Outcome{IdempotencyKey: rec.Key, Status: string(rec.Status), Attempt: rec.Attempt, RequestID: rec.OriginRequestID}
	res, l, err := p.Engine.Claim(ctx, idempotency.ClaimRequest{Key: rec.Key, PayloadHash: rec.PayloadHash, Owner: owner, Try: -1,
		MaxAttempts: 1})
	if err != nil {
		return failure(o, err)
	}
	if l == nil { // someone else holds it now (FC's retry): nothing to abandon
		return failure(o, idempotency.Retryable("in_progress", fmt.Errorf("%w (%s)", idempotency.ErrInProgress, res.Decision)))
	}
	if _, code := idempotency.Classify(cause); code == "input_missing" {
		// Between the listing and the claim, a retry may have saved the input:
		// leave the key retryable as it was (Lease.Fail would make it final
		// on this lease's budget of one). So too when the object store does
		// not answer: only an input known missing is given up — or, FINAL
		// input_unreadable, one that maxInputRechecks re-checks in a row
		// could not read.
		f, unreadable := recheckInput(ctx, rs, res.Record, l.Fence)
		if f != nil {
			_ = p.Engine.Store().Fail(context.WithoutCancel(ctx), rec.Key, l.Fence, *f)
			return failure(o, idempotency.Retryable(f.Code, errors.New(f.Message)))
		}
		if unreadable != nil {
			cause = unreadable
		}
	}
	st, ferr := l.Fail(ctx, cause)
	if ferr != nil {
		return failure(o, ferr)
	}
	p.Log.WarnContext(ctx, "sweeper recorded a task it cannot re-drive as failed", "status", st, "error", cause.Error())
	o.Status, o.Attempt = string(st), l.Attempt
	return failure(o, cause)
}

// The cap on re-checks that cannot read input.json (issue 38). Each comes
// an hour after the one before (inputHorizon since the record's last
// change), takes the key over and releases it: without a cap, an object
// store that keeps failing the re-check (or refusing it) would have the key
// claimed and released every hour for good, never ending. The count is
// kept in the record's last_error ("re-check n of max at fence f"), and
// counts only while no other claim or reset came between two re-checks
// (the next re-check's claim is then at fence f+1): anything else starts it
// again.
const (
	inputUnreadCode     = "input_unread"
	inputUnreadableCode = "input_unreadable"
	maxInputRechecks    = 24
	unreadFormat        = "re-check %d of %d at fence %d"
)

// recheckInput reads rec's input.json again once the sweeper holds the key
// (rec: the record as its claim at fence took it). Known missing: nil, nil
// (given up input_missing). Otherwise the failure to record, the key left
// retryable: input_appeared, or input_unread while fewer than
// maxInputRechecks re-checks in a row could not read it; at the cap, no
// failure to record but the FINAL cause to give the key up with,
// input_unreadable.
func recheckInput(ctx context.Context, rs ResultStore, rec driver.Record, fence int64) (*driver.Failure, error) {
	key, err := ossresult.InputKey(rec.Key)
	if err != nil {
		return nil, nil
	}
	_, _, gerr := rs.Get(ctx, key)
	switch n := unreadRechecks(rec) + 1; {
	case errors.Is(gerr, ossresult.ErrNotFound):
		return nil, nil
	case gerr == nil:
		return &driver.Failure{Code: "input_appeared", Message: "input.json appeared; the next sweep re-drives it"}, nil
	case n < maxInputRechecks:
		return &driver.Failure{Code: inputUnreadCode, Message: fmt.Sprintf(unreadFormat+": input.json could not be read again; "+
			"left to FC's retries for another hour", n, maxInputRechecks, fence)}, nil
	default:
		return nil, idempotency.Final(inputUnreadableCode, fmt.Errorf("input.json could not be read in %d re-checks in a row, "+
			"an hour apart, each after a read that found it missing (the last: %v): replay the dead letter with --dlq, "+
			"or --key once the object store answers", n, gerr))
	}
}

// unreadRechecks is how many re-checks in a row could not read rec's
// input.json, rec being the record as the next re-check's claim took it.
func unreadRechecks(rec driver.Record) int {
	var n, most int
	var fence int64
	if rec.LastErrorCode != inputUnreadCode {
		return 0
	}
	if _, err := fmt.Sscanf(rec.LastError, unreadFormat, &n, &most, &fence); err != nil || fence+1 != rec.Fence || n < 0 {
		return 0
	}
	return n
}

// refinish takes up the pending finish (publish, notify) of a SUCCEEDED
// record whose holder's lease ran out; the stored input decides notify.
func (p *Pipeline) refinish(ctx context.Context, rec driver.Record, meta Meta, owner string) Outcome {
	ctx = p.traceRecord(ctx, rec)
	ctx = logx.With(ctx, slog.String("idempotency_key", rec.Key), slog.String("request_id", rec.OriginRequestID))
	o := Outcome{IdempotencyKey: rec.Key, Status: string(rec.Status), Duplicate: true, Decision: string(idempotency.DecisionRepeatDone),
		Attempt: rec.Attempt, ResultRef: rec.ResultRef, RequestID: rec.OriginRequestID}
	rs, err := p.Results(ctx, meta.Credentials)
	if err != nil {
		return failure(o, classifyResultErr("result store", err))
	}
	res, f, err := p.Engine.ClaimFinish(ctx, rec.Key, owner, -1)
	switch {
	case err != nil:
		return failure(o, err)
	case f == nil && res.Decision == idempotency.DecisionRepeatOther:
		return failure(o, idempotency.Retryable("finish_in_progress", fmt.Errorf("finish of %s: %w", rec.Key, idempotency.ErrInProgress)))
	case f == nil:
		return o // finished meanwhile
	}
	in, err := readInput(ctx, rs, rec.Key)
	if err != nil {
		return failure(o, p.finishFailed(ctx, f, expired(err)))
	}
	if err := p.finish(ctx, f, rs, o, in.Notify, ossresult.Meta{IdempotencyKey: rec.Key, RequestID: rec.OriginRequestID},
		savedOutput{}); err != nil {
		return failure(o, err)
	}
	return o
}

// ReplayRequest names who replays what and why; both are required (audit).
type ReplayRequest struct {
	Reason   string
	Operator string
}

func (r ReplayRequest) check() error {
	if r.Reason == "" || r.Operator == "" {
		return idempotency.Final("invalid_request", errors.New("replay needs --reason and --operator (they are audited)"))
	}
	return nil
}

// ReplayKey re-drives K with its original key from its stored input. A
// failed or abandoned record is reset (audited: a new fence, RECEIVED) and
// claimed again; a SUCCEEDED one keeps its result and only a failed finish
// is taken up again: a replay never yields a second effective result. An
// unknown key, or one without a stored input, changes nothing: its dead
// letter carries the event (replay --dlq).
func (p *Pipeline) ReplayKey(ctx context.Context, key string, r ReplayRequest, meta Meta) (Outcome, error) {
	if p.maint() == nil {
		return Outcome{}, errNoMaint
	}
	if err := r.check(); err != nil {
		return Outcome{}, err
	}
	rec, err := p.Engine.Get(ctx, key)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		return Outcome{}, fmt.Errorf("replay %s: %w (replay its dead letter with --dlq instead)", key, ErrUnknownKey)
	case err != nil:
		return Outcome{}, fmt.Errorf("replay %s: %w", key, err)
	case rec.Tombstone:
		return Outcome{}, fmt.Errorf("replay %s: %w: %s, last changed %s; a re-send is answered from it", key,
			driver.ErrPurged, rec.Status, rec.UpdatedAt.UTC().Format(time.RFC3339))
	}
	rs, err := p.Results(ctx, meta.Credentials)
	if err != nil {
		return Outcome{}, classifyResultErr("result store", err)
	}
	if _, _, err := p.storedTask(ctx, rs, rec); errors.Is(err, ossresult.ErrNotFound) && rec.Status == driver.StatusSucceeded {
		return Outcome{}, fmt.Errorf("replay %s: its input.json is gone (%s: objects live ObjectExpireDays after they "+
			"were written), so its finish cannot be completed; nothing was changed: %w", key, objectsExpiredCode, err)
	} else if err != nil {
		return Outcome{}, fmt.Errorf("replay %s: its stored input cannot be used (replay its dead letter with --dlq instead): %w", key, err)
	}
	prior, after, err := p.reset(ctx, key, driver.Replay{Reason: r.Reason, Operator: r.Operator, Source: "key"})
	if err != nil {
		return Outcome{}, err
	}
	owner := newOwner("replay")
	if prior.Status == driver.StatusSucceeded {
		return p.refinish(ctx, after, meta, owner), nil
	}
	o, _ := p.redrive(ctx, after, meta, owner)
	return o, nil
}

// reset resets key for a replay (Engine.Reset keeps the fast layer from
// answering the state the reset undid).
func (p *Pipeline) reset(ctx context.Context, key string, rp driver.Replay) (prior, after driver.Record, err error) {
	if prior, after, err = p.Engine.Reset(ctx, key, rp); err != nil {
		return prior, after, fmt.Errorf("replay %s: %w", key, err)
	}
	return prior, after, nil
}

// ReplayDLQ re-drives a dead letter: an FC async failure-destination message
// (its requestPayload is the original event) or an EventBridge dead-letter
// event (the event itself, single or batch). Every task in it is replayed
// under its original key, unless the key holds another payload (an explicit
// idempotency_key reused): that record is not touched, and the member is
// answered payload_mismatch naming both payload hashes.
func (p *Pipeline) ReplayDLQ(ctx context.Context, body []byte, r ReplayRequest, meta Meta) ([]Outcome, error) {
	if p.maint() == nil {
		return nil, errNoMaint
	}
	if err := r.check(); err != nil {
		return nil, err
	}
	inv, err := event.ParseWith(body, event.Options{KeyFallback: p.KeyFallback})
	if inv == nil {
		return nil, err
	}
	if inv.Kind == event.KindFailureDestination {
		if inv, err = inv.OriginalWith(event.Options{KeyFallback: p.KeyFallback}); inv == nil {
			return nil, err
		}
	}
	if inv.Kind != event.KindSingle && inv.Kind != event.KindBatch {
		return nil, idempotency.Final("unsupported_event", fmt.Errorf("a dead letter holds task events, not %s", inv.Kind))
	}
	var outs []Outcome
	for _, e := range inv.Rejected {
		outs = append(outs, failure(Outcome{}, e))
	}
	owner := newOwner("replay")
	for i, t := range inv.Tasks {
		outs = append(outs, p.replayTask(ctx, t, r, meta, fmt.Sprintf("%s#%d", owner, i)))
	}
	return outs, nil
}

func (p *Pipeline) replayTask(ctx context.Context, t *event.Task, r ReplayRequest, meta Meta, owner string) Outcome {
	keyFP, err := p.keyFingerprint(t)
	if err != nil {
		return failure(Outcome{RequestID: t.RequestID}, err)
	}
	d, _, err := p.keyRules().derive(t, keyFP)
	if err != nil {
		return failure(Outcome{RequestID: t.RequestID}, err)
	}
	prior, after, err := p.reset(ctx, d.Key, driver.Replay{Reason: r.Reason, Operator: r.Operator, Source: "dlq",
		PayloadHash: d.PayloadHash, LegacyPayloadHash: d.LegacyPayloadHash})
	switch {
	case errors.Is(err, idempotency.ErrPayloadMismatch):
		return failure(Outcome{IdempotencyKey: d.Key, RequestID: t.RequestID}, idempotency.Final("payload_mismatch", err))
	case err != nil:
		return failure(Outcome{IdempotencyKey: d.Key, RequestID: t.RequestID}, err)
	case prior.Status == driver.StatusSucceeded: // the result stands; take up a failed finish
		return p.refinish(ctx, after, meta, owner)
	}
	return p.runTask(ctx, t, meta, owner)
}
