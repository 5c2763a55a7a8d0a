package handler

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/idemgate/idemgate/handler/event"
	"github.com/idemgate/idemgate/idempotency"
)

// Limits of one invocation. FC's own limits are 128 KB for an async payload
// and 32 MB for a sync one; the custom-runtime server reads at most 6 MiB.
// Each breach is a FINAL error with its own errorType, found before any
// claim, so a hostile event costs a parse and nothing else.
const (
	// MaxBatch bounds an event-streaming batch (each member may call the
	// model); the parser refuses a larger one before splitting it further.
	MaxBatch = event.MaxBatch
	// MaxInputBytes bounds the task input: it is stored whole in input.json
	// and sent to the model.
	MaxInputBytes = 1 << 20
)

// fieldLimits are the column sizes of idempotency_record (and of object
// metadata for request_id), checked up front so that a long value is a clear
// error rather than a truncation or a database error.
var fieldLimits = []struct {
	name string
	get  func(t *event.Task) string
	max  int
}{
	{"tenant_id", func(t *event.Task) string { return t.TenantID }, 128},
	{"task_type", func(t *event.Task) string { return t.TaskType }, 64},
	{"operation", func(t *event.Task) string { return t.Operation }, 128},
	{"input_version", func(t *event.Task) string { return t.InputVersion }, 128},
	{"request_id", func(t *event.Task) string { return t.RequestID }, 128},
	{"idempotency_key", func(t *event.Task) string { return t.IdempotencyKey }, 256},
	{"source", func(t *event.Task) string { return t.EventSource }, 255},
	{"id", func(t *event.Task) string { return t.EventID }, 255},
}

// checkLimits returns a FINAL error naming the first field out of bounds.
func checkLimits(t *event.Task) error {
	for _, f := range fieldLimits {
		if v := f.get(t); len(v) > f.max {
			return idempotency.Final("field_too_long", fmt.Errorf("%s is %d bytes; at most %d", f.name, len(v), f.max))
		}
	}
	// request_id travels as an HTTP header (X-Request-Id) and as OSS object
	// metadata: printable ASCII only, so it cannot split a header.
	if strings.IndexFunc(t.RequestID, func(r rune) bool { return r > unicode.MaxASCII || !unicode.IsPrint(r) }) >= 0 {
		return idempotency.Final("invalid_request", fmt.Errorf("request_id must be printable ASCII"))
	}
	if len(t.Input) > MaxInputBytes {
		return idempotency.Final("input_too_large", fmt.Errorf("input is %d bytes; at most %d", len(t.Input), MaxInputBytes))
	}
	if t.Notify != nil && len(t.Notify.URL) > 2048 {
		return idempotency.Final("field_too_long", fmt.Errorf("notify.url is %d bytes; at most 2048", len(t.Notify.URL)))
	}
	return nil
}
