// Package rawpipe is the floor of a first delivery: the external work a task
// cannot avoid, done once per task without any idempotency logic — an INSERT
// into a unique key, input.json, one model call, attempt-001/output.json, the
// UPDATE to SUCCEEDED, approved/result.md and (when asked) one notify POST —
// with the clients the function builds (ossresult's V4-signing bucket, an
// llm.Completer, notify.Client), so connection pools and request shapes
// match. scripts/loadtest runs it in the load generator and, behind the
// custom-runtime protocol, in a process of its own (scripts/loadtest/rawfn).
// Development only: nothing in the function imports it.
package rawpipe

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/llm"
	"github.com/idemgate/idemgate/handler/notify"
	"github.com/idemgate/idemgate/ossresult"
)

// ScratchTable is where the floors write: a copy of idempotency_record's
// layout (CREATE TABLE … LIKE), so that the INSERT and UPDATE touch the same
// indexes as the function's.
const ScratchTable = "loadtest_scratch"

// Step names a step of a task, for Pipeline.Skip (a test's dishonest floor).
type Step string

// The steps a task takes, in order.
const (
	StepInsert Step = "insert"
	StepPut    Step = "put" // the first PUT (input.json)
	StepModel  Step = "model"
	StepUpdate Step = "update"
	StepNotify Step = "notify"
)

// Pipeline does tasks against one database, bucket, model and notify
// client.
type Pipeline struct {
	DB     *sql.DB
	Bucket *ossresult.OSSBucket
	Model  llm.Completer
	Notify *notify.Client
	// Skip leaves a step out: only for the test that proves the load test's
	// check catches a floor that does less than a task (rawfn's
	// IDEMGATE_RAWFN_SKIP). Empty in every measurement.
	Skip Step
}

// Task is one task: its business key, request id, the content to
// summarise and, when not empty, where to post the notification.
type Task struct {
	Key, RequestID, Content, NotifyURL string
}

// Run does t in the function's order and object layout (ossresult's
// InputKey, AttemptKey, ApprovedKey); the PUTs are create-once
// (x-oss-forbid-overwrite), as the function's. The outcome is what the
// function answers for a first delivery.
func (p *Pipeline) Run(ctx context.Context, t Task) (handler.Outcome, error) {
	k := t.Key
	m := ossresult.Meta{IdempotencyKey: k, RequestID: t.RequestID}
	inputKey, err1 := ossresult.InputKey(k)
	outputKey, err2 := ossresult.AttemptKey(k, 1)
	approvedKey, err3 := ossresult.ApprovedKey(k)
	if err := errors.Join(err1, err2, err3); err != nil {
		return handler.Outcome{}, err
	}
	if err := p.step(StepInsert, func() error { return Insert(ctx, p.DB, k) }); err != nil {
		return handler.Outcome{}, fmt.Errorf("insert: %w", err)
	}
	input, _ := json.Marshal(map[string]any{"tenant_id": "acme", "task_type": "summarize", "operation": "summarize",
		"input_version": "v1", "input": map[string]any{"content": t.Content, "language": "en", "max_words": 60}})
	if err := p.step(StepPut, func() error { return p.put(ctx, inputKey, input, "application/json", m) }); err != nil {
		return handler.Outcome{}, err
	}
	var resp llm.Response
	err := p.step(StepModel, func() (err error) {
		resp, err = p.Model.Complete(ctx, llm.Request{Key: k, RequestID: t.RequestID,
			System: "You summarise documents faithfully. Answer in Markdown.",
			Prompt: "Summarise in at most 60 words:\n\n" + t.Content})
		return err
	})
	if err != nil {
		return handler.Outcome{}, fmt.Errorf("model: %w", err)
	}
	out, _ := json.MarshalIndent(handler.Output{IdempotencyKey: k, RequestID: t.RequestID, TaskType: "summarize",
		Attempt: 1, Model: resp.Model, Text: resp.Text}, "", "  ")
	if err := p.put(ctx, outputKey, out, "application/json", m); err != nil {
		return handler.Outcome{}, err
	}
	if err := p.step(StepUpdate, func() error { return Complete(ctx, p.DB, k) }); err != nil {
		return handler.Outcome{}, fmt.Errorf("update: %w", err)
	}
	if err := p.put(ctx, approvedKey, []byte(resp.Text), "text/markdown; charset=utf-8", m); err != nil {
		return handler.Outcome{}, err
	}
	o := handler.Outcome{IdempotencyKey: k, RequestID: t.RequestID, Status: "SUCCEEDED", Decision: "FIRST", Attempt: 1,
		ResultRef: p.Bucket.Ref(outputKey)}
	if t.NotifyURL == "" {
		return o, nil
	}
	body, _ := json.Marshal(o)
	if err := p.step(StepNotify, func() error { return p.Notify.Post(ctx, t.NotifyURL, k, t.RequestID, body) }); err != nil {
		return handler.Outcome{}, fmt.Errorf("notify: %w", err)
	}
	return o, nil
}

// step runs fn unless s is the step to skip.
func (p *Pipeline) step(s Step, fn func() error) error {
	if p.Skip == s {
		return nil
	}
	return fn()
}

func (p *Pipeline) put(ctx context.Context, key string, body []byte, contentType string, m ossresult.Meta) error {
	if _, err := p.Bucket.PutOnce(ctx, key, body, contentType, m); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// Insert is the claim's floor: one INSERT into the scratch table's unique
// key.
func Insert(ctx context.Context, db *sql.DB, k string) error {
	_, err := db.ExecContext(ctx, `INSERT INTO `+ScratchTable+` (request_id, status, attempt, fence,
 lease_owner, lease_until, payload_hash) VALUES (?, 'RUNNING', 1, 1, 'raw', NOW(3) + INTERVAL 60 SECOND, 'ph')`, k)
	return err
}

// Complete is the completion's floor: the fenced UPDATE to SUCCEEDED.
func Complete(ctx context.Context, db *sql.DB, k string) error {
	_, err := db.ExecContext(ctx, `UPDATE `+ScratchTable+` SET status = 'SUCCEEDED', result_ref = 'ref',
 lease_until = NULL, updated_at = NOW(3) WHERE request_id = ? AND fence = 1 AND status = 'RUNNING'`, k)
	return err
}
