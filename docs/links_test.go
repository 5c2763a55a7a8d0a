package docs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// link matches a Markdown link or image: [text](target) or ![alt](target "title").
var link = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// inlineCode matches a code span, where brackets are not links.
var inlineCode = regexp.MustCompile("`[^`]*`")

func TestDocsLinks(t *testing.T) {
	root, files := pages(t)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		anchors[path] = headingAnchors(string(b))
		return anchors[path]
	}
	checked := 0
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		for _, l := range linksOf(t, f) {
			target, frag, _ := strings.Cut(l.target, "#")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path := f
			if target != "" {
				path = filepath.Join(filepath.Dir(f), target)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %q: no such file", rel, l.line, l.target)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[frag] {
				t.Errorf("%s:%d: link %q: no heading or <a id> %q there", rel, l.line, l.target, frag)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the parser is broken")
	}
}

type pageLink struct {
	line   int
	target string
}

// linksOf lists the links of a page outside code blocks and code spans.
func linksOf(t *testing.T, path string) []pageLink {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []pageLink
	for _, l := range prose(string(b)) {
		for _, m := range link.FindAllStringSubmatch(inlineCode.ReplaceAllString(l.text, ""), -1) {
			out = append(out, pageLink{l.n, m[1]})
		}
	}
	return out
}

type proseLine struct {
	n    int
	text string
}

// prose is a page's lines outside fenced code blocks, numbered from 1.
func prose(text string) []proseLine {
	var out []proseLine
	inCode, mark := false, ""
	for i, l := range strings.Split(text, "\n") {
		if m := fence.FindStringSubmatch(l); m != nil {
			switch {
			case !inCode:
				inCode, mark = true, m[2]
			case strings.HasPrefix(m[2], mark) && m[3] == "":
				inCode = false
			}
			continue
		}
		if !inCode {
			out = append(out, proseLine{i + 1, l})
		}
	}
	return out
}

var (
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	slugDrop   = regexp.MustCompile(`[^\p{L}\p{M}\p{N}\p{Pc} -]`)
)

// headingAnchors are the anchors GitHub gives a page's headings (lower
// case, punctuation but - and _ dropped, spaces to -, -1, -2 … on repeats),
// plus its <a id> and <a name> anchors.
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, pl := range prose(text) {
		l := pl.text
		for _, m := range htmlAnchor.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
		h := strings.TrimLeft(l, "#")
		if len(h) == len(l) || len(l)-len(h) > 6 || !strings.HasPrefix(h, " ") {
			continue
		}
		slug := strings.ReplaceAll(slugDrop.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), ""), " ", "-")
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}
