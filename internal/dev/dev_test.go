package dev

import (
	"os/exec"
	"strings"
	"testing"
)

// The function never links a development-only package.
func TestTheFunctionImportsNoDevPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/idemgate/idemgate").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list listed %d packages: %s", len(deps), out)
	}
	for _, p := range deps {
		if strings.HasPrefix(p, "github.com/idemgate/idemgate/internal/dev") {
			t.Errorf("the function imports %s", p)
		}
	}
}
