package event

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoFunctionReturnsConcreteError keeps *Error out of result lists: a
// function declared to return *Error hands its callers a typed nil that is
// a non-nil error once assigned to one. batchError (for the BatchErr field)
// and asError (the errors.As helper) are the only exceptions.
func TestNoFunctionReturnsConcreteError(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"batchError": true, "asError": true}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Type.Results == nil {
				continue
			}
			checked++
			for _, r := range fn.Type.Results.List {
				star, ok := r.Type.(*ast.StarExpr)
				if !ok {
					continue
				}
				if id, ok := star.X.(*ast.Ident); ok && id.Name == "Error" && !allowed[fn.Name.Name] {
					t.Errorf("%s: %s returns *Error; return error", name, fn.Name.Name)
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d functions with results found; is the test reading the package?", checked)
	}
}
