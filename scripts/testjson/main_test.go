package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// The streams in testdata are real `go test -json` runs of a small module
// (package a passes; b skips one subtest and fails another; c does not
// build; count2 is a passing run with -count=2).
func TestReport(t *testing.T) {
	for _, tc := range []struct {
		name, in          string
		requires, counts  []string
		slowest, wantCode int
	}{
		{name: "a passing run meets its checks", in: "pass", requires: []string{"idemgate/a:^TestConformance"}, counts: []string{"^TestConformanceX/one$=1"}, slowest: 2},
		{name: "a failing test, a skip and a broken build", in: "mixed", requires: []string{"idemgate/a:^TestConformance"}, wantCode: 1},
		{name: "a failed required test", in: "mixed", requires: []string{"idemgate/b:^TestConformance"}, wantCode: 1},
		{name: "a skip under a required test fails it", in: "skip", requires: []string{"idemgate/d:^TestConformance"}, wantCode: 1},
		{name: "a required package that did not run", in: "pass", requires: []string{"idemgate/zz:^TestConformance"}, wantCode: 1},
		{name: "no required test in the package", in: "pass", requires: []string{"idemgate/a:^TestNothing"}, wantCode: 1},
		{name: "repeats are counted", in: "count2", counts: []string{"^TestConformanceX/one$=2", "^TestOther$=2"}},
		{name: "a count that is not met says by how much", in: "count2", counts: []string{"^TestConformanceX/one$=3"}, wantCode: 1},
		{name: "not a json stream", in: "text", wantCode: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checks, err := parseChecks(tc.requires, tc.counts)
			if err != nil {
				t.Fatal(err)
			}
			in, err := os.Open(filepath.Join("testdata", tc.in+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			var out bytes.Buffer
			if code := run(in, &out, checks, tc.slowest); code != tc.wantCode {
				t.Errorf("exit %d, want %d; output:\n%s", code, tc.wantCode, out.String())
			}
			golden := filepath.Join("testdata", strings.ReplaceAll(strings.ReplaceAll(tc.name, ",", ""), " ", "-")+".golden")
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != string(want) {
				t.Errorf("output:\n%s\nwant (%s):\n%s", out.String(), golden, want)
			}
		})
	}
}

func TestMalformedFlags(t *testing.T) {
	for _, tc := range []struct {
		name             string
		requires, counts []string
	}{
		{name: "require without a package", requires: []string{"^TestX"}},
		{name: "require with a bad expression", requires: []string{"a:("}},
		{name: "count without a number", counts: []string{"^TestX"}},
		{name: "count with a negative number", counts: []string{"^TestX=-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseChecks(tc.requires, tc.counts); err == nil {
				t.Error("accepted")
			}
		})
	}
}

// -show prints the matching output lines of every test, passing ones too.
func TestShow(t *testing.T) {
	in := `{"Action":"run","Package":"x/e2e","Test":"TestF"}
{"Action":"output","Package":"x/e2e","Test":"TestF","Output":"    f_test.go:9: FAILOVER mode=async extra_model_calls=1\n"}
{"Action":"output","Package":"x/e2e","Test":"TestF","Output":"    f_test.go:10: other\n"}
{"Action":"pass","Package":"x/e2e","Test":"TestF","Elapsed":1}
{"Action":"pass","Package":"x/e2e","Elapsed":1}
`
	show = regexp.MustCompile(`FAILOVER `)
	defer func() { show = nil }()
	var out bytes.Buffer
	if code := run(strings.NewReader(in), &out, nil, 0); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	if got := out.String(); !strings.Contains(got, "e2e TestF: f_test.go:9: FAILOVER mode=async extra_model_calls=1\n") ||
		strings.Contains(got, "other") {
		t.Fatalf("output:\n%s", got)
	}
}
