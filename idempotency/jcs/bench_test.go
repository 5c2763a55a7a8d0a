package jcs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkCanonicalize: a task's data object as EventBridge delivers it
// (indented, unsorted) and all golden inputs one after another, next to the
// floor of json.Valid over the same bytes.
func BenchmarkCanonicalize(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "events", "eventbridge-single.json"))
	if err != nil {
		b.Fatal(err)
	}
	var ev struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &ev); err != nil {
		b.Fatal(err)
	}
	var golden [][]byte
	for _, tc := range loadGolden(b) {
		golden = append(golden, []byte(tc.Input))
	}
	b.Run("task-data", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Canonicalize(ev.Data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("floor-json.Valid-task-data", func(b *testing.B) {
		for b.Loop() {
			if !json.Valid(ev.Data) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("golden", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, in := range golden {
				if _, err := Canonicalize(in); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkAppendStringObject: one key document (the business key's four
// members).
func BenchmarkAppendStringObject(b *testing.B) {
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendStringObject(buf[:0], "tenant_id", "acme", "task_type", "summarize",
			"input_version", "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "operation", "summarize")
	}
}
