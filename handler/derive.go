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
// from it (KEY_FALLBACK=fingerprint and no tenant_id, or neither operation
// nor idempotency_key), else "".
func (p *Pipeline) keyFingerprint(t *event.Task) (string, error) {
	if !p.KeyFallback || (t.TenantID != "" && (t.Operation != "" || t.IdempotencyKey != "")) {
		return "", nil
	}
	fp, err := keys.Fingerprint(t.Data)
	if err != nil {
		return "", keyErr(err)
	}
	return fp, nil
}

// deriveKey derives K, input_version and payload_hash of a task event. An
// event without tenant_id or operation (accepted only when lenient, under
// KEY_FALLBACK=fingerprint), or one given keyFP (a KEY_JMESPATH that selected
// nothing, under the same setting), is keyed by keyFP, the fingerprint of its
// data: the same action only when the data is the same. Under the same
// setting an explicit idempotency_key still names the action when only
// operation is missing: the producer said which action it is, and a
// fingerprint would make a copy with another timestamp another task.
func deriveKey(t *event.Task, keyFP string, lenient bool) (keys.Derived, error) {
	f := keys.Fields{TenantID: t.TenantID, TaskType: t.TaskType, Operation: t.Operation, Input: t.Input,
		InputVersion: t.InputVersion, IdempotencyKey: t.IdempotencyKey}
	if lenient && keyFP == "" && t.TenantID != "" && t.Operation == "" && t.IdempotencyKey != "" {
		f.Operation = noOperation // K needs none
	}
	fallback := t.TenantID == "" || f.Operation == "" || keyFP != ""
	if fallback {
		f.TenantID, f.Operation = "-", "-" // placeholders: only input_version is taken from this derivation
	}
	d, err := keys.Derive(f)
	if err != nil {
		return d, keyErr(err)
	}
	if fallback {
		if keyFP == "" {
			return d, idempotency.Final("invalid_request", errors.New("tenant_id and operation are required (KEY_FALLBACK is not fingerprint)"))
		}
		d.Key, d.PayloadHash = keys.FromFingerprint(keyFP), keyFP
	}
	return d, nil
}

// noOperation stands for a missing operation in the payload hash: no event
// can name it (an identifier never starts with white space), so the same
// key with operation "-" is another payload, as any other operation is.
const noOperation = " no operation"

// KeyRules are the deployment's key selection (KEY_JMESPATH,
// PAYLOAD_JMESPATH; docs/design.md §4): nil fields keep the default
// derivation. Fallback (KEY_FALLBACK=fingerprint) keys an event whose
// expression selects nothing by its fingerprint instead of refusing it.
type KeyRules struct {
	Key, Payload *keys.JMESPath
	fallback     bool
}

// keyErr is a refusal deriving a key or a fingerprint, FINAL:
// input_too_deep past the canonical form's nesting bound (data is one level
// deeper than its input), else invalid_request.
func keyErr(err error) error {
	if errors.Is(err, jcs.ErrTooDeep) {
		return idempotency.Final("input_too_deep", err)
	}
	return idempotency.Final("invalid_request", err)
}

// keying is how a delivery's K is derived: by the deployment's rules from
// the event (live), or as its stored input recorded it (a re-drive, which
// must find the key the record holds whatever the deployment says now and
// whatever data the rebuilt event carries: its fingerprint is not the
// original data's).
type keying struct {
	rules  KeyRules
	keyFP  string // stored: the fingerprint K came from, or ""
	stored bool
}

// liveKeying derives K by the deployment's rules.
func (p *Pipeline) liveKeying() keying { return keying{rules: p.keyRules()} }

// keying is how in's K was derived.
func (in storedInput) keying() (keying, error) {
	r, err := storedRules(in)
	return keying{rules: r, keyFP: in.KeyFingerprint, stored: true}, err
}

// keyRules are p.Keys with the pipeline's KEY_FALLBACK.
func (p *Pipeline) keyRules() KeyRules {
	r := p.Keys
	r.fallback = p.KeyFallback
	return r
}

// storedRules are the rules an input.json records: those K was derived
// with, whatever the deployment says now (a re-drive must find the same K).
// A stored input was accepted when it was saved, so it is read leniently: an
// explicit key without an operation stays that key after KEY_FALLBACK is
// unset, and a recorded fingerprint or expression decides the rest.
func storedRules(doc storedInput) (KeyRules, error) {
	r := KeyRules{fallback: true}
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
	d, err := deriveKey(t, keyFP, r.fallback)
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
				return d, "", keyErr(err)
			}
			d, err = deriveKey(t, keyFP, r.fallback)
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
