package main

import (
	"os"
	"path/filepath"
	"regexp"
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
	scenarios := scenarioNames(t, filepath.Join(root, "handler", "explore"))
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
			if m.scenario != "" && !scenarios[m.scenario] {
				t.Fatalf("scenario: %s: no enumerated scenario of that name in handler/explore", m.scenario)
			}
		})
	}
}

// scenarioNames are the names of the explorer's enumerated scenarios, as
// their declarations spell them ({name: "…", stores: "…").
func scenarioNames(t *testing.T, dir string) map[string]bool {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range scenarioRE.FindAllSubmatch(b, -1) {
			names[string(m[1])] = true
		}
	}
	if len(names) == 0 {
		t.Fatal("no scenario declarations found in handler/explore")
	}
	return names
}

var scenarioRE = regexp.MustCompile(`\{name: "([a-z0-9-]+)", stores: "`)
