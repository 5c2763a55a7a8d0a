package e2e_test

// KEY_JMESPATH and PAYLOAD_JMESPATH over the binary (docs/design.md §4).

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/idempotency/keys"
	"github.com/idemgate/idemgate/internal/dev/proc"
)

func orderEvent(id, order, content string) []byte {
	return taskEvent(id, content, map[string]any{"input": map[string]any{"order_id": order, "content": content}})
}

func TestKeyJMESPathOverTheBinary(t *testing.T) {
	for _, c := range []struct {
		name         string
		env          []string
		wantStatus   int
		wantDecision string
		wantError    string
	}{
		{"the key alone: another content is a mismatch", []string{"KEY_JMESPATH=input.order_id"}, 404, "PAYLOAD_MISMATCH", "payload_mismatch"},
		{"the payload too: another content is a duplicate", []string{"KEY_JMESPATH=input.order_id", "PAYLOAD_JMESPATH=input.order_id"},
			200, "REPEAT_DONE", ""},
		{"the default key: another content is another action", nil, 200, "FIRST", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			inst := start(t, append([]string{"STATE_DIR=" + t.TempDir()}, c.env...)...)
			order := "o-" + nonce()
			first := inst.invoke(t, orderEvent("ev-1-"+nonce(), order, "the first document"), "fc-1-"+nonce(), nil)
			second := inst.invoke(t, orderEvent("ev-2-"+nonce(), order, "another document"), "fc-2-"+nonce(), nil)
			f, s := first.json(t), second.json(t)
			if first.status != 200 || f["status"] != "SUCCEEDED" {
				t.Fatalf("first: %d %s", first.status, first.body)
			}
			if second.status != c.wantStatus || s["decision"] != c.wantDecision || (c.wantError != "" && s["errorType"] != c.wantError) {
				t.Fatalf("second: %d %s", second.status, second.body)
			}
			if same := s["idempotency_key"] == f["idempotency_key"]; same != (c.env != nil) {
				t.Fatalf("same key %v: %s / %s", same, first.body, second.body)
			}
		})
	}
}

func TestKeyJMESPathSelectingNothingOverTheBinary(t *testing.T) {
	inst := start(t, "STATE_DIR="+t.TempDir(), "KEY_JMESPATH=input.order_id")
	a := inst.invoke(t, taskEvent("ev-"+nonce(), "no order "+nonce(), nil), "fc-"+nonce(), nil)
	if m := a.json(t); a.status != 404 || m["errorType"] != "invalid_request" ||
		!strings.Contains(m["errorMessage"].(string), "KEY_JMESPATH") {
		t.Fatalf("%d %s", a.status, a.body)
	}
	fb := start(t, "STATE_DIR="+t.TempDir(), "KEY_JMESPATH=input.order_id", "KEY_FALLBACK=fingerprint")
	content, id := "no order "+nonce(), "ev-"+nonce() // the same data twice: the same fingerprint
	b1 := fb.invoke(t, taskEvent(id, content, nil), "fc-"+nonce(), nil)
	b2 := fb.invoke(t, taskEvent(id, content, nil), "fc-"+nonce(), nil)
	if b1.status != 200 || b2.status != 200 || b2.json(t)["decision"] != "REPEAT_DONE" {
		t.Fatalf("fallback: %d %s / %d %s", b1.status, b1.body, b2.status, b2.body)
	}
}

// A bad expression stops the function at start, naming the variable; no
// store is touched (the state directory stays empty).
func TestBadKeyJMESPathStopsTheStart(t *testing.T) {
	for _, v := range []string{"KEY_JMESPATH=input.[", "PAYLOAD_JMESPATH=nope(input)"} {
		t.Run(v, func(t *testing.T) {
			dir := t.TempDir()
			in, err := proc.Start(context.Background(), binary, proc.Options{Env: []string{"STATE_DIR=" + dir, v}})
			if err == nil {
				in.Kill()
				t.Fatal("started")
			}
			if name, _, _ := strings.Cut(v, "="); !strings.Contains(err.Error(), name+": keys: not a JMESPath expression") {
				t.Fatalf("%v", err)
			}
			if out, code := cli(t, []string{"STATE_DIR=" + dir, v}, "stats"); code != 2 || strings.Contains(out, "{") {
				t.Fatalf("stats: exit %d, %s", code, out)
			}
		})
	}
}

// main validate derives the key the function would, KEY_JMESPATH included.
func TestValidateHonoursKeyJMESPath(t *testing.T) {
	env := []string{"STATE_DIR=" + t.TempDir(), "KEY_JMESPATH=input.order_id"}
	order := "o-" + nonce()
	event := orderEvent("ev-"+nonce(), order, "some document")
	want, err := keys.FromJMESPath([]byte(`{"input":{"order_id":"`+order+`"}}`), "input.order_id")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "event.json")
	if err := os.WriteFile(file, event, 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := cli(t, env, "validate", "--event", file)
	var v struct {
		Events []struct {
			Key string `json:"idempotency_key"`
		} `json:"events"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || len(v.Events) != 1 {
		t.Fatalf("validate: exit %d: %s", code, out)
	}
	got := start(t, env...).invoke(t, event, "fc-"+nonce(), nil).json(t)["idempotency_key"]
	if got != v.Events[0].Key || got != want {
		t.Fatalf("validate says %s, the function %v, keys.FromJMESPath %s", v.Events[0].Key, got, want)
	}
}
