package handler

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/idemgate/idemgate/handler/event"
	"github.com/idemgate/idemgate/idempotency/jcs"
	"github.com/idemgate/idemgate/idempotency/keys"
)

// inputDoc writes input.json member by member; it must be byte for byte
// what jcs.Marshal makes of storedInput, the form every stored input.json
// has (a re-drive, a double submit's comparison and readInput read it).
func TestInputDocIsCanonical(t *testing.T) {
	keyExpr, err := keys.CompileJMESPath("order_id")
	if err != nil {
		t.Fatal(err)
	}
	payloadExpr, err := keys.CompileJMESPath("input")
	if err != nil {
		t.Fatal(err)
	}
	base := func() *event.Task {
		return &event.Task{TenantID: "acme", TaskType: "summarize", Operation: "summarize",
			Input: json.RawMessage(`{"max_words": 6e1, "content":"a\u00e9\u2028<b>&", "z":[1,2.50,{"b":1,"a":null}]}`),
			Data:  json.RawMessage(`{"order_id": "o-1", "input": {"content": "x"}}`)}
	}
	with := func(f func(*event.Task)) *event.Task { t := base(); f(t); return t }
	cases := []struct {
		name         string
		task         *event.Task
		version, kfp string
		rules        KeyRules
	}{
		{"default keys", base(), "sha256:abc", "", KeyRules{}},
		{"explicit key and notify", with(func(t *event.Task) {
			t.IdempotencyKey, t.Notify = "order-1", &event.Notify{URL: "https://hook.test/x?a=1&b=<2>"}
		}), "v2", "", KeyRules{}},
		{"key fingerprint", base(), "sha256:abc", "0123abcd", KeyRules{Key: keyExpr}},
		{"key expression", base(), "sha256:abc", "", KeyRules{Key: keyExpr}},
		{"payload expression", base(), "sha256:abc", "", KeyRules{Payload: payloadExpr}},
		{"both expressions, no data", with(func(t *event.Task) { t.Data = nil }), "v", "", KeyRules{Key: keyExpr, Payload: payloadExpr}},
		{"names beyond the BMP and past U+E000", with(func(t *event.Task) {
			t.TenantID, t.Operation, t.IdempotencyKey = "t\U0001F600", "op\uE000\uFFFD", "k\u0000\u001f\u007f\"\\/"
			t.Input = json.RawMessage(`{"\uE000":1,"\ud83d\ude00":2,"a":3}`)
		}), "sha256:x", "", KeyRules{}},
		{"invalid UTF-8", with(func(t *event.Task) {
			t.TenantID, t.Notify = "a\xffb\xc3", &event.Notify{URL: "https://h.test/\xe2\x82"}
		}), "sha256:x", "", KeyRules{}},
		{"no input", with(func(t *event.Task) { t.Input = nil }), "sha256:x", "", KeyRules{}},
		{"empty strings", &event.Task{Input: json.RawMessage(`{}`)}, "", "", KeyRules{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := inputDoc(c.task, c.version, c.kfp, c.rules)
			if err != nil {
				t.Fatal(err)
			}
			in := storedInput{TenantID: c.task.TenantID, TaskType: c.task.TaskType, Operation: c.task.Operation,
				InputVersion: c.version, Input: c.task.Input, IdempotencyKey: c.task.IdempotencyKey, Notify: c.task.Notify,
				KeyFingerprint: c.kfp}
			if c.kfp == "" && (c.rules.Key != nil || c.rules.Payload != nil) {
				in.KeyJMESPath, in.PayloadJMESPath, in.Data = expr(c.rules.Key), expr(c.rules.Payload), c.task.Data
			}
			want, err := jcs.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("input.json\n got %s\nwant %s", got, want)
			}
		})
	}
}
