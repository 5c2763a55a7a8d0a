package handler

import (
	"context"
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

// Pipeline runs invocations. Build one per process; it is safe for
// concurrent invocations (FC instanceConcurrency > 1).
type Pipeline struct {
	Engine  *idempotency.Engine
	Results ResultsFor
	Model   Model
	Notify  Notifier // nil: notify.url is refused as unsupported
	Tasks   *Registry
	// KeyFallback keys an event without tenant_id, or without both
	// operation and idempotency_key, by the fingerprint of its data instead
	// of refusing it (KEY_FALLBACK=fingerprint); one with tenant_id and
	// idempotency_key but no operation keeps its explicit key.
	KeyFallback bool
	// Keys: KEY_JMESPATH and PAYLOAD_JMESPATH (zero: the default keys).
	Keys KeyRules
	// Fault, when set, is called at named points of the pipeline; the drill
	// tests kill the process there (IDEMGATE_FAULT). Nil in production.
	Fault func(point string)
	Log   *slog.Logger

	// Retention: what the purge keeps (zero: purge refused, and inspect
	// shows no end of the dedup window).
	Retention Retention
}

// Handle answers one FC invocation body. It never panics: a panic inside a
// task is recorded as that task's failure by the engine and answered as a
// retryable failure here.
func (p *Pipeline) Handle(ctx context.Context, body []byte, meta Meta) (r Reply) {
	defer func() {
		if v := recover(); v != nil {
			p.Log.ErrorContext(ctx, "panic while handling the invocation", "panic", fmt.Sprint(v))
			r = reply(failure(Outcome{RequestID: meta.RequestID}, idempotency.Retryable("panic", fmt.Errorf("panic: %v", v))), true, "panic")
		}
	}()
	if meta.RequestID == "" {
		// The platform always sends one; without it, each invocation still
		// needs an owner of its own, or two would take each other's lease.
		meta.RequestID = newOwner("no-request-id")
	}
	ctx = TraceInvocation(ctx, meta, p.Log)
	inv, err := event.ParseWith(body, event.Options{KeyFallback: p.KeyFallback})
	if inv == nil || (err != nil && inv.Kind != event.KindBatch) { // a batch answers its valid members too
		o := failure(Outcome{RequestID: meta.RequestID}, err)
		p.Log.WarnContext(ctx, "event rejected", "errorType", o.ErrorType, "error", o.ErrorMessage, "body_bytes", len(body))
		return reply(o, true, o.ErrorType)
	}
	switch inv.Kind {
	case event.KindSingle:
		o := p.runTask(ctx, inv.Tasks[0], meta, meta.RequestID)
		return reply(o, o.Failed(), o.ErrorType)
	case event.KindBatch:
		return p.batch(ctx, inv, err, meta)
	case event.KindTimer:
		return p.timer(ctx, inv, meta)
	case event.KindFailureDestination:
		o := failure(Outcome{RequestID: meta.RequestID}, idempotency.Final("dead_letter_message",
			errors.New("an FC failure-destination message is not a task: re-drive it with `main replay --dlq FILE`")))
		p.Log.WarnContext(ctx, "failure-destination message delivered to the function", "original_request_id", inv.Failure.RequestID)
		return reply(o, true, o.ErrorType)
	}
	o := failure(Outcome{RequestID: meta.RequestID}, idempotency.Final("unsupported_event", fmt.Errorf("event kind %q", inv.Kind)))
	return reply(o, true, o.ErrorType)
}

// batch processes every valid member once, in order, and answers the whole:
// a failure if the batch is invalid or any member failed, so that FC retries
// it or sends it whole to the dead-letter queue; members that succeeded are
// answered from their records on the retry.
func (p *Pipeline) batch(ctx context.Context, inv *event.Invocation, batchErr error, meta Meta) Reply {
	return p.batchOf(ctx, inv, batchErr, meta, func(t *event.Task, owner string) Outcome { return p.runTask(ctx, t, meta, owner) })
}

// batchOf answers a batch whose valid members run answers.
func (p *Pipeline) batchOf(ctx context.Context, inv *event.Invocation, batchErr error, meta Meta,
	run func(t *event.Task, owner string) Outcome) Reply {
	results := make([]Outcome, inv.Size)
	for _, t := range inv.Tasks {
		results[t.Index] = run(t, fmt.Sprintf("%s#%d", meta.RequestID, t.Index))
	}
	for _, e := range inv.Rejected {
		if e.Index >= 0 && e.Index < len(results) {
			results[e.Index] = failure(Outcome{RequestID: meta.RequestID}, e)
		}
	}
	answer := struct {
		Results      []Outcome `json:"results"`
		ErrorType    string    `json:"errorType,omitempty"`
		ErrorMessage string    `json:"errorMessage,omitempty"`
	}{Results: results}
	failed := 0
	for _, o := range results {
		if o.Failed() {
			failed++
		}
	}
	switch {
	case batchErr != nil:
		answer.ErrorType, answer.ErrorMessage = event.TypeInvalidBatch, batchErr.Error()
	case failed > 0:
		answer.ErrorType, answer.ErrorMessage = "batch_failed", fmt.Sprintf("%d of %d members failed", failed, len(results))
	}
	if answer.ErrorType != "" {
		p.Log.WarnContext(ctx, "batch answered as a failure", "errorType", answer.ErrorType, "members", len(results), "failed", failed)
	}
	return reply(answer, answer.ErrorType != "", answer.ErrorType)
}

func (p *Pipeline) timer(ctx context.Context, inv *event.Invocation, meta Meta) Reply {
	if inv.Timer.Payload == event.TimerPayloadPurge {
		return p.purgeTimer(ctx)
	}
	rep, err := p.Sweep(ctx, meta, SweepOptions{Grace: time.Minute})
	if err != nil {
		o := failure(Outcome{}, err)
		return reply(o, true, o.ErrorType)
	}
	return reply(rep, false, "")
}

// retryLater is the code of idempotency.ErrRetryLater's failure: the
// delivery met its own live lease, or a retryable failure in its back-off,
// and is answered retryably, never acknowledged (docs/design.md §6).
const retryLater = "retry_later"

// task is one task event on its way through the pipeline.
type task struct {
	*event.Task
	d     keys.Derived
	fp    string   // the fingerprint of the event's data
	keyFP string   // the fingerprint K comes from (KEY_FALLBACK), or ""
	keys  KeyRules // the expressions K and the payload hash come from, recorded in input.json
	reqID string   // the upstream request id, or the fingerprint standing in for it
	tp    string   // the traceparent the task works under
	tt    TaskType
	rs    ResultStore
	meta  ossresult.Meta
	saved savedOutput // the output this delivery saved, if it did
}

// runTask is the pipeline of one task event: prepare, claim and run under
// the engine (Do), then finish (publish, notify) what this delivery
// completed, or what the same FC request completed before it died.
func (p *Pipeline) runTask(ctx context.Context, ev *event.Task, meta Meta, owner string) Outcome {
	return p.runKeyed(ctx, ev, p.liveKeying(), meta, owner)
}

// runKeyed is runTask with K derived as k says.
func (p *Pipeline) runKeyed(ctx context.Context, ev *event.Task, k keying, meta Meta, owner string) (out Outcome) {
	start := time.Now()
	ctx = p.traceTask(ctx, ev)
	t, o, err := p.prepareKeyed(ctx, ev, k, meta)
	if t == nil { // refused before the key was known
		return p.rejected(ctx, failure(o, err))
	}
	ctx = logx.With(ctx, slog.String("request_id", t.reqID), slog.String("idempotency_key", t.d.Key),
		slog.String("fingerprint", t.fp), slog.String("task_type", t.TaskType))
	if err != nil {
		return p.logged(ctx, start, failure(o, err))
	}
	var lease *idempotency.Lease
	var notify *event.Notify // as the stored input says
	done := false            // Do returned: o says what it answered
	defer func() {
		if v := recover(); v != nil {
			out = p.logged(ctx, start, p.panicked(ctx, v, o, t, lease, done))
		}
	}()
	res, err := p.Engine.Do(ctx, p.claimRequest(t, meta, owner), func(ctx context.Context, l *idempotency.Lease) (string, error) {
		lease = l
		ctx = logx.With(ctx, slog.Int64("fence", l.Fence), slog.Int("attempt", l.Attempt))
		p.Log.InfoContext(ctx, "claimed", "fc_retry_count", meta.RetryCount, "salvage", l.Salvage())
		ref, n, err := p.execute(ctx, t, l)
		notify = n
		return ref, err
	})
	done = true
	o.Status, o.Duplicate, o.Decision, o.Attempt, o.ResultRef = string(res.Status), res.Duplicate, string(res.Decision), res.Attempt, res.ResultRef
	if o.Decision == "" && lease != nil {
		o.Decision = string(idempotency.DecisionFirst)
	}
	switch {
	case lease == nil && errors.Is(err, idempotency.ErrInProgress): // another owner's live claim
		o.Status, o.Duplicate = string(driver.StatusRunning), true
	case err != nil:
		o = failure(o, err)
	case res.Status == driver.StatusSucceeded:
		if err := p.finishOwn(ctx, t, o, lease, notify, owner, meta.RetryCount, res.Holder(owner)); err != nil {
			o = failure(o, err)
			if errors.Is(err, idempotency.ErrRetryLater) { // its own request's live finish
				o.Decision = string(idempotency.DecisionRepeatOther)
			}
		}
	}
	return p.logged(ctx, start, o)
}

// panicked answers a panic of t's delivery. One in a step, which Do
// recorded (a retryable failure, or FINAL on the budget's last attempt)
// before re-raising it, is answered as recorded — retryable where the
// record cannot be read — so that the answer and the log line name the key
// and a batch's other members still answer; one after Do returned (done)
// keeps o as Do answered it.
func (p *Pipeline) panicked(ctx context.Context, v any, o Outcome, t *task, lease *idempotency.Lease, done bool) Outcome {
	p.Log.ErrorContext(ctx, "panic while running the task", "panic", fmt.Sprint(v))
	var cause error = idempotency.Retryable("panic", fmt.Errorf("panic: %v", v))
	if done || lease == nil {
		return failure(o, cause)
	}
	o.Status, o.Decision, o.Attempt = string(driver.StatusFailedRetryable), string(lease.Decision()), lease.Attempt
	// The invocation's context may be what ended (a step that panicked on
	// its cancellation): the read is bounded on its own.
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordReadTimeout)
	defer cancel()
	if rec, err := p.Engine.Get(c, t.d.Key); err == nil && rec.Fence == lease.Fence {
		o.Status = string(rec.Status)
		if rec.Status == driver.StatusFailedFinal {
			cause = idempotency.Final(rec.LastErrorCode, errors.New(rec.LastError))
		}
	}
	return failure(o, cause)
}

// recordReadTimeout bounds a read of the record made after the
// invocation's context may have ended (panicked, finishFailed).
const recordReadTimeout = 5 * time.Second

// rejected logs a refusal made before the key was known as Handle logs
// the parser's.
func (p *Pipeline) rejected(ctx context.Context, o Outcome) Outcome {
	ctx = logx.With(ctx, slog.String("request_id", o.RequestID), slog.String("idempotency_key", o.IdempotencyKey))
	p.Log.WarnContext(ctx, "event rejected", "errorType", o.ErrorType, "error", o.ErrorMessage)
	return o
}

// prepare checks the event and derives what the claim needs. It returns a
// nil task when even the key could not be derived; the outcome then carries
// FC's request id (the data's may be the field refused), and the key and the
// event's request id as soon as they are known.
func (p *Pipeline) prepare(ctx context.Context, ev *event.Task, meta Meta) (*task, Outcome, error) {
	return p.prepareKeyed(ctx, ev, p.liveKeying(), meta)
}

// prepareKeyed is prepare with K derived as k says.
func (p *Pipeline) prepareKeyed(ctx context.Context, ev *event.Task, k keying, meta Meta) (*task, Outcome, error) {
	o := Outcome{RequestID: meta.RequestID}
	if err := checkLimits(ev); err != nil {
		return nil, o, err
	}
	keyFP := k.keyFP
	if !k.stored {
		var err error
		if keyFP, err = p.keyFingerprint(ev); err != nil {
			return nil, o, err
		}
	}
	d, keyFP, err := k.rules.derive(ev, keyFP) // before the fingerprint: its errors name the input
	if err != nil {
		return nil, o, err
	}
	fp := keyFP // the same fingerprint, when K was derived from it
	if fp == "" {
		if fp, err = keys.Fingerprint(ev.Data); err != nil {
			return nil, o, keyErr(err)
		}
	}
	t := &task{Task: ev, d: d, fp: fp, keyFP: keyFP, keys: k.rules, reqID: ev.RequestID, tp: traceParentOf(ctx)}
	if t.reqID == "" {
		t.reqID = fp // layer 3: the fingerprint stands in for a missing request id
	}
	o.IdempotencyKey, o.RequestID = d.Key, t.reqID
	t.meta = ossresult.Meta{IdempotencyKey: d.Key, RequestID: t.reqID}
	tt, ok := p.Tasks.Get(ev.TaskType)
	if !ok {
		return t, o, idempotency.Final("invalid_request", fmt.Errorf("unknown task_type %q", ev.TaskType))
	}
	t.tt = tt
	if ev.Notify != nil && p.Notify == nil {
		return t, o, idempotency.Final("invalid_request", errors.New("notify is not configured"))
	}
	if c, ok := p.Notify.(interface{ Allowed(rawURL string) error }); ok && ev.Notify != nil {
		// Before the claim and the model call: a URL NOTIFY_ALLOWED_HOSTS
		// refuses is FINAL notify_forbidden at once, with nothing run or
		// recorded (the finish would refuse it only after the work).
		if err := c.Allowed(ev.Notify.URL); err != nil {
			return t, o, err
		}
	}
	if t.rs, err = p.Results(ctx, meta.Credentials); err != nil {
		return t, o, classifyResultErr("result store", err)
	}
	return t, o, nil
}

func (p *Pipeline) claimRequest(t *task, meta Meta, owner string) idempotency.ClaimRequest {
	inputKey, _ := ossresult.InputKey(t.d.Key) // K is 64 hex: always a valid object key
	return idempotency.ClaimRequest{Key: t.d.Key, PayloadHash: t.d.PayloadHash, LegacyPayloadHash: t.d.LegacyPayloadHash,
		Owner: owner, Try: meta.RetryCount,
		FinishAfter: true, AllowSalvage: true,
		Meta: driver.Meta{TenantID: t.TenantID, TaskType: t.TaskType, Operation: t.Operation,
			InputVersion: t.d.InputVersion, OriginRequestID: t.reqID, EventSource: t.EventSource, EventID: t.EventID,
			InputRef: t.rs.Ref(inputKey), TraceParent: t.tp}}
}

// execute runs the task under l: its input is saved (the first stored one
// stands, and it decides notify), then its steps, each once per key. A
// salvage lease only looks for an output an earlier attempt saved.
func (p *Pipeline) execute(ctx context.Context, t *task, l *idempotency.Lease) (string, *event.Notify, error) {
	if l.Salvage() {
		ref, err := p.salvage(ctx, t.rs, t.d, l.Attempt)
		return ref, nil, err
	}
	notify, err := p.saveInput(ctx, t)
	if err != nil {
		return "", nil, err
	}
	if p.Fault != nil {
		p.Fault("before_steps")
	}
	prior := map[string]string{}
	var outKey string
	for i, s := range t.tt.Steps {
		in := &StepInput{Task: t.Task, Key: t.d.Key, RequestID: t.reqID, Attempt: l.Attempt, Prior: prior, Model: p.Model,
			Results: t.rs, saved: &t.saved, payload: t.d}
		run := func(ctx context.Context) (string, error) { return s.Run(ctx, in) }
		var v string
		if i < len(t.tt.Steps)-1 {
			v, err = l.Step(ctx, s.Name, run) // checkpointed: a retry resumes after it
		} else {
			v, err = run(ctx) // its output object is the checkpoint, its key the result
		}
		if err != nil {
			return "", notify, err
		}
		prior[s.Name], outKey = v, v
	}
	if p.Fault != nil {
		p.Fault("after_output") // the result is saved, the record not yet completed
	}
	return t.rs.Ref(outKey), notify, nil
}

func (p *Pipeline) logged(ctx context.Context, start time.Time, o Outcome) Outcome {
	attrs := []any{"status", o.Status, "decision", o.Decision, "duplicate", o.Duplicate, "attempt", o.Attempt,
		"duration_ms", time.Since(start).Milliseconds()}
	if o.Failed() {
		p.Log.WarnContext(ctx, "task failed", append(attrs, "errorType", o.ErrorType, "error", o.ErrorMessage,
			"retryable", *o.Retryable)...)
	} else {
		p.Log.InfoContext(ctx, "task answered", attrs...)
	}
	return o
}

// classifyResultErr maps result-store errors to the classes of docs/design.md §10.
func classifyResultErr(op string, err error) error {
	var ie *idempotency.Error
	switch {
	case errors.As(err, &ie):
		return err
	case errors.Is(err, ossresult.ErrPermission):
		return idempotency.Final("permission_denied", fmt.Errorf("%s: %w", op, err))
	case errors.Is(err, ossresult.ErrInvalid):
		return idempotency.Final("invalid_request", fmt.Errorf("%s: %w", op, err))
	case errors.Is(err, ossresult.ErrConflict):
		return idempotency.Final("result_conflict", fmt.Errorf("%s: %w", op, err))
	case ossresult.Retryable(err):
		return idempotency.Retryable("temporary_unavailable", fmt.Errorf("%s: %w", op, err))
	}
	return fmt.Errorf("%s: %w", op, err)
}

// maint is the engine's store's maintenance side (driver.Maintainer), which
// sweeps, replays, purges and the audit read: nil when the store has none.
// Taken from the engine's own store, so a reset and the listing that led to
// it can never go to two different stores.
func (p *Pipeline) maint() driver.Maintainer {
	m, _ := p.Engine.Store().(driver.Maintainer)
	return m
}

// errNoMaint refuses the operations a store without a maintenance side
// cannot serve.
var errNoMaint = idempotency.Final("unsupported", errors.New("the store has no maintenance operations"))
