package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemgate/idemgate/handler/event"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/jcs"
	"github.com/idemgate/idemgate/idempotency/keys"
	"github.com/idemgate/idemgate/internal/logx"
	"github.com/idemgate/idemgate/ossresult"
)

// The pipeline's own per-operation steps after completion.
const (
	stepPublish = "publish"
	stepNotify  = "notify"
)

// Pipeline runs invocations. Build one per process; it is safe for
// concurrent invocations (FC instanceConcurrency > 1).
type Pipeline struct {
	Engine  *idempotency.Engine
	Results ResultsFor
	Model   Model
	Notify  Notifier // nil: notify.url is refused as unsupported
	Tasks   *Registry
	Maint   MaintStore // nil: sweep and replay are unavailable
	// Fault, when set, is called at named points of the pipeline; the drill
	// tests kill the process there (IDEMGATE_FAULT). Nil in production.
	Fault func(point string)
	Log   *slog.Logger
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
	inv, err := event.Parse(body)
	if inv == nil {
		o := failure(Outcome{RequestID: meta.RequestID}, err)
		p.Log.WarnContext(ctx, "event rejected", "errorType", o.ErrorType, "error", o.ErrorMessage, "body_bytes", len(body))
		return reply(o, true, o.ErrorType)
	}
	switch inv.Kind {
	case event.KindSingle:
		if err != nil {
			o := failure(Outcome{RequestID: meta.RequestID}, err)
			p.Log.WarnContext(ctx, "event rejected", "errorType", o.ErrorType, "error", o.ErrorMessage)
			return reply(o, true, o.ErrorType)
		}
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
	if inv.Size > MaxBatch {
		o := failure(Outcome{RequestID: meta.RequestID}, idempotency.Final("batch_too_large",
			fmt.Errorf("batch of %d events; at most %d", inv.Size, MaxBatch)))
		p.Log.WarnContext(ctx, "event rejected", "errorType", o.ErrorType, "error", o.ErrorMessage)
		return reply(o, true, o.ErrorType)
	}
	results := make([]Outcome, inv.Size)
	for _, t := range inv.Tasks {
		results[t.Index] = p.runTask(ctx, t, meta, fmt.Sprintf("%s#%d", meta.RequestID, t.Index))
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
	rep, err := p.Sweep(ctx, meta, SweepOptions{Grace: time.Minute})
	if err != nil {
		o := failure(Outcome{}, err)
		return reply(o, true, o.ErrorType)
	}
	return reply(rep, false, "")
}

// runTask is the pipeline of one task event.
func (p *Pipeline) runTask(ctx context.Context, t *event.Task, meta Meta, owner string) Outcome {
	start := time.Now()
	if err := checkLimits(t); err != nil {
		return failure(Outcome{}, err)
	}
	d, err := keys.Derive(keys.Fields{TenantID: t.TenantID, TaskType: t.TaskType, Operation: t.Operation,
		Input: t.Input, InputVersion: t.InputVersion, IdempotencyKey: t.IdempotencyKey})
	if err != nil {
		code := "invalid_request"
		if errors.Is(err, jcs.ErrTooDeep) {
			code = "input_too_deep"
		}
		return failure(Outcome{RequestID: t.RequestID}, idempotency.Final(code, err))
	}
	fp, err := keys.Fingerprint(t.Data)
	if err != nil {
		return failure(Outcome{RequestID: t.RequestID}, idempotency.Final("invalid_request", err))
	}
	reqID := t.RequestID
	if reqID == "" {
		reqID = fp // layer 3: the fingerprint stands in for a missing request id
	}
	ctx = logx.With(ctx, slog.String("request_id", reqID), slog.String("idempotency_key", d.Key),
		slog.String("fingerprint", fp), slog.String("task_type", t.TaskType))
	o := Outcome{IdempotencyKey: d.Key, RequestID: reqID}
	tt, ok := p.Tasks.Get(t.TaskType)
	if !ok {
		return p.logged(ctx, start, failure(o, idempotency.Final("invalid_request", fmt.Errorf("unknown task_type %q", t.TaskType))))
	}
	if t.Notify != nil && p.Notify == nil {
		return p.logged(ctx, start, failure(o, idempotency.Final("invalid_request", errors.New("notify is not configured"))))
	}
	rs, err := p.Results(ctx, meta.Credentials)
	if err != nil {
		return p.logged(ctx, start, failure(o, classifyResultErr("result store", err)))
	}
	inputKey, err := ossresult.InputKey(d.Key)
	if err != nil {
		return p.logged(ctx, start, failure(o, idempotency.Final("invalid_request", err)))
	}
	req := idempotency.ClaimRequest{Key: d.Key, PayloadHash: d.PayloadHash, Owner: owner, Try: meta.RetryCount,
		Meta: idempotency.Meta{TenantID: t.TenantID, TaskType: t.TaskType, Operation: t.Operation,
			InputVersion: d.InputVersion, OriginRequestID: reqID, EventSource: t.EventSource, EventID: t.EventID,
			InputRef: rs.Ref(inputKey)}}
	objMeta := ossresult.Meta{IdempotencyKey: d.Key, RequestID: reqID}

	var lease *idempotency.Lease
	var outKey string
	out, err := p.Engine.Do(ctx, req, func(ctx context.Context, l *idempotency.Lease) (string, error) {
		lease = l
		ctx = logx.With(ctx, slog.Int64("fence", l.Fence), slog.Int("attempt", l.Attempt))
		p.Log.InfoContext(ctx, "claimed", "fc_retry_count", meta.RetryCount)
		doc, err := inputDoc(t, d.InputVersion)
		if err != nil {
			return "", idempotency.Final("invalid_request", err)
		}
		// input.json is create-once; a double submit that differs only in
		// notify finds the first one's input there, which then stands.
		if _, err := rs.PutOnce(ctx, inputKey, doc, "application/json", objMeta); err != nil && !errors.Is(err, ossresult.ErrConflict) {
			return "", classifyResultErr("save input", err)
		}
		if p.Fault != nil {
			p.Fault("before_steps")
		}
		prior := map[string]string{}
		for _, s := range tt.Steps {
			in := &StepInput{Task: t, Key: d.Key, RequestID: reqID, Attempt: l.Attempt, Prior: prior, Model: p.Model, Results: rs}
			v, err := l.Step(ctx, s.Name, func(ctx context.Context) (string, error) { return s.Run(ctx, in) })
			if err != nil {
				return "", err
			}
			prior[s.Name] = v
			outKey = v
		}
		if p.Fault != nil {
			p.Fault("after_output") // the result is saved, the record not yet completed
		}
		return rs.Ref(outKey), nil
	})
	o.Status, o.Duplicate, o.Decision, o.Attempt, o.ResultRef = string(out.Status), out.Duplicate, string(out.Decision), out.Attempt, out.ResultRef
	if o.Decision == "" && lease != nil {
		o.Decision = string(idempotency.DecisionFirst)
	}
	switch {
	case lease == nil && errors.Is(err, idempotency.ErrInProgress): // another owner's live claim
		o.Status, o.Duplicate = string(idempotency.StatusRunning), true
		return p.logged(ctx, start, o)
	case err != nil:
		return p.logged(ctx, start, failure(o, err))
	}
	// Completion is recorded; publish and notify run once per key. Our own
	// run does them now; a retry of the same FC request (its first try died
	// after completing) finishes them.
	switch {
	case out.Status != idempotency.StatusSucceeded:
	case lease != nil:
		if err := p.finish(ctx, lease, rs, t, o, outKey, objMeta); err != nil {
			return p.logged(ctx, start, failure(o, err))
		}
	case meta.RetryCount > 0:
		if err := p.finishExisting(ctx, rs, d.Key, tt, t, o, owner, meta.RetryCount, objMeta); err != nil {
			return p.logged(ctx, start, failure(o, err))
		}
	}
	return p.logged(ctx, start, o)
}

// finishExisting runs publish and notify for a record that this owner
// completed earlier (its try died between complete and publish).
func (p *Pipeline) finishExisting(ctx context.Context, rs ResultStore, key string, tt TaskType, t *event.Task, o Outcome, owner string, try int, m ossresult.Meta) error {
	rec, err := p.Engine.Get(ctx, key)
	if err != nil {
		return err
	}
	if rec.LeaseOwner != owner {
		return nil // another delivery completed it and finishes it (or the sweeper will)
	}
	step, err := p.Engine.Get(ctx, keys.OpKey(key, tt.Steps[len(tt.Steps)-1].Name))
	if err != nil {
		return err
	}
	return p.finish(ctx, p.Engine.Attach(rec, owner, try), rs, t, o, step.ResultRef, m)
}

// inputDoc is input.json: what a re-drive needs to run the task again.
func inputDoc(t *event.Task, inputVersion string) ([]byte, error) {
	doc := map[string]any{"tenant_id": t.TenantID, "task_type": t.TaskType, "operation": t.Operation,
		"input_version": inputVersion, "input": t.Input}
	if t.IdempotencyKey != "" {
		doc["idempotency_key"] = t.IdempotencyKey
	}
	if t.Notify != nil {
		doc["notify"] = t.Notify
	}
	return jcs.Marshal(doc)
}

// finish publishes approved/result.md from the winning attempt's output and
// posts the notification, each under its own per-operation record.
func (p *Pipeline) finish(ctx context.Context, l *idempotency.Lease, rs ResultStore, t *event.Task, o Outcome, outKey string, m ossresult.Meta) error {
	_, err := l.Step(ctx, stepPublish, func(ctx context.Context) (string, error) {
		body, _, err := rs.Get(ctx, outKey)
		if err != nil {
			return "", classifyResultErr("read output", err)
		}
		var out Output
		if err := json.Unmarshal(body, &out); err != nil {
			return "", idempotency.Final("bad_output", fmt.Errorf("attempt output %s: %w", outKey, err))
		}
		key, err := ossresult.ApprovedKey(o.IdempotencyKey)
		if err != nil {
			return "", idempotency.Final("invalid_request", err)
		}
		if _, err := rs.PutOnce(ctx, key, []byte(out.Text), "text/markdown; charset=utf-8", m); err != nil {
			return "", classifyResultErr("publish", err)
		}
		return key, nil
	})
	if err != nil {
		return err
	}
	if t.Notify == nil {
		return nil
	}
	_, err = l.Step(ctx, stepNotify, func(ctx context.Context) (string, error) {
		body, _ := json.Marshal(o)
		if err := p.Notify.Post(ctx, t.Notify.URL, o.IdempotencyKey, o.RequestID, body); err != nil {
			return "", err
		}
		return "sent", nil
	})
	return err
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

// classifyResultErr maps result-store errors to the classes of DESIGN §4.9.
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
