package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json); ImportPath is set
// on the build-output and build-fail events of Go 1.24 and later.
type event struct {
	Action     string
	Package    string
	Test       string
	Elapsed    float64
	Output     string
	ImportPath string
}

// testKey names one test of one package.
type testKey struct{ pkg, test string }

// result is what the whole stream said.
type result struct {
	pkgs      map[string]*pkgResult
	pkgOrder  []string
	outputs   map[testKey][]string // output of tests still running or failed
	failures  []testKey            // failed tests, in the order they ended
	buildFail []string             // import paths whose build failed
	builds    map[string][]string  // build output per import path
	passes    []testKey            // every pass, repeats included (-count)
	skips     []testKey
	topTimes  []timed
}

type pkgResult struct {
	action  string // pass, fail, skip (no test files) or "" (never ended)
	elapsed float64
	tests   map[string]string // top-level test -> its last action
}

type timed struct {
	name    string
	elapsed float64
}

// read consumes the stream, echoing package result lines and build errors to
// out as they come, so a long run shows its progress.
func read(in io.Reader, out io.Writer) (*result, error) {
	r := &result{pkgs: map[string]*pkgResult{}, outputs: map[testKey][]string{}, builds: map[string][]string{}}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(b) == 0 || b[0] != '{' { // go's own text (old build errors, vet): keep it
			fmt.Fprintln(out, string(b))
			continue
		}
		var e event
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		r.add(e, out)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(r.pkgs) == 0 && len(r.buildFail) == 0 {
		return nil, errors.New("no test events on stdin (was the run started with -json?)")
	}
	return r, nil
}

func (r *result) pkg(name string) *pkgResult {
	p := r.pkgs[name]
	if p == nil {
		p = &pkgResult{tests: map[string]string{}}
		r.pkgs[name] = p
		r.pkgOrder = append(r.pkgOrder, name)
	}
	return p
}

func (r *result) add(e event, out io.Writer) {
	switch e.Action {
	case "build-output":
		r.builds[e.ImportPath] = append(r.builds[e.ImportPath], e.Output)
		return
	case "build-fail":
		r.buildFail = append(r.buildFail, e.ImportPath)
		return
	}
	if e.Package == "" {
		return
	}
	p := r.pkg(e.Package)
	if e.Test == "" {
		r.addPackage(p, e, out)
		return
	}
	k := testKey{e.Package, e.Test}
	switch e.Action {
	case "output":
		r.outputs[k] = append(r.outputs[k], e.Output)
		if show != nil && show.MatchString(e.Output) {
			fmt.Fprintf(out, "%s %s: %s\n", shortPkg(e.Package), e.Test, strings.TrimSpace(e.Output))
		}
	case "pass", "skip", "fail":
		if top, _, sub := strings.Cut(e.Test, "/"); !sub {
			p.tests[top] = e.Action
			r.topTimes = append(r.topTimes, timed{shortPkg(e.Package) + " " + e.Test, e.Elapsed})
		}
		switch e.Action {
		case "pass":
			r.passes = append(r.passes, k)
			delete(r.outputs, k)
		case "skip":
			r.skips = append(r.skips, k)
			delete(r.outputs, k)
		case "fail":
			r.failures = append(r.failures, k)
		}
	}
}

// addPackage handles a package-level event: its result, and the lines a
// plain run prints for it (ok, FAIL, no test files, a panic's text).
func (r *result) addPackage(p *pkgResult, e event, out io.Writer) {
	switch e.Action {
	case "pass", "fail", "skip":
		p.action, p.elapsed = e.Action, e.Elapsed
	case "output":
		s := strings.TrimRight(e.Output, "\n")
		if s == "PASS" || s == "FAIL" || strings.HasPrefix(s, "=== ") || s == "" {
			return
		}
		fmt.Fprintln(out, s)
	}
}

func (r *result) failed() bool {
	if len(r.failures) > 0 || len(r.buildFail) > 0 {
		return true
	}
	for _, p := range r.pkgs {
		if p.action == "fail" || p.action == "" {
			return true
		}
	}
	return false
}

// printFailures prints each failed build's and test's whole output; a
// parent's output is left out when one of its subtests failed too (the
// subtest's is the informative part, and the parent's repeats it).
func (r *result) printFailures(out io.Writer) {
	for _, ip := range r.buildFail {
		fmt.Fprintf(out, "\n--- build of %s failed:\n%s", ip, strings.Join(r.builds[ip], ""))
	}
	failed := map[testKey]bool{}
	for _, k := range r.failures {
		failed[k] = true
	}
	for _, k := range r.failures {
		if hasFailedChild(k, r.failures) {
			continue
		}
		fmt.Fprintf(out, "\n--- %s (%s) failed:\n%s", k.test, k.pkg, strings.Join(r.outputs[k], ""))
	}
	for _, name := range r.pkgOrder {
		if p := r.pkgs[name]; p.action == "" {
			fmt.Fprintf(out, "\n--- %s never ended (killed, or a test binary crashed)\n", name)
		}
	}
}

func hasFailedChild(k testKey, failures []testKey) bool {
	for _, f := range failures {
		if f.pkg == k.pkg && strings.HasPrefix(f.test, k.test+"/") {
			return true
		}
	}
	return false
}

func (r *result) printSlowest(out io.Writer, n int) {
	var pkgs []timed
	for name, p := range r.pkgs {
		if p.action != "skip" {
			pkgs = append(pkgs, timed{shortPkg(name), p.elapsed})
		}
	}
	fmt.Fprintf(out, "\nslowest packages:\n")
	printTop(out, pkgs, n)
	fmt.Fprintf(out, "slowest top-level tests:\n")
	printTop(out, append([]timed(nil), r.topTimes...), n)
}

func printTop(out io.Writer, ts []timed, n int) {
	sort.SliceStable(ts, func(i, j int) bool { return ts[i].elapsed > ts[j].elapsed })
	for _, t := range ts[:min(n, len(ts))] {
		fmt.Fprintf(out, "  %8.1fs  %s\n", t.elapsed, t.name)
	}
}

// shortPkg drops the module path, which every package here shares.
func shortPkg(p string) string {
	if i := strings.Index(p, "/idemgate/idemgate/"); i >= 0 {
		return p[i+len("/idemgate/idemgate/"):]
	}
	return p
}
