package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/idemgate/idemgate/handler/event"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/jcs"
	"github.com/idemgate/idemgate/idempotency/keys"
	"github.com/idemgate/idemgate/ossresult"
)

// storedInput is input.json: what a re-drive needs to run the task again,
// and what decides whether the task notifies (the first stored input
// stands, whatever a later double submit says).
type storedInput struct {
	TenantID       string          `json:"tenant_id"`
	TaskType       string          `json:"task_type"`
	Operation      string          `json:"operation"`
	InputVersion   string          `json:"input_version"`
	Input          json.RawMessage `json:"input"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Notify         *event.Notify   `json:"notify,omitempty"`
	// KeyFingerprint: K was derived from this fingerprint (KEY_FALLBACK).
	KeyFingerprint string `json:"key_fingerprint,omitempty"`
	// KeyJMESPath and PayloadJMESPath: the expressions K and the payload
	// hash were selected with, and Data the event data they selected from
	// (only with one of them: the default keys need neither).
	KeyJMESPath     string          `json:"key_jmespath,omitempty"`
	PayloadJMESPath string          `json:"payload_jmespath,omitempty"`
	Data            json.RawMessage `json:"data,omitempty"`
}

// inputDoc is input.json of t, canonical JSON: storedInput as jcs.Marshal
// writes it (TestInputDocIsCanonical), member by member in its canonical
// order, so that only the input (and data) are canonicalised, not the
// whole document encoded and parsed again on every first delivery.
func inputDoc(t *event.Task, inputVersion, keyFP string, r KeyRules) ([]byte, error) {
	var data json.RawMessage
	var keyExpr, payloadExpr string
	if keyFP == "" && (r.Key != nil || r.Payload != nil) {
		keyExpr, payloadExpr, data = expr(r.Key), expr(r.Payload), t.Data
	}
	input, err := canonicalRaw(t.Input)
	if err != nil {
		return nil, err
	}
	w := docWriter{b: make([]byte, 0, len(input)+len(data)+512)}
	if len(data) > 0 {
		if data, err = canonicalRaw(data); err != nil {
			return nil, err
		}
		w.raw("data", data)
	}
	w.str("idempotency_key", t.IdempotencyKey, true)
	w.raw("input", input)
	w.str("input_version", inputVersion, false)
	w.str("key_fingerprint", keyFP, true)
	w.str("key_jmespath", keyExpr, true)
	if t.Notify != nil {
		w.raw("notify", jcs.AppendStringObject(nil, "url", t.Notify.URL))
	}
	w.str("operation", t.Operation, false)
	w.str("payload_jmespath", payloadExpr, true)
	w.str("task_type", t.TaskType, false)
	w.str("tenant_id", t.TenantID, false)
	return append(w.b, '}'), nil
}

// canonicalRaw is a raw JSON member as encoding/json and then JCS write
// it: absent is null.
func canonicalRaw(v json.RawMessage) ([]byte, error) {
	if v == nil {
		return []byte("null"), nil
	}
	return jcs.Canonicalize(v)
}

// docWriter writes a canonical JSON object whose members come in
// canonical (sorted) order.
type docWriter struct{ b []byte }

func (w *docWriter) name(n string) {
	if len(w.b) == 0 {
		w.b = append(w.b, '{')
	} else {
		w.b = append(w.b, ',')
	}
	w.b, _ = jsontext.AppendQuote(w.b, n)
	w.b = append(w.b, ':')
}

func (w *docWriter) raw(n string, v []byte) { w.name(n); w.b = append(w.b, v...) }

// str writes a string member, none when omitEmpty and v is empty. Invalid
// UTF-8 comes out as U+FFFD, as encoding/json writes it.
func (w *docWriter) str(n, v string, omitEmpty bool) {
	if omitEmpty && v == "" {
		return
	}
	w.name(n)
	w.b, _ = jsontext.AppendQuote(w.b, v)
}

// saveInput writes t's input.json create-once and returns the notify
// setting of the input that stands: t's own, or, when a double submit got
// there first with another notify setting, the stored one.
func (p *Pipeline) saveInput(ctx context.Context, t *task) (*event.Notify, error) {
	key, err := ossresult.InputKey(t.d.Key)
	if err != nil {
		return nil, idempotency.Final("invalid_request", err)
	}
	doc, err := inputDoc(t.Task, t.d.InputVersion, t.keyFP, t.keys)
	if err != nil {
		return nil, idempotency.Final("invalid_request", err)
	}
	_, err = t.rs.PutOnce(ctx, key, doc, "application/json", t.meta)
	switch {
	case err == nil:
		return t.Notify, nil
	case errors.Is(err, ossresult.ErrConflict):
		in, err := readInput(ctx, t.rs, t.d.Key)
		if err != nil {
			return nil, err
		}
		return in.Notify, samePayload(in, t.d)
	}
	return nil, classifyResultErr("save input", err)
}

// foreignObjectsCode: an object of K belongs to another payload, a previous
// life of the key whose tombstone went while its objects stayed.
const foreignObjectsCode = "foreign_objects"

// samePayload refuses, FINAL, a stored input of another payload than d's:
// a previous life of the key left it, and its notify setting must not
// decide this life's (docs/design.md §8).
func samePayload(in storedInput, d keys.Derived) error {
	got, _, err := in.derive(in.task())
	if err == nil && driver.SamePayload(got.PayloadHash, d.PayloadHash, d.LegacyPayloadHash) {
		return nil
	}
	// Not the other payload's hash: this answer is the other request's
	// (docs/design.md §14.9); main inspect shows the objects.
	return idempotency.Final(foreignObjectsCode, fmt.Errorf("input.json of %s holds another payload than %s: a previous "+
		"life of the key left it (the bucket keeps objects longer than the purge keeps tombstones: docs/operations.md)",
		d.Key, d.PayloadHash))
}

// derive derives t's keys (t rebuilt from in) as they were derived when in
// was saved: with the expressions it records (KEY_JMESPATH,
// PAYLOAD_JMESPATH) over the data it records, whatever the deployment says
// now.
func (in storedInput) derive(t *event.Task) (keys.Derived, keying, error) {
	k, err := in.keying()
	if err != nil {
		return keys.Derived{}, k, idempotency.Final("bad_input", fmt.Errorf("input.json: %w", err))
	}
	if in.Data != nil {
		t.Data = in.Data
	}
	d, _, err := k.rules.derive(t, k.keyFP)
	return d, k, err
}

// task is the task event in rebuilds (without its request id and event
// identity, which the record keeps).
func (in storedInput) task() *event.Task {
	return &event.Task{TenantID: in.TenantID, TaskType: in.TaskType, Operation: in.Operation, Input: in.Input,
		InputVersion: in.InputVersion, IdempotencyKey: in.IdempotencyKey, Notify: in.Notify}
}

// readInput reads K's input.json.
func readInput(ctx context.Context, rs ResultStore, k string) (storedInput, error) {
	var in storedInput
	key, err := ossresult.InputKey(k)
	if err != nil {
		return in, idempotency.Final("invalid_request", err)
	}
	body, _, err := rs.Get(ctx, key)
	if err != nil {
		return in, classifyResultErr("read input", err)
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return in, idempotency.Final("bad_input", fmt.Errorf("input.json of %s: %w", k, err))
	}
	return in, nil
}

// salvage completes a key whose attempt budget is spent from the newest
// output an earlier attempt saved (a worker that died after saving it), or
// records the budget spent. It never runs a step.
func (p *Pipeline) salvage(ctx context.Context, rs ResultStore, d keys.Derived, attempt int) (string, error) {
	key, err := priorOutput(ctx, rs, d.Key, d, attempt)
	switch {
	case err != nil:
		return "", err
	case key != "":
		return rs.Ref(key), nil
	}
	return "", idempotency.Final(driver.ExhaustedCode, fmt.Errorf("attempt budget spent after %d attempts", attempt))
}

// objectsExpiredCode: a finish needs an object its task saved (input.json,
// the output result_ref names) and it is gone: it expired (the bucket's
// lifecycle rule) before the finish ran. FINAL: nothing can bring it back.
const objectsExpiredCode = "objects_expired"

// expired makes a missing object of a finished task FINAL objects_expired.
func expired(err error) error {
	if errors.Is(err, ossresult.ErrNotFound) {
		return idempotency.Final(objectsExpiredCode, fmt.Errorf("%w: it expired before the finish ran (docs/operations.md)", err))
	}
	return err
}

// finishOwn finishes what this delivery completed (it holds the finish),
// or, for a retry of the same FC request whose earlier try completed and
// died, claims the finish first (claimFinish): a known later try (try >
// 0), or a delivery of the request that completed the key (holder: the
// duplicate's answer names its owner) whatever its try says — over the go1
// runtime every try reads 0, without x-fc-retry-count it is -1, and
// acknowledged such a retry would leave a dead holder's POST to the
// sweeper, and a finish the store recorded FAILED behind a late Redis
// mirror undelivered to the DLQ. Any other duplicate leaves the finish to
// its holder, and past its lease to the sweeper.
func (p *Pipeline) finishOwn(ctx context.Context, t *task, o Outcome, l *idempotency.Lease, notify *event.Notify,
	owner string, try int, holder bool) error {
	var f *idempotency.Finisher
	switch {
	case l != nil:
		f = l.Finisher()
	case try > 0 || holder:
		held, err := p.claimFinish(ctx, t, owner, try)
		if try <= 0 && errors.Is(err, idempotency.ErrRetryLater) && !notifies(ctx, t) {
			// Beside its request's live finish that only publishes (the
			// sweeper repeats it at no cost), and may be done already, its
			// mark waiting in the holder's batch (Finisher.DoneLater):
			// answered retry_later, the copy would wait for nothing.
			return nil
		}
		if held == nil || err != nil {
			return err
		}
		f = held
	}
	if f == nil { // no finish to do (idempotency disabled, or no finish pending)
		return nil
	}
	if l == nil || l.Salvage() { // the input was saved by an earlier try: it decides
		in, err := readInput(ctx, t.rs, t.d.Key)
		if err != nil {
			return p.finishFailed(ctx, f, expired(err))
		}
		notify = in.Notify
	}
	return p.finish(ctx, f, t.rs, o, notify, t.meta, t.saved)
}

// notifies: t's stored input asks for a notification, or cannot be read
// (the finish may then have one to post).
func notifies(ctx context.Context, t *task) bool {
	in, err := readInput(ctx, t.rs, t.d.Key)
	return err != nil || in.Notify != nil
}

// claimFinish asks the store for t's pending finish for owner at try: the
// Finisher when granted; nil and nil when another holder carries it or it is
// done; the FINAL failure a failed finish recorded; retry_later beside its
// own request's live finish.
func (p *Pipeline) claimFinish(ctx context.Context, t *task, owner string, try int) (*idempotency.Finisher, error) {
	res, held, err := p.Engine.ClaimFinish(ctx, t.d.Key, owner, try)
	switch {
	case err != nil:
		return nil, err
	case held == nil && res.Record.FailedFinish(): // the store's answer, whatever Redis said: FC's retry ends in the DLQ
		return nil, idempotency.Final(res.Record.LastErrorCode, errors.New(res.Record.LastError))
	case held == nil && res.Decision == idempotency.DecisionRepeatOther && owner != "" && res.Record.LeaseOwner == owner:
		// Its own request's live finish (a copy of the holder's try, which
		// the store marked, or a try without a known count): as a task
		// claim, answered retry_later, never acknowledged — were the holder
		// to die, FC's retry of this copy is what takes the finish over
		// (docs/design.md §14).
		return nil, idempotency.Retryable(retryLater, fmt.Errorf("%w (its own request's finish is in progress)", idempotency.ErrRetryLater))
	}
	return held, nil
}

// finish publishes approved/result.md from the output result_ref names and
// posts the notification the stored input asks for, then records the finish
// done. A FINAL failure is recorded (an operator's replay reopens it); a
// retryable one leaves the finish to the next holder.
func (p *Pipeline) finish(ctx context.Context, f *idempotency.Finisher, rs ResultStore, o Outcome, notify *event.Notify,
	m ossresult.Meta, saved savedOutput) (err error) {
	defer func(ctx context.Context) {
		// A bug in the finish (a notifier's, say) is recorded FINAL: the
		// result stands, an operator's replay reopens the finish. Unrecorded,
		// every FC retry and sweep would take it up and post again, and the
		// sweeper would meet it first on every run.
		if v := recover(); v != nil {
			p.Log.ErrorContext(ctx, "panic while finishing", "panic", fmt.Sprint(v))
			err = p.finishFailed(ctx, f, idempotency.Final("panic", fmt.Errorf("panic in the finish: %v", v)))
		}
	}(ctx)
	if err := publish(ctx, rs, o.IdempotencyKey, o.ResultRef, m, saved); err != nil {
		return p.finishFailed(ctx, f, expired(err))
	}
	if p.Fault != nil {
		p.Fault("after_publish")
	}
	if notify == nil {
		f.DoneLater() // a repeat would only publish again: batched with others
		return nil
	}
	// At most once (docs/design.md §13): post only while the finish is
	// still ours, and give up before another holder may take it over (the
	// writes that follow are detached from this bound).
	held, release, err := f.Hold(ctx)
	if errors.Is(err, idempotency.ErrLeaseLost) {
		// Another holder has the finish: it notifies — or it failed FINAL,
		// which every delivery answers (§10). Carried by nobody, FC's retry
		// takes it up: nothing was posted.
		carried, answer := p.takenOver(ctx, f)
		if !carried {
			return err
		}
		if answer == nil {
			p.Log.WarnContext(ctx, "finish taken over by another holder before the notification; it notifies")
		}
		return answer
	}
	if err != nil {
		return p.finishFailed(ctx, f, err)
	}
	defer release()
	ctx = held
	if err := p.postNotify(ctx, notify, notification(o, f.OriginRequestID)); err != nil {
		return p.finishFailed(ctx, f, err)
	}
	if err := f.Done(ctx); err != nil {
		// Published and notified; only the record of it is missing. The
		// finish is taken up again after its lease: a second notification at
		// worst, with the same Idempotency-Key.
		p.Log.WarnContext(ctx, "finish done but not recorded", "error", err.Error())
	}
	return nil
}

// finishFailed records cause on f's finish and answers it.
func (p *Pipeline) finishFailed(ctx context.Context, f *idempotency.Finisher, cause error) error {
	if err := f.Fail(ctx, cause); err != nil {
		return p.unrecorded(ctx, f, cause, err)
	}
	if class, code := idempotency.Classify(cause); class == idempotency.ClassFinal {
		// The alert's line: the result stands but was not published or
		// notified; the record stays (not purged) until an operator acts.
		p.Log.ErrorContext(ctx, "finish failed", "errorType", code, "error", cause.Error())
	}
	return cause
}

// unrecorded answers a finish failure the store did not record (err). When
// another holder took the finish over (the store fenced it out) and carries
// it, the record answers (takenOver). Anything else — the other holder let
// go, the store failed — is cause made retryable, so that FC retries what
// nobody carries: a FINAL answer would say the finish is recorded failed.
func (p *Pipeline) unrecorded(ctx context.Context, f *idempotency.Finisher, cause, err error) error {
	if errors.Is(err, idempotency.ErrLeaseLost) {
		if carried, answer := p.takenOver(ctx, f); carried {
			if answer == nil {
				p.Log.WarnContext(ctx, "finish taken over by another holder before this one failed; it finishes", "error", cause.Error())
			}
			return answer
		}
	}
	p.Log.WarnContext(ctx, "finish failure not recorded", "error", err.Error())
	_, code := idempotency.Classify(cause)
	return idempotency.Retryable(code, cause)
}

// takenOver reads the record of a finish f lost to another holder. The
// finish is carried when it is done, failed (answer: that FINAL failure,
// which every delivery answers) or pending under a live lease; otherwise,
// or unread, nobody carries it.
func (p *Pipeline) takenOver(ctx context.Context, f *idempotency.Finisher) (carried bool, answer error) {
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordReadTimeout)
	defer cancel()
	rec, now, err := p.Engine.GetNow(c, f.Key)
	switch {
	case err != nil:
		return false, nil
	case rec.FailedFinish():
		return true, idempotency.Final(rec.LastErrorCode, errors.New(rec.LastError))
	}
	// Any live lease on a pending finish is another holding's, a copy of
	// this very try included: the store refused this one's fence. Live by
	// the store's clock: were this process's clock ahead, a copy's live
	// lease would look ended, and FC's next try of this request would take
	// it over from the copy and post a second time.
	return rec.Finish == driver.FinishDone || rec.Finish == driver.FinishPending && rec.LeaseUntil.After(now), nil
}

// publish writes approved/result.md from the output object ref names (read
// back unless this delivery saved it); a create-once object, so publishing
// again is a no-op.
func publish(ctx context.Context, rs ResultStore, k, ref string, m ossresult.Meta, saved savedOutput) error {
	outKey, ok := strings.CutPrefix(ref, strings.TrimSuffix(rs.Ref("x"), "x"))
	if !ok {
		return idempotency.Final("bad_output", fmt.Errorf("result_ref %s is not an object of this result store", ref))
	}
	out := Output{Text: saved.text}
	if saved.key != outKey {
		body, _, err := rs.Get(ctx, outKey)
		if err != nil {
			return classifyResultErr("read output", err)
		}
		if err := json.Unmarshal(body, &out); err != nil {
			return idempotency.Final("bad_output", fmt.Errorf("attempt output %s: %w", outKey, err))
		}
	}
	key, err := ossresult.ApprovedKey(k)
	if err != nil {
		return idempotency.Final("invalid_request", err)
	}
	if _, err := rs.PutOnce(ctx, key, []byte(out.Text), "text/markdown; charset=utf-8", m); err != nil {
		return classifyResultErr("publish", err)
	}
	return nil
}

// postNotify posts body (notification) to n's URL, its X-Request-Id the
// body's request id.
func (p *Pipeline) postNotify(ctx context.Context, n *event.Notify, body Outcome) error {
	if p.Notify == nil {
		return idempotency.Final("invalid_request", errors.New("notify is not configured"))
	}
	b, _ := json.Marshal(body)
	return p.Notify.Post(ctx, n.URL, body.IdempotencyKey, body.RequestID, b)
}

// notification is the body of the notify POST: the task's one effect (K,
// SUCCEEDED, the attempt and result_ref that stand, and origin, the request
// id its record keeps), byte for byte the same whichever delivery posts it
// — the first, FC's retry or a copy of it, another request of the same
// key and payload, the sweeper, a replay — so never "duplicate": true,
// which a receiver dropping duplicates would drop, losing the only
// notification, nor the posting delivery's own request id (docs/design.md
// §13).
func notification(o Outcome, origin string) Outcome {
	return Outcome{IdempotencyKey: o.IdempotencyKey, Status: string(driver.StatusSucceeded),
		Decision: string(idempotency.DecisionFirst), Attempt: o.Attempt, ResultRef: o.ResultRef, RequestID: origin}
}
