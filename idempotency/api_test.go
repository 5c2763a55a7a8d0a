package idempotency_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docs/library.md lists the package's exported names and their count; a
// name added or removed without the guide saying so fails here.
func TestLibraryDocListsTheAPI(t *testing.T) {
	doc, err := os.ReadFile("../docs/library.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "<!-- api:begin")
	section, _, ok2 := strings.Cut(section, "<!-- api:end -->")
	if !ok || !ok2 {
		t.Fatal("docs/library.md has no api:begin … api:end section")
	}
	var listed []string
	for _, m := range regexp.MustCompile("`([A-Z][A-Za-z]*)`").FindAllStringSubmatch(section, -1) {
		listed = append(listed, m[1])
	}
	slices.Sort(listed)
	have := exported(t)
	if !slices.Equal(listed, have) {
		t.Errorf("docs/library.md lists\n%v\nthe package exports\n%v", listed, have)
	}
	options, enums := 0, 0
	for _, n := range have {
		switch {
		case strings.HasPrefix(n, "With"):
			options++
		case n != "Decision" && strings.HasPrefix(n, "Decision"), n != "Class" && n != "Classify" && strings.HasPrefix(n, "Class"):
			enums++
		}
	}
	// The breakdown too: the trial found it off by one.
	want := fmt.Sprintf("lists %d exported names — %d declarations, the %d options and the %d constants of its two enums",
		len(have), len(have)-options-enums, options, enums)
	if !strings.Contains(strings.Join(strings.Fields(section), " "), want) {
		t.Errorf("docs/library.md does not say %q", want)
	}
}

// exported lists the package's exported top-level names (methods apart).
func exported(t *testing.T) []string {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range pkgs["idempotency"].Files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names = append(names, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names = append(names, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names = append(names, n.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(names)
	return names
}
