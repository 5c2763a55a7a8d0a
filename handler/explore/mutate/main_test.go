package main

import (
	"os"
	"path/filepath"
	"testing"
)

// Every mutant must still apply to the tree: a change to the code a mutant
// names breaks it, which the mutation run reports only after its quarter of
// an hour (BROKEN); here the README's test command fails at once.
func TestEveryMutantApplies(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	ms, err := load(filepath.Join("..", "testdata", "mutants"), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		t.Run(m.name, func(t *testing.T) {
			if _, err := applies(root, m); err != nil {
				t.Fatalf("%v: update the mutant with the code", err)
			}
			if m.old == m.new {
				t.Fatal("the new text is the old one")
			}
			if m.testPkg != "" {
				if _, err := os.Stat(filepath.Join(root, m.testPkg)); err != nil {
					t.Fatalf("test: %s: %v", m.testPkg, err)
				}
			}
		})
	}
}
