// Command testjson reads `go test -json` on stdin and prints what a person
// reads of a plain `go test` run — a line per package (ok, FAIL, no test
// files), the whole output of every failed test and of every failed build —
// then the slowest packages and tests, and checks what CI requires of the
// run: named tests that must pass and never skip, and counts of passes.
//
// CI runs the README's test command with GOFLAGS=-json and pipes it here, so
// one run both tests and proves that the store conformance suites ran:
//
//	GOFLAGS=-json go test -race -count=1 ./... | go run ./scripts/testjson \
//	    -require 'idempotency/mysqlstore:^TestConformance' -slowest 8
//
// -require PKG:RE (repeatable): in the package whose import path ends in PKG,
// at least one top-level test matches RE, and every test matching it (with
// its subtests) passed; a skip anywhere under it fails.
// -count RE=N (repeatable): exactly N passes of tests (full names, subtests
// with /) matching RE.
// -show RE: print every line of test output matching RE as it comes, passed
// tests' too (figures a test reports with t.Log).
// It exits 1 when a test or a build failed or a check is not met, 2 on a
// malformed stream or flag.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// show selects the output lines printed as they come (-show).
var show *regexp.Regexp

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	var requires, counts listFlag
	flag.Var(&requires, "require", "PKG:RE: tests matching RE in the package ending in PKG ran and passed, none skipped (repeatable)")
	flag.Var(&counts, "count", "RE=N: exactly N passes of tests matching RE (repeatable)")
	slowest := flag.Int("slowest", 0, "print the N slowest packages and top-level tests")
	showRE := flag.String("show", "", "RE: print the test output lines matching RE (also of passing tests)")
	flag.Parse()
	if *showRE != "" {
		re, err := regexp.Compile(*showRE)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testjson: -show:", err)
			os.Exit(2)
		}
		show = re
	}
	checks, err := parseChecks(requires, counts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testjson:", err)
		os.Exit(2)
	}
	os.Exit(run(os.Stdin, os.Stdout, checks, *slowest))
}

// run reads the stream from in, writes the report to out and returns the
// exit code.
func run(in io.Reader, out io.Writer, checks []check, slowest int) int {
	r, err := read(in, out)
	if err != nil {
		fmt.Fprintln(out, "testjson:", err)
		return 2
	}
	r.printFailures(out)
	if slowest > 0 {
		r.printSlowest(out, slowest)
	}
	code := 0
	if r.failed() {
		fmt.Fprintln(out, "FAIL: a test or a build failed (its output is above)")
		code = 1
	}
	for _, c := range checks {
		if msg := c.judge(r); msg != "" {
			fmt.Fprintln(out, "FAIL:", msg)
			code = 1
		} else {
			fmt.Fprintln(out, "ok:", c.describe(r))
		}
	}
	return code
}
