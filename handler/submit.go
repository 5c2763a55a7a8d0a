package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idemgate/idemgate/handler/event"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/keys"
)

// HTTPEventSource is the event_source a task submitted over HTTP records.
const HTTPEventSource = "idemgate/http"

// Submit runs a task submitted over HTTP (POST /tasks, docs/api.md): data is
// the task's data object as an event carries it, key the request's
// Idempotency-Key. The key is the task's idempotency_key, so K is what an
// event of the same tenant naming that idempotency_key derives
// (docs/design.md §4): a task submitted over HTTP and delivered again as an
// event runs once. A body naming another idempotency_key is refused.
func (p *Pipeline) Submit(ctx context.Context, data []byte, key string, meta Meta) (o Outcome) {
	defer func() {
		if v := recover(); v != nil {
			p.Log.ErrorContext(ctx, "panic while handling the submission", "panic", fmt.Sprint(v))
			o = failure(Outcome{RequestID: meta.RequestID}, idempotency.Retryable("panic", fmt.Errorf("panic: %v", v)))
		}
	}()
	if meta.RequestID == "" {
		meta.RequestID = newOwner("no-request-id")
	}
	ctx = TraceInvocation(ctx, meta, p.Log)
	t, err := p.taskOf(data, key, meta)
	if err != nil {
		o := failure(Outcome{RequestID: meta.RequestID}, err)
		p.Log.WarnContext(ctx, "submission rejected", "errorType", o.ErrorType, "error", o.ErrorMessage, "body_bytes", len(data))
		return o
	}
	return p.runTask(ctx, t, meta, meta.RequestID)
}

// msgKeyDiffers refuses a body whose idempotency_key is not the header's.
// The header is required (docs/api.md, as the IETF Idempotency-Key draft
// has a route that requires it answer 400 without it): the body's key alone
// is key-missing, so the message offers only what is accepted.
const msgKeyDiffers = "idempotency_key in the body differs from the Idempotency-Key header: " +
	"send the same key in both, or leave it out of the body (the header is required)"

// taskOf reads data as the data of a task event whose idempotency_key is key,
// with the rules an event's data meets (event.TaskFromData).
func (p *Pipeline) taskOf(data []byte, key string, meta Meta) (*event.Task, error) {
	opts := event.Options{KeyFallback: p.KeyFallback}
	t, err := event.TaskFromData(data, opts)
	switch {
	case err != nil:
		return nil, err
	case t.IdempotencyKey == "":
		// The data an event naming the key carries: the same fingerprint, and
		// the key held to the rules of the field.
		if t, err = event.TaskFromData(withMember(t.Data, "idempotency_key", key), opts); err != nil {
			return nil, err
		}
	case t.IdempotencyKey != key:
		return nil, idempotency.Final(event.TypeInvalidRequest,
			errors.New(msgKeyDiffers))
	}
	t.EventSource, t.EventID = HTTPEventSource, meta.RequestID
	return t, nil
}

// withMember adds "name": value to a JSON object's bytes.
func withMember(obj []byte, name, value string) []byte {
	n, _ := json.Marshal(name)
	v, _ := json.Marshal(value)
	out := append(append(append([]byte{'{'}, n...), ':'), v...)
	obj = bytes.TrimSpace(obj) // an object: event.TaskFromData said so
	if len(bytes.TrimSpace(obj[1:len(obj)-1])) == 0 {
		return append(out, '}')
	}
	return append(append(out, ','), obj[1:]...)
}

// TaskState is what GET /tasks/{idempotency_key} answers: the record's state
// without its internals (no lease owner, no secrets: records hold none).
type TaskState struct {
	IdempotencyKey string `json:"idempotency_key"`
	Status         string `json:"status"`
	Attempt        int    `json:"attempt"`
	ResultRef      string `json:"result_ref,omitempty"`
	Finish         string `json:"finish,omitempty"`
	// Purged: the record was retired to its tombstone (docs/design.md §6),
	// which answers repeats with the same outcome until the task's objects
	// have expired.
	Purged       bool   `json:"purged,omitempty"`
	ErrorType    string `json:"errorType,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
	CreatedAt    string `json:"created_at"`
	UpdatedAt    string `json:"updated_at"`
}

// ErrKeyedByExpression: a task was asked for by its client key, but
// KEY_JMESPATH derives K from the task's data, which the key alone does not
// give (docs/design.md §4): only K names such a task.
var ErrKeyedByExpression = errors.New("KEY_JMESPATH derives the task's key from its data: look it up by K")

// Task reads K's state; ErrUnknownKey when there is no record. With a
// tenant, id is the client's idempotency key and K is derived from both,
// as Submit derives it: not under KEY_JMESPATH (ErrKeyedByExpression).
func (p *Pipeline) Task(ctx context.Context, id, tenant string) (TaskState, error) {
	k := id
	if tenant != "" && p.Keys.Key != nil {
		return TaskState{}, ErrKeyedByExpression
	}
	if tenant != "" {
		var err error
		if k, err = keys.Explicit(tenant, id); err != nil {
			return TaskState{}, idempotency.Final(event.TypeInvalidRequest, err)
		}
	}
	rec, err := p.Engine.Get(ctx, k)
	if errors.Is(err, driver.ErrNotFound) {
		return TaskState{}, ErrUnknownKey
	}
	if err != nil {
		return TaskState{}, err
	}
	return TaskState{IdempotencyKey: rec.Key, Status: string(rec.Status), Attempt: rec.Attempt, ResultRef: rec.ResultRef,
		Finish: string(rec.Finish), Purged: rec.Tombstone, ErrorType: rec.LastErrorCode, ErrorMessage: rec.LastError,
		CreatedAt: rec.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z"), UpdatedAt: rec.UpdatedAt.UTC().Format("2006-01-02T15:04:05.000Z")}, nil
}
