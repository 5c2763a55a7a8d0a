package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/llm"
	"github.com/idemgate/idemgate/handler/notify"
	"github.com/idemgate/idemgate/internal/dev/modelfake"
	"github.com/idemgate/idemgate/ossresult"
)

// rawPipeline is the floor of a first delivery: the external work a task
// cannot avoid, done once per task without any idempotency logic, against
// the same MySQL, fake OSS, model endpoint and notify receiver as the
// function, with the clients the function builds (ossresult's V4-signing
// bucket, llm.HTTPClient, notify.Client), so connection pools and request
// shapes match.
type rawPipeline struct {
	db        *sql.DB
	bucket    *ossresult.OSSBucket
	model     *llm.HTTPClient
	notify    *notify.Client
	notifyURL string
}

func newRawPipeline(db *sql.DB, f *fakes) (*rawPipeline, error) {
	oss, err := ossresult.NewOSS(f.ossCfg)
	if err != nil {
		return nil, err
	}
	b, err := oss.With(f.creds)
	if err != nil {
		return nil, err
	}
	m, err := llm.NewHTTPClient(llm.Config{BaseURL: f.model.URL, APIKey: modelfake.APIKey, Model: "qwen-plus", Timeout: time.Minute})
	if err != nil {
		return nil, err
	}
	allow, err := notify.ParseAllowList(f.allowed)
	if err != nil {
		return nil, err
	}
	n := notify.New(notify.Options{Timeout: 10 * time.Second, Allow: allow, SigningSecret: f.signingSecret})
	return &rawPipeline{db: db, bucket: b, model: m, notify: n, notifyURL: f.notifyURL}, nil
}

// op is one task, in the function's order and object layout (ossresult's
// InputKey, AttemptKey, ApprovedKey): the INSERT into a unique key,
// input.json, the model call, attempt-001/output.json, the UPDATE to
// SUCCEEDED, approved/result.md, and (withNotify) one notify POST. The PUTs
// are create-once (x-oss-forbid-overwrite), as the function's.
func (p *rawPipeline) op(withNotify bool) func(context.Context, int) error {
	return func(ctx context.Context, _ int) error {
		k := randKey()
		m := ossresult.Meta{IdempotencyKey: k, RequestID: "raw-" + k[:16]}
		inputKey, err1 := ossresult.InputKey(k)
		outputKey, err2 := ossresult.AttemptKey(k, 1)
		approvedKey, err3 := ossresult.ApprovedKey(k)
		if err := errors.Join(err1, err2, err3); err != nil {
			return err
		}
		if err := rawInsert(ctx, p.db, k); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		input, _ := json.Marshal(map[string]any{"tenant_id": "acme", "task_type": "summarize", "operation": "summarize",
			"input_version": "v1", "input": map[string]any{"content": "[raw] " + filler, "language": "en", "max_words": 60}})
		if err := p.put(ctx, inputKey, input, "application/json", m); err != nil {
			return err
		}
		resp, err := p.model.Complete(ctx, llm.Request{Key: k, RequestID: m.RequestID,
			System: "You summarise documents faithfully. Answer in Markdown.",
			Prompt: "Summarise in at most 60 words:\n\n[raw] " + filler})
		if err != nil {
			return fmt.Errorf("model: %w", err)
		}
		out, _ := json.MarshalIndent(handler.Output{IdempotencyKey: k, RequestID: m.RequestID, TaskType: "summarize",
			Attempt: 1, Model: resp.Model, Text: resp.Text}, "", "  ")
		if err := p.put(ctx, outputKey, out, "application/json", m); err != nil {
			return err
		}
		if err := rawComplete(ctx, p.db, k); err != nil {
			return fmt.Errorf("update: %w", err)
		}
		if err := p.put(ctx, approvedKey, []byte(resp.Text), "text/markdown; charset=utf-8", m); err != nil {
			return err
		}
		if !withNotify {
			return nil
		}
		body, _ := json.Marshal(handler.Outcome{IdempotencyKey: k, RequestID: m.RequestID, Status: "SUCCEEDED",
			Decision: "FIRST", Attempt: 1, ResultRef: p.bucket.Ref(outputKey)})
		if err := p.notify.Post(ctx, p.notifyURL, k, m.RequestID, body); err != nil {
			return fmt.Errorf("notify: %w", err)
		}
		return nil
	}
}

func (p *rawPipeline) put(ctx context.Context, key string, body []byte, contentType string, m ossresult.Meta) error {
	if _, err := p.bucket.PutOnce(ctx, key, body, contentType, m); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// rawInsert is the claim's floor: one INSERT into the scratch table's
// unique key.
func rawInsert(ctx context.Context, db *sql.DB, k string) error {
	_, err := db.ExecContext(ctx, `INSERT INTO `+scratchTable+` (request_id, status, attempt, fence,
 lease_owner, lease_until, payload_hash) VALUES (?, 'RUNNING', 1, 1, 'raw', NOW(3) + INTERVAL 60 SECOND, 'ph')`, k)
	return err
}

// rawComplete is the completion's floor: the fenced UPDATE to SUCCEEDED.
func rawComplete(ctx context.Context, db *sql.DB, k string) error {
	_, err := db.ExecContext(ctx, `UPDATE `+scratchTable+` SET status = 'SUCCEEDED', result_ref = 'ref',
 lease_until = NULL, updated_at = NOW(3) WHERE request_id = ? AND fence = 1 AND status = 'RUNNING'`, k)
	return err
}
