package handler

import (
	"errors"

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
// KEY_FALLBACK=fingerprint) is keyed by keyFP, the fingerprint of its data:
// the same action only when the data is the same.
func deriveKey(t *event.Task, keyFP string) (keys.Derived, error) {
	f := keys.Fields{TenantID: t.TenantID, TaskType: t.TaskType, Operation: t.Operation, Input: t.Input,
		InputVersion: t.InputVersion, IdempotencyKey: t.IdempotencyKey}
	fallback := t.TenantID == "" || t.Operation == ""
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
