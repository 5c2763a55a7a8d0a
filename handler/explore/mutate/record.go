package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// byRE reads a kill of the explorer: the seed, then the configuration, which
// an enumerated scenario's kill spells enum:NAME/configuration.
var byRE = regexp.MustCompile(`^seed (\d+) on (\S+): `)

// hints are the header lines that make m's kill in r quick next time: the
// scenario: line of an enumerated scenario's kill, else the seed: line of
// the seed's; nil when the explorer did not kill it.
func hints(r result) map[string]string {
	k := byRE.FindStringSubmatch(r.by)
	if r.verdict != "killed" || r.m.testPkg != "" || k == nil {
		return nil
	}
	if name, ok := strings.CutPrefix(k[2], "enum:"); ok {
		name, _, _ = strings.Cut(name, "/")
		return map[string]string{"scenario": name, "seed": ""}
	}
	return map[string]string{"scenario": "", "seed": k[1] + " " + k[2]}
}

// record rewrites the seed: and scenario: lines of each mutant the explorer
// killed in results (an empty value drops the line); the rest of each file
// is kept byte for byte.
func record(dir string, results []result) error {
	for _, r := range results {
		h := hints(r)
		if h == nil {
			continue
		}
		path := filepath.Join(dir, r.m.name+".mutant")
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(setHeader(string(b), h)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// setHeader sets the header lines of a mutant file named in h, keeping their
// place, or adding one just before "--- old".
func setHeader(s string, h map[string]string) string {
	head, body, _ := strings.Cut(s, "--- old\n")
	var lines []string
	written := map[string]bool{}
	put := func(k string) {
		if v := h[k]; v != "" && !written[k] {
			lines = append(lines, k+": "+v)
		}
		written[k] = true
	}
	for _, line := range strings.Split(strings.TrimSuffix(head, "\n"), "\n") {
		k, _, _ := strings.Cut(line, ":")
		if _, ours := h[strings.TrimSpace(k)]; ours {
			put(strings.TrimSpace(k))
			continue
		}
		lines = append(lines, line)
	}
	put("scenario")
	put("seed")
	return strings.Join(lines, "\n") + "\n--- old\n" + body
}
