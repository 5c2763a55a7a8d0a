package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every Go block of docs/library.md is quoted from Go code of the
// repository, which the build and the tests compile and the examples run
// (idempotency/example_test.go, quickstart_test.go, …): a snippet that does
// not compile, or that the code has left behind, fails here. A block is
// quoted when its paragraphs (split at blank lines) stand in one file, in
// order, each as consecutive lines; indentation is not compared, so a
// block may show the body of a function or a loop.
func TestLibraryGoBlocksAreQuoted(t *testing.T) {
	root, _ := pages(t)
	page, err := os.ReadFile(filepath.Join(root, "docs", "library.md"))
	if err != nil {
		t.Fatal(err)
	}
	var sources [][]string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root:
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go"):
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sources = append(sources, trimmed(string(b)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(string(page))
	if len(blocks) < 8 {
		t.Fatalf("%d Go blocks in docs/library.md: the fence is not found", len(blocks))
	}
	for line, block := range blocks {
		if !quotedIn(block, sources) {
			t.Errorf("docs/library.md:%d: this Go block is not code of the repository (quote an example that compiles and runs):\n%s",
				line, block)
		}
	}
}

// goBlocks are the ```go blocks of a page, by the line of their fence.
func goBlocks(page string) map[int]string {
	out := map[int]string{}
	lines := strings.Split(page, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) != "```" {
			j++
		}
		out[i+1] = strings.Join(lines[i+1:j], "\n")
		i = j
	}
	return out
}

// trimmed is text's lines without their surrounding white space.
func trimmed(text string) []string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return lines
}

// quotedIn reports whether block's paragraphs stand in one of sources, in
// order, each as consecutive lines.
func quotedIn(block string, sources [][]string) bool {
	var paras [][]string
	for _, p := range strings.Split(strings.TrimSpace(block), "\n\n") {
		paras = append(paras, trimmed(strings.TrimSpace(p)))
	}
	for _, src := range sources {
		at, ok := 0, true
		for _, p := range paras {
			i := indexOf(src[at:], p)
			if i < 0 {
				ok = false
				break
			}
			at += i + len(p)
		}
		if ok {
			return true
		}
	}
	return false
}

func indexOf(lines, seq []string) int {
	for i := 0; i+len(seq) <= len(lines); i++ {
		match := true
		for j := range seq {
			if lines[i+j] != seq[j] {
				match = false
				break
			}
		}
		if match {
			return i
		}
	}
	return -1
}
