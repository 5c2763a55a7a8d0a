package keys

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// sampleData is the data object of the single-event sample body.
func sampleData(b *testing.B) (data, input json.RawMessage) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "events", "eventbridge-single.json"))
	if err != nil {
		b.Fatal(err)
	}
	var ev struct {
		Data json.RawMessage `json:"data"`
	}
	var d struct {
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(raw, &ev); err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		b.Fatal(err)
	}
	return ev.Data, d.Input
}

// BenchmarkDerive: K, input_version and payload_hash of the sample task
// (one canonicalisation of its input and three hashed key documents).
func BenchmarkDerive(b *testing.B) {
	_, input := sampleData(b)
	f := Fields{TenantID: "acme", TaskType: "summarize", Operation: "summarize", Input: input}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Derive(f); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFingerprint: sha256 of the canonical data object.
func BenchmarkFingerprint(b *testing.B) {
	data, _ := sampleData(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Fingerprint(data); err != nil {
			b.Fatal(err)
		}
	}
}
