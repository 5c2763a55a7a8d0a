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
	"github.com/idemgate/idemgate/idempotency/keys"
	"github.com/idemgate/idemgate/internal/logx"
	"github.com/idemgate/idemgate/ossresult"
)

// MaintStore is what the sweeper, replay and stats need from the durable
// store (mysqlstore and boltstore implement it).
type MaintStore interface {
	Candidates(ctx context.Context, limit int, grace time.Duration) ([]idempotency.Record, error)
	Reset(ctx context.Context, key string, rp idempotency.Replay) (idempotency.Record, error)
	Replays(ctx context.Context, key string) ([]idempotency.Replay, error)
	Stats(ctx context.Context, since time.Time) ([]idempotency.StatRow, error)
}

// SweepOptions bound one sweep.
type SweepOptions struct {
	Limit  int           // records per run (default 50)
	Budget time.Duration // wall time per run (default 40 s, inside a 60 s timer)
	Grace  time.Duration // a failed or finished record is left to FC's own retry this long (0: none)
}

// SweepReport is the sweep's answer (the timer invocation's outcome).
type SweepReport struct {
	Scanned  int       `json:"scanned"`
	Redriven int       `json:"redriven"`
	Finished int       `json:"finished"` // SUCCEEDED records whose publish/notify were completed
	Skipped  int       `json:"skipped"`  // left for the next run (budget spent)
	Results  []Outcome `json:"results"`
}

func newOwner(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + ":" + hex.EncodeToString(b)
}

// Sweep re-drives stuck tasks from their stored input, each through a
// normal fenced claim: RUNNING past its lease (the worker died), waiting in
// FAILED_RETRYABLE or RECEIVED, and SUCCEEDED without its approved object.
// Two sweepers at once are safe: the claims arbitrate.
func (p *Pipeline) Sweep(ctx context.Context, meta Meta, o SweepOptions) (SweepReport, error) {
	if p.Maint == nil {
		return SweepReport{}, idempotency.Final("unsupported", errors.New("the store has no maintenance operations"))
	}
	if o.Limit <= 0 {
		o.Limit = 50
	}
	if o.Budget <= 0 {
		o.Budget = 40 * time.Second
	}
	end := time.Now().Add(o.Budget)
	cands, err := p.Maint.Candidates(ctx, o.Limit, o.Grace)
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
		var out Outcome
		if rec.Status == idempotency.StatusSucceeded {
			out = p.refinish(ctx, rec, meta, owner)
			rep.Finished++
		} else {
			out = p.redrive(ctx, rec, meta, fmt.Sprintf("%s#%d", owner, i))
			rep.Redriven++
		}
		rep.Results = append(rep.Results, out)
	}
	p.Log.InfoContext(ctx, "sweep done", "scanned", rep.Scanned, "redriven", rep.Redriven, "finished", rep.Finished,
		"skipped", rep.Skipped, "oldest_age_s", oldestAgeSeconds(cands))
	return rep, nil
}

// storedTask rebuilds the task of rec from its input.json.
func (p *Pipeline) storedTask(ctx context.Context, rs ResultStore, rec idempotency.Record) (*event.Task, error) {
	key, err := ossresult.InputKey(rec.Key)
	if err != nil {
		return nil, idempotency.Final("invalid_request", err)
	}
	body, _, err := rs.Get(ctx, key)
	if err != nil {
		return nil, classifyResultErr("read input", err)
	}
	var doc struct {
		TenantID       string          `json:"tenant_id"`
		TaskType       string          `json:"task_type"`
		Operation      string          `json:"operation"`
		InputVersion   string          `json:"input_version"`
		Input          json.RawMessage `json:"input"`
		IdempotencyKey string          `json:"idempotency_key"`
		Notify         *event.Notify   `json:"notify"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, idempotency.Final("bad_input", fmt.Errorf("input.json of %s: %w", rec.Key, err))
	}
	data, _ := json.Marshal(map[string]any{"tenant_id": doc.TenantID, "task_type": doc.TaskType, "operation": doc.Operation,
		"input": doc.Input, "input_version": doc.InputVersion, "request_id": rec.OriginRequestID})
	t := &event.Task{TenantID: doc.TenantID, TaskType: doc.TaskType, Operation: doc.Operation, Input: doc.Input,
		InputVersion: doc.InputVersion, RequestID: rec.OriginRequestID, IdempotencyKey: doc.IdempotencyKey,
		Notify: doc.Notify, Data: data, EventSource: rec.EventSource, EventID: rec.EventID}
	d, err := keys.Derive(keys.Fields{TenantID: t.TenantID, TaskType: t.TaskType, Operation: t.Operation, Input: t.Input,
		InputVersion: t.InputVersion, IdempotencyKey: t.IdempotencyKey})
	if err != nil || d.Key != rec.Key {
		return nil, idempotency.Final("bad_input", fmt.Errorf("input.json of %s derives another key", rec.Key))
	}
	return t, nil
}

// inputHorizon is how long a failed record without input.json is left for
// FC's own retries (which carry the event) before the sweeper gives up on it.
const inputHorizon = time.Hour

// redrive runs rec's task again from its stored input under owner.
//
// A record that cannot be re-driven — no input.json (the worker died before
// saving it), or an input that no longer parses or names an unknown task
// type — is taken over and recorded FAILED_FINAL, so that it leaves the
// sweeper's queue and its delivery ends in the dead-letter queue, from which
// it is replayed. A failed record without input is first left to FC's retries
// for inputHorizon.
func (p *Pipeline) redrive(ctx context.Context, rec idempotency.Record, meta Meta, owner string) Outcome {
	ctx = logx.With(ctx, slog.String("idempotency_key", rec.Key), slog.String("request_id", rec.OriginRequestID))
	o := Outcome{IdempotencyKey: rec.Key, Status: string(rec.Status), Attempt: rec.Attempt, RequestID: rec.OriginRequestID}
	rs, err := p.Results(ctx, meta.Credentials)
	if err != nil {
		return failure(o, classifyResultErr("result store", err))
	}
	t, err := p.storedTask(ctx, rs, rec)
	if err == nil {
		if _, ok := p.Tasks.Get(t.TaskType); !ok {
			err = idempotency.Final("invalid_request", fmt.Errorf("unknown task_type %q", t.TaskType))
		}
	}
	switch class, _ := idempotency.Classify(err); {
	case err == nil:
		return p.runTask(ctx, t, meta, owner)
	case errors.Is(err, ossresult.ErrNotFound):
		if rec.Status != idempotency.StatusRunning && time.Since(rec.UpdatedAt) < inputHorizon {
			return failure(o, idempotency.Retryable("input_missing", errors.New("no input.json yet: left to FC's retry")))
		}
		return p.abandon(ctx, rs, rec, owner, idempotency.Final("input_missing",
			errors.New("no input.json (the worker died before saving it): replay from the dead-letter queue")))
	case class == idempotency.ClassFinal:
		return p.abandon(ctx, rs, rec, owner, err)
	default:
		return failure(o, err)
	}
}

// abandon takes rec over and records cause FAILED_FINAL.
func (p *Pipeline) abandon(ctx context.Context, rs ResultStore, rec idempotency.Record, owner string, cause error) Outcome {
	o := Outcome{IdempotencyKey: rec.Key, Status: string(rec.Status), Attempt: rec.Attempt, RequestID: rec.OriginRequestID}
	res, l, err := p.Engine.Claim(ctx, idempotency.ClaimRequest{Key: rec.Key, PayloadHash: rec.PayloadHash, Owner: owner, Try: -1})
	if err != nil {
		return failure(o, err)
	}
	if l == nil { // someone else holds it now (FC's retry): nothing to abandon
		return failure(o, idempotency.Retryable("in_progress", fmt.Errorf("%w (%s)", idempotency.ErrInProgress, res.Decision)))
	}
	if _, code := idempotency.Classify(cause); code == "input_missing" {
		// Between the listing and the claim, a retry may have saved the input.
		if key, kerr := ossresult.InputKey(rec.Key); kerr == nil {
			if _, _, gerr := rs.Get(ctx, key); gerr == nil {
				_, _ = l.Fail(ctx, idempotency.Retryable("input_appeared", errors.New("input.json appeared; the next sweep re-drives it")))
				return failure(o, idempotency.Retryable("input_appeared", errors.New("input.json appeared")))
			}
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

// refinish completes publish and notify of a SUCCEEDED record.
func (p *Pipeline) refinish(ctx context.Context, rec idempotency.Record, meta Meta, owner string) Outcome {
	ctx = logx.With(ctx, slog.String("idempotency_key", rec.Key), slog.String("request_id", rec.OriginRequestID))
	o := Outcome{IdempotencyKey: rec.Key, Status: string(rec.Status), Duplicate: true, Decision: string(idempotency.DecisionRepeatDone),
		Attempt: rec.Attempt, ResultRef: rec.ResultRef, RequestID: rec.OriginRequestID}
	rs, err := p.Results(ctx, meta.Credentials)
	if err != nil {
		return failure(o, classifyResultErr("result store", err))
	}
	t, err := p.storedTask(ctx, rs, rec)
	if err != nil {
		return failure(o, err)
	}
	tt, ok := p.Tasks.Get(t.TaskType)
	if !ok {
		return failure(o, idempotency.Final("invalid_request", fmt.Errorf("unknown task_type %q", t.TaskType)))
	}
	step, err := p.Engine.Get(ctx, keys.OpKey(rec.Key, tt.Steps[len(tt.Steps)-1].Name))
	if err != nil {
		return failure(o, err)
	}
	if err := p.finish(ctx, p.Engine.Attach(rec, owner, meta.RetryCount), rs, t, o, step.ResultRef,
		ossresult.Meta{IdempotencyKey: rec.Key, RequestID: rec.OriginRequestID}); err != nil {
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
// failed or abandoned record is reset (audited) and claimed again; a
// SUCCEEDED one answers its result and only completes a missing publish or
// notify: a replay never yields a second effective result.
func (p *Pipeline) ReplayKey(ctx context.Context, key string, r ReplayRequest, meta Meta) (Outcome, error) {
	if err := r.check(); err != nil {
		return Outcome{}, err
	}
	prior, err := p.Maint.Reset(ctx, key, idempotency.Replay{Reason: r.Reason, Operator: r.Operator, Source: "key"})
	if err != nil {
		return Outcome{}, fmt.Errorf("replay %s: %w", key, err)
	}
	p.Engine.Forget(ctx, key)
	owner := newOwner("replay")
	switch prior.Status {
	case "":
		return Outcome{}, fmt.Errorf("replay %s: %w (replay its dead letter with --dlq instead)", key, ErrUnknownKey)
	case idempotency.StatusSucceeded:
		return p.refinish(ctx, prior, meta, owner), nil
	}
	return p.redrive(ctx, prior, meta, owner), nil
}

// ReplayDLQ re-drives a dead letter: an FC async failure-destination message
// (its requestPayload is the original event) or an EventBridge dead-letter
// event (the event itself, single or batch). Every task in it is replayed
// under its original key.
func (p *Pipeline) ReplayDLQ(ctx context.Context, body []byte, r ReplayRequest, meta Meta) ([]Outcome, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	inv, err := event.Parse(body)
	if inv == nil {
		return nil, err
	}
	if inv.Kind == event.KindFailureDestination {
		if inv, err = inv.Original(); inv == nil {
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
		d, derr := keys.Derive(keys.Fields{TenantID: t.TenantID, TaskType: t.TaskType, Operation: t.Operation,
			Input: t.Input, InputVersion: t.InputVersion, IdempotencyKey: t.IdempotencyKey})
		if derr != nil {
			outs = append(outs, failure(Outcome{RequestID: t.RequestID}, idempotency.Final("invalid_request", derr)))
			continue
		}
		prior, err := p.Maint.Reset(ctx, d.Key, idempotency.Replay{Reason: r.Reason, Operator: r.Operator, Source: "dlq"})
		if err != nil {
			outs = append(outs, failure(Outcome{IdempotencyKey: d.Key, RequestID: t.RequestID}, err))
			continue
		}
		p.Engine.Forget(ctx, d.Key)
		if prior.Status == idempotency.StatusSucceeded { // the result stands; finish publish and notify
			outs = append(outs, p.refinish(ctx, prior, meta, fmt.Sprintf("%s#%d", owner, i)))
			continue
		}
		outs = append(outs, p.runTask(ctx, t, meta, fmt.Sprintf("%s#%d", owner, i)))
	}
	return outs, nil
}
