package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/internal/logx"
)

// An event refused before its key is known answers with FC's request id,
// never the one its data names (that may be the very field refused), and
// logs "event rejected" under FC's id; whatever the refusal, the data's
// request id, or a secret, reaches neither the answer nor the log.
func TestRefusalsAnswerFCRequestID(t *testing.T) {
	data := func(extra string) string {
		return `{"tenant_id":"t1","task_type":"summarize","operation":"summarize","input":{"content":"x"}` + extra + `}`
	}
	long := `{"tenant_id":"` + strings.Repeat("t", 129) + `","task_type":"summarize","operation":"summarize","input":{"content":"x"},"request_id":"req-data"}`
	single := func(d string) string { return string(inputBody(d)) }
	tests := []struct {
		name, body, errorType string
		never                 string // in neither the answer nor the log
		member                bool   // answered as results[0] of a batch
	}{
		{"tenant_id over its limit, data names a request_id", single(long), "field_too_long", "req-data", false},
		{"request_id not printable ASCII", single(data(`,"request_id":"req\u0007bell"`)), "invalid_request", "bell", false},
		{"request_id over its limit", single(data(`,"request_id":"req-` + strings.Repeat("r", 130) + `"`)), "field_too_long", "rrrr", false},
		{"batch member over a limit", "[" + single(long) + "]", "field_too_long", "req-data", true},
		{"notify.url without a host, with a token", single(data(`,"notify":{"url":"https:/hooks.example.com/robot/send?access_token=SECRET-TOKEN-123"}`)), "invalid_request", "SECRET-TOKEN-123", false},
		{"notify.url of another scheme, with a password", single(data(`,"notify":{"url":"ftp://bot:SECRET-TOKEN-123@hooks.example.com/a"}`)), "invalid_request", "SECRET-TOKEN-123", false},
		{"batch over the limit", "[" + strings.TrimSuffix(strings.Repeat(single(data(`,"request_id":"req-data"`))+",", handler.MaxBatch+1), ",") + "]", "batch_too_large", "req-data", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rg := newRig(t, &model{})
			var logs bytes.Buffer
			rg.p.Log = logx.New(&logs, slog.LevelInfo, nil)
			r := rg.p.Handle(context.Background(), []byte(tc.body), handler.Meta{RequestID: "fc-1"})
			body := r.Body
			if tc.member {
				var b struct{ Results []json.RawMessage }
				if json.Unmarshal(r.Body, &b) != nil || len(b.Results) != 1 {
					t.Fatalf("answer %s", r.Body)
				}
				body = b.Results[0]
			}
			o := outcome(t, handler.Reply{Body: body})
			if o.ErrorType != tc.errorType || o.RequestID != "fc-1" || o.Retryable == nil || *o.Retryable {
				t.Fatalf("answered %s; want FINAL %s with request_id fc-1", body, tc.errorType)
			}
			if !rejectedLogged(t, logs.Bytes(), tc.errorType) {
				t.Fatalf("no event rejected line for %s under fc-1:\n%s", tc.errorType, logs.Bytes())
			}
			if strings.Contains(string(r.Body), tc.never) || strings.Contains(logs.String(), tc.never) {
				t.Fatalf("%q echoed:\n%s\n%s", tc.never, r.Body, logs.Bytes())
			}
		})
	}
}

// rejectedLogged: a line "event rejected" of errorType under request id fc-1
// (Handle's own lines take it from the adapter's context; here there is none).
func rejectedLogged(t *testing.T, logs []byte, errorType string) bool {
	t.Helper()
	for _, line := range bytes.Split(bytes.TrimSpace(logs), []byte("\n")) {
		var l struct {
			Msg, ErrorType string
			RequestID      *string `json:"request_id"`
			Key            *string `json:"idempotency_key"`
		}
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("log line %s: %v", line, err)
		}
		if l.Msg == "event rejected" && l.ErrorType == errorType &&
			(l.RequestID == nil && l.Key == nil || l.RequestID != nil && *l.RequestID == "fc-1" && l.Key != nil) {
			return true
		}
	}
	return false
}

// Nesting: an input of 63 levels runs; one deeper, or another member of data
// as deep, is input_too_deep, FINAL (data around it is one level deeper,
// past what the canonical form allows) — never invalid_request at one depth
// and input_too_deep at the next.
func TestNestingPastTheBoundIsTooDeep(t *testing.T) {
	nest := func(levels int) string { // an object of `levels` levels in all
		return strings.Repeat(`{"n":`, levels-1) + `{}` + strings.Repeat("}", levels-1)
	}
	input := func(levels int) string { return `{"content":"x","n":` + nest(levels-1) + `}` }
	for _, c := range []struct {
		name, data, code string
	}{
		{"input of 63 levels", `"input":` + input(63), ""},
		{"input of 64 levels", `"input":` + input(64), "input_too_deep"},
		{"input of 65 levels", `"input":` + input(65), "input_too_deep"},
		{"another member of 64 levels", `"input":{"content":"x"},"extra":` + nest(64), "input_too_deep"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rg := newRig(t, &model{})
			body := []byte(`{"id":"ev-1","source":"test","specversion":"1.0","type":"t","data":{"tenant_id":"t1",` +
				`"task_type":"summarize","operation":"summarize",` + c.data + `}}`)
			o := outcome(t, rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "r1"}))
			if c.code == "" {
				if o.Status != "SUCCEEDED" {
					t.Fatalf("%+v", o)
				}
				return
			}
			if o.ErrorType != c.code || o.Retryable == nil || *o.Retryable {
				t.Fatalf("%+v, want FINAL %s", o, c.code)
			}
		})
	}
}
