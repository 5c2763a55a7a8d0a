package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
			if m.seed != "" && !slices.Contains([]string{"bolt", "bolt+redis", "mysql", "mysql+redis"}, m.seedStores) {
				t.Fatalf("seed: %s %s: not a store configuration of the explorer", m.seed, m.seedStores)
			}
			if m.seed != "" && m.testPkg != "" {
				t.Fatal("seed: and test: on one mutant: a named test judges it, the seed would never run")
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

func TestRecordedHints(t *testing.T) {
	const file = "file: handler/x.go\nwhy: it breaks\nscenario: old-one\n--- old\na\n--- new\nb\n"
	for _, tc := range []struct {
		name, by, verdict, testPkg, want string
	}{
		{name: "a seed's kill replaces a stale scenario", by: "seed 81 on bolt+redis: k1: lost", verdict: "killed",
			want: "file: handler/x.go\nwhy: it breaks\nseed: 81 bolt+redis\n--- old\na\n--- new\nb\n"},
		{name: "a scenario's kill names the scenario", by: "seed 16 on enum:copy-mark/mysql: fc-a: twice", verdict: "killed",
			want: "file: handler/x.go\nwhy: it breaks\nscenario: copy-mark\n--- old\na\n--- new\nb\n"},
		{name: "a survivor keeps its file", verdict: "SURVIVED", want: file},
		{name: "a named test's kill keeps its file", by: "test TestX (./handler)", verdict: "killed", testPkg: "./handler", want: file},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "m.mutant")
			if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
				t.Fatal(err)
			}
			r := result{m: mutant{name: "m", testPkg: tc.testPkg}, verdict: tc.verdict, by: tc.by}
			if err := record(dir, []result{r}); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			if string(got) != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
			if _, err := parse("m", string(got)); err != nil {
				t.Errorf("the recorded file does not parse: %v", err)
			}
		})
	}
}

func TestSeedHintsOnlyInsideTheRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    mutant
		args []string
		want bool
	}{
		{name: "inside -seeds", m: mutant{file: "handler/x.go", seed: "81", seedStores: "bolt"}, args: []string{"-seeds", "250"}, want: true},
		{name: "past -seeds", m: mutant{file: "handler/x.go", seed: "251", seedStores: "bolt"}, args: []string{"-seeds=250"}},
		{name: "past the default 25", m: mutant{file: "handler/x.go", seed: "26", seedStores: "bolt"}},
		{name: "a configuration the run leaves out", m: mutant{file: "handler/x.go", seed: "3", seedStores: "mysql"}, args: []string{"-stores", "bolt"}},
		{name: "a configuration the store's file is not in", m: mutant{file: "idempotency/boltstore/store.go", seed: "3", seedStores: "mysql"}},
		{name: "no hint", m: mutant{file: "handler/x.go"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := hintInRun(tc.m, tc.args); got != tc.want {
				t.Errorf("hintInRun = %v, want %v", got, tc.want)
			}
		})
	}
}
