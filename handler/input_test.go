package handler_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/llm"
	"github.com/idemgate/idemgate/idempotency"
)

// The input edge (issue 21): bodies that crashed the entry, were refused for
// their layout, or merged two actions into one key. Each answers a clear,
// classified outcome.

const taskEnvelope = `{"specversion":"1.0","id":"in-1","source":"idemgate.test","type":"idemgate:Task:Submitted",`

func inputBody(data string) []byte { return []byte(taskEnvelope + `"data":` + data + `}`) }

func summarizeOf(input string) string {
	return `{"tenant_id":"t1","task_type":"summarize","operation":"summarize","input":` + input + `}`
}

// A timer, or a failure-destination message, that the parser refuses is
// answered with the parser's FINAL error: it used to dereference the
// missing Timer (Failure) and answer errorType panic, retryable, once a
// minute for a typo in s.yaml.
func TestRefusedTimerAndDestinationAreFinal(t *testing.T) {
	tests := []struct {
		name, body, errorType, names string
	}{
		{"mistyped payload", `{"triggerTime":"2026-11-30T07:00:00Z","triggerName":"sweep","payload":"swep"}`, "unsupported_event", `"swep"`},
		{"unknown payload", `{"triggerTime":"2026-11-30T07:00:00Z","triggerName":"t","payload":"compact"}`, "unsupported_event", `"compact"`},
		{"no payload", `{"triggerTime":"2026-11-30T07:00:00Z","triggerName":"t"}`, "unsupported_event", "payload"},
		{"no triggerTime", `{"triggerName":"sweep","payload":"sweep"}`, "invalid_request", "triggerTime"},
		{"triggerTime not RFC 3339", `{"triggerTime":"yesterday","triggerName":"sweep","payload":"sweep"}`, "invalid_request", "triggerTime"},
		{"payload a number", `{"triggerTime":"2026-11-30T07:00:00Z","triggerName":"sweep","payload":7}`, "invalid_request", "payload"},
		{"destination requestContext a string", `{"requestContext":"x","requestPayload":"{}"}`, "invalid_request", "requestContext"},
		{"destination bad timestamp", `{"timestamp":true,"requestContext":{"requestId":"r"}}`, "invalid_request", "timestamp"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rg := newRig(t, &model{})
			r := rg.p.Handle(context.Background(), []byte(tc.body), handler.Meta{RequestID: "fc-1"})
			o := outcome(t, r)
			if r.Status != 404 || o.ErrorType != tc.errorType || o.Retryable == nil || *o.Retryable ||
				!strings.Contains(o.ErrorMessage, tc.names) {
				t.Fatalf("answered %d %s, want FINAL %s naming %s", r.Status, r.Body, tc.errorType, tc.names)
			}
		})
	}
}

// Whitespace and member order are not meaning: the pretty-printed form of
// an event with data_base64 last and no datacontenttype (jq . output) runs
// like its compact form, under the same key. The SDK's own reader misreads
// the white space before a data_base64 it has to hold back.
func TestPrettyPrintedDataBase64(t *testing.T) {
	compact := taskEnvelope + `"data_base64":"eyJ0ZW5hbnRfaWQiOiJ0MSIsInRhc2tfdHlwZSI6InN1bW1hcml6ZSIsIm9wZXJhdGlvbiI6InN1bW1hcml6ZSIsImlucHV0Ijp7ImNvbnRlbnQiOiJiYXNlNjQifX0="}`
	pretty := "{\n  \"specversion\": \"1.0\",\n  \"id\": \"in-1\",\n  \"source\": \"idemgate.test\",\n" +
		"  \"type\": \"idemgate:Task:Submitted\",\n  \"data_base64\": \"eyJ0ZW5hbnRfaWQiOiJ0MSIsInRhc2tfdHlwZSI6InN1bW1hcml6ZSIsIm9wZXJhdGlvbiI6InN1bW1hcml6ZSIsImlucHV0Ijp7ImNvbnRlbnQiOiJiYXNlNjQifX0=\"\n}\n"
	escaped := strings.Replace(compact, `0="`, `0\u003d"`, 1)
	rg := newRig(t, &model{})
	var key string
	for i, body := range []string{compact, pretty, escaped} {
		o := outcome(t, rg.p.Handle(context.Background(), []byte(body), handler.Meta{RequestID: "fc-1"}))
		if o.Status != "SUCCEEDED" || o.ErrorType != "" || (i > 0 && o.IdempotencyKey != key) {
			t.Fatalf("form %d: %+v (first key %s)", i, o, key)
		}
		key = o.IdempotencyKey
	}
}

// Two orders that differ only in an integer a double cannot hold are two
// actions: RFC 8785 would write both as 12345678901234567000 and merge them
// into one key. Such a number is refused FINAL, naming where it is and
// saying to send it as a string; as strings they are two keys.
func TestNumbersBeyondADouble(t *testing.T) {
	rg := newRig(t, &model{})
	for _, tc := range []struct{ name, data, field string }{
		{"input integer", summarizeOf(`{"content":"order","order_id":12345678901234567890}`), "input.order_id"},
		{"input integer, one more", summarizeOf(`{"content":"order","order_id":12345678901234567891}`), "input.order_id"},
		{"input fraction", summarizeOf(`{"content":"x","rate":0.10000000000000000001}`), "input.rate"},
		{"nested in an array", summarizeOf(`{"content":"x","items":[{"qty":1},{"qty":9007199254740993}]}`), "input.items[1].qty"},
		{"underflow", summarizeOf(`{"content":"x","eps":1e-400}`), "input.eps"},
		{"outside input (the fingerprint)", `{"tenant_id":"t1","task_type":"summarize","operation":"summarize","input":{"content":"x"},"seq":12345678901234567890}`, "data.seq"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rg.p.Handle(context.Background(), inputBody(tc.data), handler.Meta{RequestID: "fc-1"})
			o := outcome(t, r)
			if o.ErrorType != "invalid_request" || o.Retryable == nil || *o.Retryable || o.Status != "REJECTED" ||
				!strings.Contains(o.ErrorMessage, tc.field) || !strings.Contains(o.ErrorMessage, "as a string") {
				t.Fatalf("answered %s; want FINAL invalid_request naming %s", r.Body, tc.field)
			}
		})
	}
	keys := map[string]bool{}
	for _, id := range []string{`"12345678901234567890"`, `"12345678901234567891"`} {
		o := outcome(t, rg.p.Handle(context.Background(), inputBody(summarizeOf(`{"content":"order","order_id":`+id+`}`)), handler.Meta{RequestID: "fc-1"}))
		if o.Status != "SUCCEEDED" || o.Duplicate {
			t.Fatalf("order %s: %+v", id, o)
		}
		keys[o.IdempotencyKey] = true
	}
	if len(keys) != 2 {
		t.Fatalf("two orders, keys %v", keys)
	}
}

// Number spellings of one value are one value: 60, 60.0 and 6e1 run the
// same task under one key (JCS writes all three as 60), and summarize reads
// each as 60 words; a max_words it cannot read is named as such.
func TestMaxWordsSpellings(t *testing.T) {
	var prompts []string
	m := &model{fn: func(_ context.Context, _ int32, r llm.Request) (llm.Response, error) {
		prompts = append(prompts, r.Prompt)
		return llm.Response{Text: "ok"}, nil
	}}
	rg := newRig(t, m)
	spellings := []string{"60.0", "6e1", "6.0E+1", "60." + strings.Repeat("0", 62), "60"}
	for _, n := range spellings { // each first of its key: summarize reads it
		o := outcome(t, rg.p.Handle(context.Background(), inputBody(summarizeOf(`{"content":"x `+n+`","max_words":`+n+`}`)), handler.Meta{RequestID: "fc-1"}))
		if o.Status != "SUCCEEDED" || o.Duplicate {
			t.Fatalf("max_words %s: %+v", n, o)
		}
	}
	var key string
	for i, n := range spellings { // one content: one key, whatever the spelling
		o := outcome(t, rg.p.Handle(context.Background(), inputBody(summarizeOf(`{"content":"same","max_words":`+n+`}`)), handler.Meta{RequestID: "fc-1"}))
		if o.Status != "SUCCEEDED" || (i > 0 && (o.IdempotencyKey != key || !o.Duplicate)) {
			t.Fatalf("max_words %s: %+v", n, o)
		}
		key = o.IdempotencyKey
	}
	for _, p := range prompts {
		if !strings.Contains(p, "at most 60 words") {
			t.Fatalf("prompt %q", p)
		}
	}
	if len(prompts) != len(spellings)+1 {
		t.Fatalf("%d model calls, want %d", len(prompts), len(spellings)+1)
	}
	for _, n := range []string{`1.5`, `"60"`, `true`, `{}`} {
		o := outcome(t, rg.p.Handle(context.Background(), inputBody(summarizeOf(`{"content":"y","max_words":`+n+`}`)), handler.Meta{RequestID: "fc-1"}))
		if o.ErrorType != "invalid_request" || !strings.Contains(o.ErrorMessage, "input.max_words") || strings.Contains(o.ErrorMessage, "content") {
			t.Fatalf("max_words %s: %+v", n, o)
		}
	}
}

// Object data under a content type that is not JSON is the documented
// invalid_request on data, not a dump of the SDK's reader.
func TestObjectDataNotJSON(t *testing.T) {
	rg := newRig(t, &model{})
	for _, ct := range []string{"text/plain", "application/octet-stream", "application/xml"} {
		body := []byte(taskEnvelope + `"datacontenttype":"` + ct + `","data":` + summarizeOf(`{"content":"x"}`) + `}`)
		o := outcome(t, rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "fc-1"}))
		if o.ErrorType != "invalid_request" || !strings.Contains(o.ErrorMessage, "data") || !strings.Contains(o.ErrorMessage, ct) ||
			strings.Contains(o.ErrorMessage, "ReadString") || strings.Contains(o.ErrorMessage, "SDK") {
			t.Fatalf("%s: %+v", ct, o)
		}
	}
}

// IDEMPOTENCY_DISABLED (WithDisabled) runs every task, as documented: it
// used to fail each with "attempt number 0: attempts count from 1".
// Every run is attempt 1 and results stay create-once, so the model here
// answers alike each time, as the offline model does.
func TestDisabledRunsTasks(t *testing.T) {
	m := &model{fn: func(context.Context, int32, llm.Request) (llm.Response, error) {
		return llm.Response{Text: "same"}, nil
	}}
	rg := newRig(t, m, idempotency.WithDisabled())
	body := inputBody(summarizeOf(`{"content":"disabled"}`))
	for i := range 2 {
		r := rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "fc-1"})
		if o := outcome(t, r); r.Status != 200 || o.Status != "SUCCEEDED" || o.Decision != "DISABLED" || o.ResultRef == "" {
			t.Fatalf("run %d: %d %s", i, r.Status, r.Body)
		}
	}
	if m.calls.Load() != 2 {
		t.Fatalf("model calls %d; disabled runs every delivery", m.calls.Load())
	}
}

// A retryable failure on the last attempt of the budget is recorded and
// answered attempts_exhausted (docs/library.md), FINAL, the cause kept in
// the message; every later delivery answers the same.
func TestExhaustedBudgetCode(t *testing.T) {
	m := &model{fn: func(context.Context, int32, llm.Request) (llm.Response, error) {
		return llm.Response{}, idempotency.Retryable("rate_limited", errors.New("429 from the model"))
	}}
	rg := newRig(t, m, idempotency.WithMaxAttempts(2))
	body := inputBody(summarizeOf(`{"content":"budget"}`))
	want := []struct {
		code      string
		retryable bool
	}{{"rate_limited", true}, {"attempts_exhausted", false}, {"attempts_exhausted", false}}
	for i, w := range want {
		o := outcome(t, rg.p.Handle(context.Background(), body, handler.Meta{RequestID: "fc-1", RetryCount: i}))
		if o.ErrorType != w.code || o.Retryable == nil || *o.Retryable != w.retryable {
			t.Fatalf("delivery %d: %+v; want %s retryable=%v", i+1, o, w.code, w.retryable)
		}
		if i > 0 && !strings.Contains(o.ErrorMessage, "rate_limited") {
			t.Fatalf("delivery %d: the cause is lost: %s", i+1, o.ErrorMessage)
		}
	}
	if m.calls.Load() != 2 {
		t.Fatalf("model calls %d, want 2", m.calls.Load())
	}
}
