package handler

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemgate/idemgate/handler/event"
)

var updateDerive = flag.Bool("update-derive", false, "rewrite testdata/derive.golden.json from the current implementation")

// deriveCases are events whose keys and input.json the template derived
// before KEY_JMESPATH existed; without it they must stay byte for byte.
var deriveCases = []struct {
	name     string
	data     string
	fallback bool
}{
	{"content key", `{"tenant_id":"t1","task_type":"summarize","operation":"summarize","input":{"content":"a b c"}}`, false},
	{"member order", `{"operation":"summarize","input":{"z":1,"a":[1,2.5,"x"]},"task_type":"summarize","tenant_id":"t1"}`, false},
	{"explicit key", `{"tenant_id":"t1","task_type":"summarize","operation":"summarize","idempotency_key":"order-7","input":{"content":"x"}}`, false},
	{"given version", `{"tenant_id":"t1","task_type":"summarize","operation":"summarize","input_version":"v3","input":{"content":"x"}}`, false},
	{"notify and request id", `{"tenant_id":"t2","task_type":"summarize","operation":"op","request_id":"r-9","notify":{"url":"https://h.example/x"},"input":{"content":"ü €"}}`, false},
	{"fingerprint fallback", `{"task_type":"summarize","input":{"content":"no tenant"},"extra":true}`, true},
}

type deriveGolden struct {
	Key, InputVersion, PayloadHash, LegacyPayloadHash, InputJSON string
}

func TestDefaultKeysAreUnchanged(t *testing.T) {
	got := map[string]deriveGolden{}
	for _, c := range deriveCases {
		body := `{"specversion":"1.0","id":"e1","source":"s","type":"t","datacontenttype":"application/json","data":` + c.data + `}`
		inv, err := event.ParseWith([]byte(body), event.Options{KeyFallback: c.fallback})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		p := &Pipeline{KeyFallback: c.fallback}
		ev := inv.Tasks[0]
		keyFP, err := p.keyFingerprint(ev)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		d, keyFP, err := p.keyRules().derive(ev, keyFP)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		doc, err := inputDoc(ev, d.InputVersion, keyFP, KeyRules{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got[c.name] = deriveGolden{d.Key, d.InputVersion, d.PayloadHash, d.LegacyPayloadHash, string(doc)}
	}
	path := filepath.Join("testdata", "derive.golden.json")
	if *updateDerive {
		b, _ := json.MarshalIndent(got, "", "  ")
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]deriveGolden
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s:\n got %+v\nwant %+v", name, got[name], w)
		}
	}
	if len(want) != len(deriveCases) {
		t.Errorf("golden has %d cases, the table %d", len(want), len(deriveCases))
	}
}
