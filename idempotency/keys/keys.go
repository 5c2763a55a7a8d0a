// Package keys derives the identifiers of docs/design.md §4 from a task event:
// the business key K, the default input_version, the payload hash stored
// with the record, and the event fingerprint.
//
// Everything is hashed over RFC 8785 canonical JSON (package jcs), so member
// order and whitespace in the event never change a key, while any difference
// in meaning does: a number whose exact value a double cannot keep is
// refused (ErrInvalidField wrapping jcs.ErrNumber, naming its path) rather
// than merged with its neighbours.
package keys

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/idemgate/idemgate/idempotency/jcs"
)

var (
	// ErrMissingField reports an absent or empty required field
	// (tenant_id, task_type, operation, input); the message names it.
	ErrMissingField = errors.New("keys: missing required field")
	// ErrInvalidField reports a field that cannot be hashed unambiguously:
	// input that JCS rejects (the error also wraps the jcs sentinel) or a
	// string field that is not valid UTF-8.
	ErrInvalidField = errors.New("keys: invalid field")
)

// Fields are the parts of a task event's data that keys depend on.
type Fields struct {
	TenantID  string
	TaskType  string
	Operation string
	// Input is the event's "input" value as raw JSON; a JSON null counts as
	// missing.
	Input json.RawMessage
	// InputVersion, when non-empty, is used as given instead of being
	// derived from Input.
	InputVersion string
	// IdempotencyKey, when non-empty, replaces the content-derived key with
	// one namespaced by TenantID only.
	IdempotencyKey string
}

// Derived holds the identifiers computed from Fields.
type Derived struct {
	// Key is K: 64 lowercase hex characters.
	Key string
	// InputVersion is the effective input_version (given or derived).
	InputVersion string
	// PayloadHash identifies what K was asked to do, so that a reused
	// explicit idempotency_key with other content can be refused.
	PayloadHash string
	// LegacyPayloadHash is the payload hash records written before the
	// input's hash joined it hold for the same event (set only when it
	// differs: a given input_version). A record holding it is the same
	// payload, so records in flight across the upgrade stay claimable.
	LegacyPayloadHash string
}

// Derive computes K, input_version and payload_hash as docs/design.md
// ("Keys") specifies.
func Derive(f Fields) (Derived, error) {
	for _, fld := range []struct{ name, value string }{
		{"tenant_id", f.TenantID},
		{"task_type", f.TaskType},
		{"operation", f.Operation},
	} {
		if fld.value == "" {
			return Derived{}, fmt.Errorf("%w: %s", ErrMissingField, fld.name)
		}
	}
	// encoding/json would turn invalid UTF-8 into U+FFFD, making distinct
	// byte strings hash alike; refuse them instead.
	for _, fld := range []struct{ name, value string }{
		{"tenant_id", f.TenantID},
		{"task_type", f.TaskType},
		{"operation", f.Operation},
		{"input_version", f.InputVersion},
		{"idempotency_key", f.IdempotencyKey},
	} {
		if !utf8.ValidString(fld.value) {
			return Derived{}, fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidField, fld.name)
		}
	}
	if v := bytes.Trim(f.Input, " \t\r\n"); len(v) == 0 || string(v) == "null" {
		return Derived{}, fmt.Errorf("%w: input", ErrMissingField)
	}
	// Canonicalize even when input_version is given: an input JCS rejects
	// (duplicate names, lone surrogates, …) is invalid whichever way K is
	// formed.
	canon, err := jcs.Canonicalize(f.Input)
	if err != nil {
		return Derived{}, fieldError("input", err)
	}

	derived := prefixedSum("sha256:", canon)
	inputSum := derived[len("sha256:"):]
	d := Derived{InputVersion: f.InputVersion}
	if d.InputVersion == "" {
		d.InputVersion = derived
	}
	if f.IdempotencyKey != "" {
		d.Key = explicitKey(f.TenantID, f.IdempotencyKey)
	} else {
		d.Key = hashStrings("tenant_id", f.TenantID, "task_type", f.TaskType,
			"input_version", d.InputVersion, "operation", f.Operation)
	}
	legacy := hashStrings("task_type", f.TaskType, "operation", f.Operation, "input_version", d.InputVersion)
	if d.InputVersion == derived {
		d.PayloadHash = legacy
	} else {
		d.LegacyPayloadHash = legacy
		// A given input_version says nothing of the input itself: its hash
		// joins the payload hash, so that the same key and version with
		// another input is refused as a mismatch (K does not change). Given
		// as the derived one, it is the derived one.
		d.PayloadHash = hashStrings("task_type", f.TaskType, "operation", f.Operation, "input_version", d.InputVersion,
			"input_sha256", inputSum)
	}
	return d, nil
}

// Fingerprint returns hex(sha256(JCS(data))), the layer-3 fingerprint of an
// event's data.
func Fingerprint(data json.RawMessage) (string, error) {
	canon, err := jcs.Canonicalize(data)
	if err != nil {
		var ne *jcs.NumberError
		if errors.As(err, &ne) { // the fingerprint is over data: say where in it
			return "", &numberError{"keys: fingerprint: " + ne.Describe("data"), []error{ne}}
		}
		return "", fmt.Errorf("keys: fingerprint: %w", err)
	}
	return sum(canon), nil
}

// fieldError is ErrInvalidField for the JSON value of field that JCS
// refused: a number it refuses is named by its path under field, with what
// to send instead (docs/design.md §4).
func fieldError(field string, err error) error {
	var ne *jcs.NumberError
	if errors.As(err, &ne) {
		return &numberError{ErrInvalidField.Error() + ": " + ne.Describe(field), []error{ErrInvalidField, ne}}
	}
	return fmt.Errorf("%w: %s: %w", ErrInvalidField, field, err)
}

// numberError is a refused number said once: what to do about it, while
// errors.Is still finds the sentinels (jcs.ErrNumber through the
// *jcs.NumberError).
type numberError struct {
	msg  string
	errs []error
}

func (e *numberError) Error() string   { return e.msg }
func (e *numberError) Unwrap() []error { return e.errs }

// hashStrings hashes the canonical object of name, value pairs; Derive has
// checked that every value is valid UTF-8.
func hashStrings(kv ...string) string {
	var buf [512]byte
	return sum(jcs.AppendStringObject(buf[:0], rawInvalid(kv)...))
}

// rawInvalid spells each value that is not valid UTF-8 as the hex of its
// bytes under its name + "\x00raw", a name no document of this package
// has: JCS would write "a\xff" and "a\xfe" alike (U+FFFD), merging two
// keys, while valid values keep the documents, and the keys, they had.
func rawInvalid(kv []string) []string {
	for i := 1; i < len(kv); i += 2 {
		if !utf8.ValidString(kv[i]) {
			out := slices.Clone(kv)
			for j := 1; j < len(out); j += 2 {
				if !utf8.ValidString(out[j]) {
					out[j-1], out[j] = out[j-1]+"\x00raw", hex.EncodeToString([]byte(out[j]))
				}
			}
			return out
		}
	}
	return kv
}

func sum(b []byte) string { return prefixedSum("", b) }

// prefixedSum is prefix + hex(sha256(b)), in one allocation (every
// delivery derives three or four of them).
func prefixedSum(prefix string, b []byte) string {
	h := sha256.Sum256(b)
	var buf [16 + 2*sha256.Size]byte
	out := append(buf[:0], prefix...)
	out = hex.AppendEncode(out, h[:])
	return string(out)
}
