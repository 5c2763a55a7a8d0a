package handler

import (
	"errors"
	"fmt"

	"github.com/idemgate/idemgate/handler/event"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/jcs"
	"github.com/idemgate/idemgate/idempotency/keys"
)

// keyFingerprint is the fingerprint of t's data when K is to be derived
// from it (KEY_FALLBACK=fingerprint and no tenant_id or operation), else "".
func (p *Pipeline) keyFingerprint(t *event.Task) (string, error) {
	if !p.KeyFallback || (t.TenantID != "" && t.Operation != "") {
		return "", nil
	}
	fp, err := keys.Fingerprint(t.Data)
	if err != nil {
		return "", idempotency.Final("invalid_request", err)
	}
	return fp, nil
}

// deriveKey derives K, input_version and payload_hash of a task event. An
// event without tenant_id or operation (accepted only under
// KEY_FALLBACK=fingerprint), or one given keyFP (a KEY_JMESPATH that selected
// nothing, under the same setting), is keyed by keyFP, the fingerprint of its
// data: the same action only when the data is the same.
func deriveKey(t *event.Task, keyFP string) (keys.Derived, error) {
	f := keys.Fields{TenantID: t.TenantID, TaskType: t.TaskType, Operation: t.Operation, Input: t.Input,
		InputVersion: t.InputVersion, IdempotencyKey: t.IdempotencyKey}
	fallback := t.TenantID == "" || t.Operation == "" || keyFP != ""
	if fallback {
		f.TenantID, f.Operation = "-", "-" // placeholders: only input_version is taken from this derivation
	}
	d, err := keys.Derive(f)
	if err != nil {
		code := "invalid_request"
		if errors.Is(err, jcs.ErrTooDeep) {
			code = "input_too_deep"
		}
		return d, idempotency.Final(code, err)
	}
	if fallback {
		if keyFP == "" {
			return d, idempotency.Final("invalid_request", errors.New("tenant_id and operation are required (KEY_FALLBACK is not fingerprint)"))
		}
		d.Key, d.PayloadHash = keys.FromFingerprint(keyFP), keyFP
	}
	return d, nil
}

// KeyRules are the deployment's key selection (KEY_JMESPATH,
// PAYLOAD_JMESPATH; docs/design.md §4): nil fields keep the default
// derivation. Fallback (KEY_FALLBACK=fingerprint) keys an event whose
// expression selects nothing by its fingerprint instead of refusing it.
type KeyRules struct {
	Key, Payload *keys.JMESPath
	fallback     bool
}

// keyRules are p.Keys with the pipeline's KEY_FALLBACK.
func (p *Pipeline) keyRules() KeyRules {
	r := p.Keys
	r.fallback = p.KeyFallback
	return r
}

// storedRules are the rules an input.json records: those K was derived
// with, whatever the deployment says now (a re-drive must find the same K).
func storedRules(doc storedInput) (KeyRules, error) {
	var r KeyRules
	var err error
	if doc.KeyJMESPath != "" {
		if r.Key, err = keys.CompileJMESPath(doc.KeyJMESPath); err != nil {
			return r, err
		}
	}
	if doc.PayloadJMESPath != "" {
		r.Payload, err = keys.CompileJMESPath(doc.PayloadJMESPath)
	}
	return r, err
}

// expr is the text of j, "" for nil.
func expr(j *keys.JMESPath) string {
	if j == nil {
		return ""
	}
	return j.String()
}

// derive is deriveKey under the rules: K from Key's selection of the event's
// data, the payload hash from Payload's; it returns the fingerprint K came
// from when it fell back to it (recorded in input.json).
func (r KeyRules) derive(t *event.Task, keyFP string) (keys.Derived, string, error) {
	d, err := deriveKey(t, keyFP)
	if err != nil || keyFP != "" || (r.Key == nil && r.Payload == nil) {
		return d, keyFP, err
	}
	data, err := keys.DecodeJSON(t.Data)
	if err != nil {
		return d, "", idempotency.Final("invalid_request", err)
	}
	for _, sel := range []struct {
		name string
		expr *keys.JMESPath
		dst  *string
	}{{"KEY_JMESPATH", r.Key, &d.Key}, {"PAYLOAD_JMESPATH", r.Payload, &d.PayloadHash}} {
		if sel.expr == nil {
			continue
		}
		h, err := sel.expr.Hash(data)
		switch {
		case errors.Is(err, keys.ErrNothingSelected) && r.fallback:
			if keyFP, err = keys.Fingerprint(t.Data); err != nil {
				return d, "", idempotency.Final("invalid_request", err)
			}
			d, err = deriveKey(t, keyFP)
			return d, keyFP, err
		case err != nil:
			return d, "", idempotency.Final("invalid_request", fmt.Errorf("%s: %w", sel.name, err))
		}
		*sel.dst = h
	}
	if r.Payload != nil {
		d.LegacyPayloadHash = "" // records from before PAYLOAD_JMESPATH hold another hash: a mismatch, as it should be
	}
	return d, "", nil
}
