package docs_test

// Checks of single pages against the repository: the picture, the
// troubleshooting codes, the quickstart's stack parameters.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// docs/architecture.png is rendered from docs/architecture.dot by
// scripts/diagram.sh, which records the source's SHA-256 beside it: a
// picture older than its source fails here (the PNG itself depends on the
// Graphviz version, so it is not compared byte for byte).
func TestDocsArchitecturePicture(t *testing.T) {
	root, _ := pages(t)
	src, err := os.ReadFile(filepath.Join(root, "docs", "architecture.dot"))
	if err != nil {
		t.Fatal(err)
	}
	png, err := os.ReadFile(filepath.Join(root, "docs", "architecture.png"))
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("docs/architecture.png is missing or not a PNG (%v): bash scripts/diagram.sh", err)
	}
	recorded, err := os.ReadFile(filepath.Join(root, "docs", "architecture.png.sha256"))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(src); strings.TrimSpace(string(recorded)) != hex.EncodeToString(sum[:]) {
		t.Fatal("docs/architecture.png is older than docs/architecture.dot: bash scripts/diagram.sh, then look at it")
	}
}

// Every errorType docs/troubleshooting.md names in its table's first column
// is one the code writes (a quoted string literal outside the tests): the
// page cannot document an error that does not exist.
func TestDocsTroubleshootingCodes(t *testing.T) {
	root, _ := pages(t)
	page, err := os.ReadFile(filepath.Join(root, "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	var code strings.Builder
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && strings.HasPrefix(d.Name(), ".") && p != root:
			return filepath.SkipDir
		case !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go"):
			b, err := os.ReadFile(p)
			code.Write(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	token := regexp.MustCompile("`([a-z]+(?:_[a-z]+)*)`")
	n := 0
	for _, l := range strings.Split(string(page), "\n") {
		cells := strings.Split(l, "|")
		if len(cells) < 4 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
			continue
		}
		for _, m := range token.FindAllStringSubmatch(cells[1], -1) {
			n++
			if !strings.Contains(code.String(), `"`+m[1]+`"`) && !strings.Contains(code.String(), `"`+m[1]+`:`) {
				t.Errorf("docs/troubleshooting.md names %q, which no code writes", m[1])
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d error codes found in the table: the parser is broken", n)
	}
}

// docs/quickstart.md's CreateStack names every parameter template.yml
// requires (those without a default), each once.
func TestDocsQuickstartParameters(t *testing.T) {
	root, _ := pages(t)
	tpl, err := os.ReadFile(filepath.Join(root, "template.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Parameters map[string]map[string]any `yaml:"Parameters"`
	}
	if err := yaml.Unmarshal(tpl, &doc); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(root, "docs", "quickstart.md"))
	if err != nil {
		t.Fatal(err)
	}
	required := 0
	for name, p := range doc.Parameters {
		if _, ok := p["Default"]; ok {
			continue
		}
		required++
		if n := strings.Count(string(page), "ParameterKey "+name+" "); n != 1 {
			t.Errorf("docs/quickstart.md's CreateStack names the required parameter %s %d times, want once", name, n)
		}
	}
	if required == 0 {
		t.Fatal("template.yml requires no parameter: the parser is broken")
	}
}
