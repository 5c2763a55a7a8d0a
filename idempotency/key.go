package idempotency

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/idemgate/idemgate/idempotency/driver"
)

// maxKey is the longest key: MySQL's request_id is VARCHAR(64), counted in
// characters, so any key of at most 64 bytes fits every store.
const maxKey = 64

// checkKey is the one key rule of every store (docs/library.md, "Keys"):
// bbolt compares bytes, while MySQL's utf8mb4_bin is PAD SPACE ("k" and
// "k " are one key there) and answers invalid UTF-8 with an error that
// would be retried forever. A key no store could tell apart from another,
// or that one store refuses, is refused here, before any store sees it.
func checkKey(key string) error {
	switch {
	case key == "" || len(key) > maxKey:
		return fmt.Errorf("%w: a key is 1 to %d bytes, got %d", driver.ErrInvalid, maxKey, len(key))
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: the key %q is not valid UTF-8", driver.ErrInvalid, key)
	case strings.HasSuffix(key, " "):
		return fmt.Errorf("%w: the key %q ends in a space", driver.ErrInvalid, key)
	case strings.ContainsFunc(key, unicode.IsControl):
		return fmt.Errorf("%w: the key %q holds a control character", driver.ErrInvalid, key)
	}
	return nil
}

// checkAudit refuses a replay or forget whose audit text is not valid
// UTF-8, for the reason checkText gives.
func checkAudit(rp driver.Replay) error {
	return checkFields([]textField{{"reason", rp.Reason, 0}, {"operator", rp.Operator, 0}, {"source", rp.Source, 0}})
}

// checkText refuses a claim whose text a store keeps is not valid UTF-8 or
// longer than MySQL's column holds (characters, as VARCHAR counts them):
// MySQL refuses such text (1366, 1406) where bbolt keeps it; one rule on
// every store, as for the key.
func checkText(req ClaimRequest) error {
	m := req.Meta
	return checkFields([]textField{
		{"owner", req.Owner, 128}, {"payload hash", req.PayloadHash, 64}, {"legacy payload hash", req.LegacyPayloadHash, 0},
		{"tenant_id", m.TenantID, 128}, {"task_type", m.TaskType, 64}, {"operation", m.Operation, 128},
		{"input_version", m.InputVersion, 128}, {"origin request id", m.OriginRequestID, 128}, {"event source", m.EventSource, 255},
		{"event id", m.EventID, 255}, {"input ref", m.InputRef, 1024}, {"traceparent", m.TraceParent, 55},
	})
}

// textField is one text a record keeps, and the characters its column
// holds (0: no bound here).
type textField struct {
	name, v string
	max     int
}

func checkFields(fs []textField) error {
	for _, f := range fs {
		switch {
		case !utf8.ValidString(f.v):
			return fmt.Errorf("%w: the %s %q is not valid UTF-8", driver.ErrInvalid, f.name, f.v)
		case f.max > 0 && utf8.RuneCountInString(f.v) > f.max:
			return fmt.Errorf("%w: the %s is %d characters; a record holds at most %d", driver.ErrInvalid, f.name,
				utf8.RuneCountInString(f.v), f.max)
		}
	}
	return nil
}
