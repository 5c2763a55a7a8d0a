package main

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// check is one -require or -count flag.
type check struct {
	kind string // require, count
	pkg  string // require: the package's import path suffix
	re   *regexp.Regexp
	n    int // count: the passes wanted
}

func parseChecks(requires, counts []string) ([]check, error) {
	var cs []check
	for _, s := range requires {
		pkg, expr, ok := strings.Cut(s, ":")
		if !ok || pkg == "" || expr == "" {
			return nil, fmt.Errorf("-require %q: want PKG:RE", s)
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, fmt.Errorf("-require %q: %w", s, err)
		}
		cs = append(cs, check{kind: "require", pkg: pkg, re: re})
	}
	for _, s := range counts {
		i := strings.LastIndex(s, "=")
		if i <= 0 {
			return nil, fmt.Errorf("-count %q: want RE=N", s)
		}
		n, err := strconv.Atoi(s[i+1:])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("-count %q: N must be a whole number", s)
		}
		re, err := regexp.Compile(s[:i])
		if err != nil {
			return nil, fmt.Errorf("-count %q: %w", s, err)
		}
		cs = append(cs, check{kind: "count", re: re, n: n})
	}
	return cs, nil
}

// judge returns why the run does not meet c, or "".
func (c check) judge(r *result) string {
	if c.kind == "count" {
		if got := c.passes(r); got != c.n {
			return fmt.Sprintf("%d passes of tests matching %s, want %d", got, c.re, c.n)
		}
		return ""
	}
	name, p := c.find(r)
	if p == nil {
		return fmt.Sprintf("no package ending in %s ran", c.pkg)
	}
	ran := 0
	for test, action := range p.tests {
		if !c.re.MatchString(test) {
			continue
		}
		ran++
		if action != "pass" {
			return fmt.Sprintf("%s in %s ended %s, want pass", test, c.pkg, action)
		}
	}
	if ran == 0 {
		return fmt.Sprintf("no test matching %s ran in %s", c.re, c.pkg)
	}
	for _, k := range r.skips {
		top, _, _ := strings.Cut(k.test, "/")
		if k.pkg == name && c.re.MatchString(top) {
			return fmt.Sprintf("%s in %s was skipped", k.test, c.pkg)
		}
	}
	return ""
}

func (c check) find(r *result) (string, *pkgResult) {
	for _, name := range r.pkgOrder {
		if name == c.pkg || strings.HasSuffix(name, "/"+c.pkg) {
			return name, r.pkgs[name]
		}
	}
	return "", nil
}

func (c check) passes(r *result) int {
	n := 0
	for _, k := range r.passes {
		if c.re.MatchString(k.test) {
			n++
		}
	}
	return n
}

// describe says what a met check found.
func (c check) describe(r *result) string {
	if c.kind == "count" {
		return fmt.Sprintf("%d passes of tests matching %s", c.n, c.re)
	}
	_, p := c.find(r)
	var names []string
	for test := range p.tests {
		if c.re.MatchString(test) {
			names = append(names, test)
		}
	}
	sort.Strings(names)
	return fmt.Sprintf("%s: %s passed, nothing under them skipped", c.pkg, strings.Join(names, ", "))
}
