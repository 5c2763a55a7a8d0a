package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// ErrNotInRepo: the working directory is not inside the repository.
var ErrNotInRepo = errors.New("run from inside the idemgate repository")

// RepoRoot walks up from the working directory to the module's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for range 32 {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			bytes.Contains(b, []byte("module github.com/idemgate/idemgate\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", ErrNotInRepo
}

// Build builds the function into dir/main for the host. With deploy it
// builds as scripts/build.sh does (CGO off, -trimpath, stripped), so that
// measurements see the deploy artefact.
func Build(ctx context.Context, dir string, deploy bool) (string, error) {
	bin, err := BuildPackage(ctx, ".", filepath.Join(dir, "main"), deploy)
	if errors.Is(err, ErrNotInRepo) {
		return "", fmt.Errorf("%w (or give -bin)", err)
	}
	return bin, err
}

// BuildPackage builds the package pkg (relative to the repository root) into
// bin, with the deploy flags when deploy is set.
func BuildPackage(ctx context.Context, pkg, bin string, deploy bool) (string, error) {
	return buildPackage(ctx, pkg, bin, deploy, deploy)
}

// BuildProfiled builds pkg into bin as BuildPackage's deploy does, but keeps
// the symbol table (no -s -w): the same machine code, whose functions a
// profiler such as perf can name.
func BuildProfiled(ctx context.Context, pkg, bin string) (string, error) {
	return buildPackage(ctx, pkg, bin, true, false)
}

func buildPackage(ctx context.Context, pkg, bin string, deploy, strip bool) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	args := []string{"build", "-o", bin, pkg}
	switch {
	case deploy && strip:
		args = []string{"build", "-trimpath", "-ldflags=-s -w", "-o", bin, pkg}
	case deploy:
		args = []string{"build", "-trimpath", "-o", bin, pkg}
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = os.Environ()
	if deploy {
		cmd.Env = append(cmd.Env, "CGO_ENABLED=0")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}
