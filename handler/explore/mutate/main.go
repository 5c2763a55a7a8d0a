// Command mutate scores the recovery explorer (handler/explore) by
// mutation: each mutant in handler/explore/testdata/mutants re-introduces
// one known bug, and the explorer, run with the seeds and flags CI runs it
// with, must find it. Nothing in the tree changes: the mutated file is
// written to a temporary directory and compiled in with `go test -overlay`.
//
// A mutant file is
//
//	file: path/relative/to/repo/root.go
//	why: one line saying which guard this removes
//	test: ./package TestName|TestOther[/Subtest]   (optional: see below)
//	scenario: name   (optional: an enumerated scenario that kills it, run first)
//	seed: N config   (optional: a seed of the explorer that kills it, run first)
//	--- old
//	<exact text that occurs exactly once in the file>
//	--- new
//	<replacement text>
//
// Usage (from the repository root):
//
//	go run ./handler/explore/mutate [-j 2] [-only name,name] -- <explorer flags, e.g. -seeds 150>
//
// A mutant the explorer's world cannot reach (the input edge — parsing,
// limits — which the world never sends wrong, and fast-layer windows only a
// publish held back past another owner's registration opens) names
// instead, on a test: line, the package and the tests (subtests with /)
// that must kill it; they run with the
// mutant compiled in (`go test -overlay -run`), and it is killed when one
// fails. The kill table says which judged each mutant.
//
// A mutant the explorer judges may name, on a scenario: line, the
// enumerated scenario (TestEnumerate's -enum) that kills it: that scenario
// alone runs first, with the same flags, and a violation there kills the
// mutant at once; anything else (no violation, a failure) falls back to the
// whole run, so a wrong or stale name only costs its few seconds. The few
// mutants only a scenario reaches otherwise wait for its turn behind every
// seed (minutes each: most of the run).
//
// So too a seed: line names the seed and store configuration that killed
// the mutant last time: that one seed runs first (a second or two, where the
// whole run waits for that seed's turn on every configuration), and only a
// seed inside the run's own -seeds counts, so a hint never kills what the
// run itself would miss. -record writes the seed: and scenario: lines of
// every mutant the explorer killed from the kills of this run (run it after
// a change that moves the kills: a stale hint costs its seconds, nothing
// else).
//
// It prints a kill table (mutant, killed or survived, the seed and store
// configuration that killed it, seconds) and exits 1 if any mutant survived
// or is broken (its old text is not in the file exactly once, or it does not
// compile).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// mutant is one parsed .mutant file.
type mutant struct {
	name, file, why, old, new string
	testPkg, testRun          string // a test: line (input-edge mutants), else the explorer judges
	scenario                  string // a scenario: line: the enumerated scenario run first
	seed, seedStores          string // a seed: line: the seed and configuration run first
}

// result is one mutant's row of the kill table.
type result struct {
	m       mutant
	verdict string // killed, SURVIVED, BROKEN
	by      string // the seed and configuration that killed it, or why it is broken
	secs    float64
	log     string
}

func main() {
	dir := flag.String("dir", "handler/explore/testdata/mutants", "directory of .mutant files")
	jobs := flag.Int("j", 2, "mutants run at once")
	only := flag.String("only", "", "comma-separated mutant names to run (default all)")
	verbose := flag.Bool("v", false, "print the explorer's output of every mutant")
	all := flag.Bool("all", false, "run the known survivors too (testdata/mutants/survivors.txt)")
	rec := flag.Bool("record", false, "write the seed: and scenario: lines of the mutants the explorer killed")
	flag.Parse()
	exploreArgs := flag.Args()
	known, err := survivors(filepath.Join(*dir, "survivors.txt"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
	ms, err := load(*dir, *only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
	root, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
	tmp, err := os.MkdirTemp("", "idemgate-mutate-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Printf("%d mutants, %d at a time, explorer flags %q\n", len(ms), *jobs, exploreArgs)
	start := time.Now()
	results := make([]result, len(ms))
	sem := make(chan struct{}, max(*jobs, 1))
	var wg sync.WaitGroup
	for i, m := range ms {
		if why, ok := known[m.name]; ok && !*all && *only == "" {
			results[i] = result{m: m, verdict: "KNOWN", by: "not run: a known survivor (" + why + ")"}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i] = run(ctx, root, filepath.Join(tmp, m.name), m, exploreArgs)
			r := results[i]
			fmt.Printf("  %-44s %-8s %5.1fs  %s\n", r.m.name, r.verdict, r.secs, r.by)
			if *verbose || r.verdict == "BROKEN" {
				fmt.Println(indent(r.log))
			}
		}()
	}
	wg.Wait()
	code := report(results, time.Since(start))
	if *rec {
		if err := record(*dir, results); err != nil {
			fmt.Fprintln(os.Stderr, "mutate:", err)
			code = 2
		}
	}
	if err := os.RemoveAll(tmp); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
	}
	os.Exit(code)
}

// report prints the kill table and returns the exit code.
func report(results []result, took time.Duration) int {
	fmt.Printf("\nkill table (%s in all)\n", took.Round(time.Second))
	fmt.Printf("%-44s %-8s %7s  %s\n", "mutant", "verdict", "seconds", "killed by / why")
	bad, skipped := 0, 0
	for _, r := range results {
		fmt.Printf("%-44s %-8s %7.1f  %s\n", r.m.name, r.verdict, r.secs, r.by)
		if r.verdict == "KNOWN" {
			skipped++
			continue
		}
		if r.verdict != "killed" {
			bad++
			fmt.Printf("    %s: %s\n", r.m.file, r.m.why)
		}
	}
	byTests := 0
	for _, r := range results {
		if r.verdict == "killed" && r.m.testPkg != "" {
			byTests++
		}
	}
	fmt.Printf("%d of %d mutants killed (%d by the explorer, %d by the tests they name), %d known survivors not run (survivors.txt; -all runs them)\n",
		len(results)-bad-skipped, len(results)-skipped, len(results)-bad-skipped-byTests, byTests, skipped)
	if bad > 0 {
		return 1
	}
	return 0
}

// survivors reads the known survivors: "name: why" lines (# comments),
// mutants the explorer does not kill yet, each with the reason.
func survivors(path string) (map[string]string, error) {
	out := map[string]string{}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, why, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(why) == "" {
			return nil, fmt.Errorf("%s: %q: want \"name: why\"", path, line)
		}
		out[strings.TrimSpace(name)] = strings.TrimSpace(why)
	}
	return out, nil
}

func load(dir, only string) ([]mutant, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.mutant"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	want := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		if n != "" {
			want[n] = true
		}
	}
	var ms []mutant
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".mutant")
		if len(want) > 0 && !want[name] {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		m, err := parse(name, string(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		ms = append(ms, m)
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no mutants in %s", dir)
	}
	return ms, nil
}

// parse reads the mutant format (see the package comment). The old and new
// texts keep their lines exactly, without the newline that ends the last.
func parse(name, s string) (mutant, error) {
	m := mutant{name: name}
	head, rest, ok := strings.Cut(s, "--- old\n")
	if !ok {
		return m, errors.New(`no "--- old" line`)
	}
	m.old, m.new, ok = strings.Cut(rest, "\n--- new\n")
	if !ok {
		if m.old, ok = strings.CutSuffix(rest, "\n--- new"); !ok { // an empty replacement
			return m, errors.New(`no "--- new" line`)
		}
	}
	m.new = strings.TrimSuffix(m.new, "\n")
	for _, line := range strings.Split(strings.TrimSpace(head), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch strings.TrimSpace(k) {
		case "file":
			m.file = strings.TrimSpace(v)
		case "why":
			m.why = strings.TrimSpace(v)
		case "scenario":
			m.scenario = strings.TrimSpace(v)
		case "seed":
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%s %s", &m.seed, &m.seedStores); err != nil || !isSeed(m.seed) {
				return m, fmt.Errorf("seed: %q: want \"N config\"", strings.TrimSpace(v))
			}
		case "test":
			m.testPkg, m.testRun, _ = strings.Cut(strings.TrimSpace(v), " ")
			m.testRun = strings.TrimSpace(m.testRun)
			if !strings.HasPrefix(m.testPkg, "./") || m.testRun == "" {
				return m, fmt.Errorf("test: %q: want \"./package TestName|TestOther\"", strings.TrimSpace(v))
			}
		}
	}
	if m.file == "" || m.why == "" || m.old == "" {
		return m, errors.New("file, why and an old text are required")
	}
	return m, nil
}

// buildFlags make each mutant's build cheaper without changing what it
// runs: no symbol table or DWARF (the link is most of a mutant's build),
// and no vet (the tree itself is vetted by CI's own step).
var buildFlags = []string{"-ldflags=-s -w"}

var (
	killRE = regexp.MustCompile(`seed (\d+) on (\S+): (\d+) violations:\n\s+(.*)`)
	failRE = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)
	// A mutant of one store or layer runs only the configurations that use it.
	storesOf = map[string]string{
		"idempotency/boltstore/":  "bolt,bolt+redis",
		"idempotency/mysqlstore/": "mysql,mysql+redis",
		"idempotency/redisfast/":  "bolt+redis,mysql+redis",
	}
)

// storeOf is the store configurations that use the file, when it belongs
// to one store or layer.
func storeOf(file string) (string, bool) {
	for prefix, s := range storesOf {
		if strings.HasPrefix(file, prefix) {
			return s, true
		}
	}
	return "", false
}

// applies returns the text of m's file if m applies to it: its old text
// occurs there exactly once.
func applies(root string, m mutant) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(root, m.file))
	if err != nil {
		return nil, err
	}
	if n := strings.Count(string(b), m.old); n != 1 {
		return nil, fmt.Errorf("the old text occurs %d times in %s (want exactly 1)", n, m.file)
	}
	return b, nil
}

// run builds the explorer with m applied and runs it until its first
// violation.
func run(ctx context.Context, root, work string, m mutant, args []string) result {
	start := time.Now()
	r := result{m: m}
	done := func(verdict, by, log string) result {
		r.verdict, r.by, r.log, r.secs = verdict, by, log, time.Since(start).Seconds()
		return r
	}
	src := filepath.Join(root, m.file)
	b, err := applies(root, m)
	if err != nil {
		return done("BROKEN", err.Error(), "")
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return done("BROKEN", err.Error(), "")
	}
	mutated := filepath.Join(work, filepath.Base(m.file))
	overlay := filepath.Join(work, "overlay.json")
	ov, _ := json.Marshal(map[string]map[string]string{"Replace": {src: mutated}})
	if err := os.WriteFile(mutated, []byte(strings.Replace(string(b), m.old, m.new, 1)), 0o644); err != nil {
		return done("BROKEN", err.Error(), "")
	}
	if err := os.WriteFile(overlay, ov, 0o644); err != nil {
		return done("BROKEN", err.Error(), "")
	}
	bin := filepath.Join(work, "explore.test")
	if ctx.Err() != nil {
		return done("BROKEN", "interrupted", "")
	}
	if m.testPkg != "" {
		verdict, by, log := runTests(ctx, root, overlay, m)
		return done(verdict, by, log)
	}
	build := exec.CommandContext(ctx, "go", append(append([]string{"test", "-c", "-o", bin, "-overlay", overlay}, buildFlags...), "./handler/explore/")...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return done("BROKEN", "does not compile", string(out))
	}
	var stores []string
	if s, ok := storeOf(m.file); ok && !hasFlag(args, "stores") {
		stores = append(stores, "-stores", s)
	}
	if m.scenario != "" {
		first := []string{"-test.run", "^TestEnumerate$", "-test.count", "1", "-test.parallel", "6", "-stop", "-enum", m.scenario}
		if log, _ := explore(ctx, root, bin, append(append(first, stores...), args...)); killedBy(log) != "" {
			return done("killed", killedBy(log), log)
		}
	}
	if hintInRun(m, args) {
		first := append([]string{"-test.run", "^TestExplore$", "-test.count", "1", "-stop"}, args...)
		first = append(first, "-seed", m.seed, "-stores", m.seedStores)
		if log, _ := explore(ctx, root, bin, first); killedBy(log) != "" {
			return done("killed", killedBy(log), log)
		}
	}
	targs := []string{"-test.run", "^(TestEnumerate|TestExplore)$", "-test.count", "1", "-test.parallel", "6", "-stop"}
	log, err := explore(ctx, root, bin, append(append(targs, stores...), args...))
	if by := killedBy(log); by != "" {
		return done("killed", by, log)
	}
	if err != nil {
		return done("BROKEN", "the explorer failed without a violation: "+firstLine(lastLines(log, 5)), log)
	}
	return done("SURVIVED", "", log)
}

// killedBy is the seed, configuration and violation an explorer's log
// reports first, or "" when it reports none.
func killedBy(log string) string {
	k := killRE.FindStringSubmatch(log)
	if k == nil {
		return ""
	}
	return fmt.Sprintf("seed %s on %s: %s", k[1], k[2], firstLine(k[4]))
}

// explore runs the compiled explorer with targs; its output and error.
func explore(ctx context.Context, root, bin string, targs []string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, targs...)
	cmd.Dir = filepath.Join(root, "handler", "explore")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// runTests judges an input-edge mutant by the tests its test: line names.
func runTests(ctx context.Context, root, overlay string, m mutant) (verdict, by, log string) {
	levels := strings.Split(m.testRun, "/") // -run matches subtests level by level
	for i, l := range levels {
		levels[i] = "^(" + l + ")$"
	}
	args := append([]string{"test", "-count=1", "-vet=off", "-overlay", overlay}, buildFlags...)
	cmd := exec.CommandContext(ctx, "go", append(args, "-run", strings.Join(levels, "/"), m.testPkg)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	log = string(out)
	switch {
	case err == nil && strings.Contains(log, "[no tests to run]"):
		return "BROKEN", "test: " + m.testRun + " matches no test in " + m.testPkg, log
	case err == nil:
		return "SURVIVED", "", log
	case failRE.MatchString(log):
		deepest := ""
		for _, f := range failRE.FindAllStringSubmatch(log, -1) {
			if len(f[1]) > len(deepest) {
				deepest = f[1]
			}
		}
		return "killed", "test " + deepest + " (" + m.testPkg + ")", log
	}
	return "BROKEN", "the tests failed without a test failure (does it compile?): " + firstLine(lastLines(log, 5)), log
}

// hintInRun reports whether m's seed: line names a seed the run itself
// explores (1 to -seeds, the explorer's default 25) on a configuration it
// explores.
func hintInRun(m mutant, args []string) bool {
	if m.seed == "" || hasFlag(args, "first") || hasFlag(args, "seed") {
		return false
	}
	n, seeds := 0, 25
	fmt.Sscan(m.seed, &n)
	if v := flagValue(args, "seeds"); v != "" {
		fmt.Sscan(v, &seeds)
	}
	if v := flagValue(args, "stores"); v != "" && !slices.Contains(strings.Split(v, ","), m.seedStores) {
		return false
	}
	if prefix, ok := storeOf(m.file); ok && !slices.Contains(strings.Split(prefix, ","), m.seedStores) {
		return false
	}
	return n >= 1 && n <= seeds
}

func isSeed(s string) bool {
	n := 0
	_, err := fmt.Sscan(s, &n)
	return err == nil && n > 0 && fmt.Sprint(n) == s
}

// flagValue is the value of the last -name=v or -name v in args, or "".
func flagValue(args []string, name string) string {
	v := ""
	for i, a := range args {
		k, val, eq := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || k != name {
			continue
		}
		if eq {
			v = val
		} else if i+1 < len(args) {
			v = args[i+1]
		}
	}
	return v
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-") == name {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 140 {
		s = s[:140] + "…"
	}
	return s
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func indent(s string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(lastLines(s, 60)))
	for sc.Scan() {
		b.WriteString("      | " + sc.Text() + "\n")
	}
	return b.String()
}
