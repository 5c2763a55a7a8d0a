// Package fcwrap makes a Function Compute handler of
// github.com/aliyun/fc-runtime-go-sdk idempotent without idempotency code in
// it: Wrap claims the event's business key, runs the handler at most once per
// effective result, stores its typed result and answers every repeat with it
// (docs/library.md, "Wrap an FC handler").
//
//	eng := idempotency.New(store)
//	key, err := fcwrap.JMESPath[Order]("[tenant_id, order_id]")
//	fc.Start(fcwrap.Wrap(eng, key, handle))
package fcwrap

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aliyun/fc-runtime-go-sdk/fccontext"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/jcs"
	"github.com/idemgate/idemgate/idempotency/keys"
)

// Key derives the business key K of an event: a keys helper's 64 hex, or a
// short business identifier within the engine's key rule (docs/library.md,
// "Keys"; any other is refused FINAL invalid_request). Return
// idempotency.Final for an event that has none.
type Key[E any] func(E) (string, error)

// JMESPath is a Key from a JMESPath expression over the event's JSON form
// (keys.JMESPath.Hash): compiled here, so a bad expression is an error at
// start; an event where it selects nothing is refused FINAL
// invalid_request without running the handler.
func JMESPath[E any](expr string) (Key[E], error) {
	j, err := keys.CompileJMESPath(expr)
	if err != nil {
		return nil, err
	}
	return func(e E) (string, error) { return selectHash(j, e) }, nil
}

func selectHash[E any](j *keys.JMESPath, e E) (string, error) {
	doc, err := document(e)
	if err != nil {
		return "", err
	}
	h, err := j.Hash(doc)
	if err != nil {
		return "", idempotency.Final("invalid_request", err)
	}
	return h, nil
}

// raw is e's JSON form (json.RawMessage and []byte as they are).
func raw[E any](e E) ([]byte, error) {
	switch v := any(e).(type) {
	case json.RawMessage:
		return v, nil
	case []byte:
		return v, nil
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, idempotency.Final("invalid_request", fmt.Errorf("the event is not JSON: %w", err))
	}
	return b, nil
}

// document is e decoded for a JMESPath search.
func document[E any](e E) (any, error) {
	b, err := raw(e)
	if err != nil {
		return nil, err
	}
	doc, err := keys.DecodeJSON(b)
	if err != nil {
		return nil, idempotency.Final("invalid_request", err)
	}
	return doc, nil
}

// Option configures Wrap.
type Option[E, R any] func(*config[E, R])

type config[E, R any] struct {
	payload func(E) (string, error)
	hook    func(context.Context, R, idempotency.Outcome) (R, error)
}

// WithPayloadJMESPath sets what a repeat of a key must match to be a
// duplicate (else payload_mismatch, FINAL): the expression's selection.
// The default is the whole event (its canonical JSON's fingerprint).
func WithPayloadJMESPath[E, R any](expr string) (Option[E, R], error) {
	j, err := keys.CompileJMESPath(expr)
	if err != nil {
		return nil, err
	}
	return func(c *config[E, R]) { c.payload = func(e E) (string, error) { return selectHash(j, e) } }, nil
}

// WithResponseHook calls hook on every answer that was not produced by this
// call of the handler (a repeat answered with the stored R): to mark it or
// change it. Its error is the caller's answer.
func WithResponseHook[E, R any](hook func(ctx context.Context, r R, out idempotency.Outcome) (R, error)) Option[E, R] {
	return func(c *config[E, R]) { c.hook = hook }
}

// Wrap returns h made idempotent on eng: the key from key, the owner and
// try from FC's context (the request id and x-fc-retry-count; without an FC
// context, no owner and an unknown try), R stored as JSON (idempotency.Run)
// and replayed to every repeat without running h. h's errors are classified
// as the engine classifies them (idempotency.Final, idempotency.Retryable,
// else UNKNOWN); a repeat of a FAILED_FINAL key answers its stored error, a
// repeat meeting a live lease idempotency.ErrInProgress, or ErrRetryLater for
// a copy of the holder's own try (FC delivers both again).
func Wrap[E, R any](eng *idempotency.Engine, key Key[E], h func(context.Context, E) (R, error), opts ...Option[E, R]) func(context.Context, E) (R, error) {
	c := config[E, R]{payload: fingerprint[E]}
	for _, o := range opts {
		o(&c)
	}
	return func(ctx context.Context, e E) (R, error) {
		var zero R
		req, err := claim(ctx, e, key, c.payload)
		if err != nil {
			return zero, err
		}
		ran := false
		r, out, err := idempotency.Run(ctx, eng, req, func(ctx context.Context, _ *idempotency.Lease) (R, error) {
			ran = true
			return h(ctx, e)
		})
		if err != nil || ran || c.hook == nil {
			return r, err
		}
		return c.hook(ctx, r, out)
	}
}

// claim builds the claim of one invocation.
func claim[E any](ctx context.Context, e E, key Key[E], payload func(E) (string, error)) (idempotency.ClaimRequest, error) {
	k, err := key(e)
	if err != nil {
		return idempotency.ClaimRequest{}, err
	}
	ph, err := payload(e)
	if err != nil {
		return idempotency.ClaimRequest{}, err
	}
	req := idempotency.ClaimRequest{Key: k, PayloadHash: ph, Try: -1}
	if lc, ok := fccontext.FromContext(ctx); ok {
		req.Owner, req.Try = lc.RequestID, lc.RetryCount
		req.Meta.OriginRequestID = lc.RequestID
	}
	return req, nil
}

// fingerprint is the default payload hash: the whole event, canonical. A
// typed event that JCS refuses for a number a double cannot hold (an int64
// id over 2^53) is hashed as encoding/json wrote it instead: exact, one
// text per Go value, and never another event's canonical text, which holds
// no such number. An event given as JSON text may be spelled otherwise on
// its next delivery, so it stays refused (narrow it: WithPayloadJMESPath).
func fingerprint[E any](e E) (string, error) {
	b, err := raw(e)
	if err != nil {
		return "", err
	}
	fp, err := keys.Fingerprint(b)
	if errors.Is(err, jcs.ErrNumber) && !isText(e) {
		h := sha256.Sum256(b)
		return hex.EncodeToString(h[:]), nil
	}
	if err != nil {
		return "", idempotency.Final("invalid_request", err)
	}
	return fp, nil
}

// isText reports whether e is JSON text as it came (raw keeps it as is).
func isText[E any](e E) bool {
	switch any(e).(type) {
	case json.RawMessage, []byte:
		return true
	}
	return false
}
