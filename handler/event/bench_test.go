package event

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkParse: Parse of the sample EventBridge bodies (the strict pass,
// the split, the envelope checks and the CloudEvents SDK), next to the
// floor of one json.Valid over the same bytes, so runs on a loaded machine
// can be compared as ratios.
func BenchmarkParse(b *testing.B) {
	for _, name := range []string{"single", "batch"} {
		body, err := os.ReadFile(filepath.Join("..", "..", "testdata", "events", "eventbridge-"+name+".json"))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("floor-json.Valid-"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !json.Valid(body) {
					b.Fatal("invalid")
				}
			}
		})
	}
}

// BenchmarkStrictJSON: the strict pass alone (grammar, UTF-8, repeated keys,
// depth) on the single-event sample.
func BenchmarkStrictJSON(b *testing.B) {
	body, err := os.ReadFile(filepath.Join("..", "..", "testdata", "events", "eventbridge-single.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := checkStrictJSON(body); err != nil {
			b.Fatal(err)
		}
	}
}
