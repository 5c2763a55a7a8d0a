package main

import (
	"os"
	"path/filepath"
	"testing"
)

// An unfinished record passes invariant 1 only as a dead letter's: no
// delivery answered, one dead-lettered, and no input.json for the sweeper
// to run it from.
func TestCarriedByDeadLetter(t *testing.T) {
	const key = "k"
	for _, c := range []struct {
		name  string
		k     keyTally
		input bool
		want  bool
	}{
		{"dead-lettered, no input", keyTally{dead: 1}, false, true},
		{"a delivery was answered", keyTally{ok: 1, dead: 1}, false, false},
		{"nothing dead-lettered", keyTally{}, false, false},
		{"input saved: the sweeper carries it", keyTally{dead: 1}, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.input {
				p := filepath.Join(dir, "tasks", key, "input.json")
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := carriedByDeadLetter(dir, key, c.k); got != c.want {
				t.Fatalf("carried by a dead letter: %v, want %v", got, c.want)
			}
		})
	}
}
