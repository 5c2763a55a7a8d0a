package deploy

import (
	"archive/zip"
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The deploy artefact, built once per test binary by scripts/build.sh itself
// (TestBuildScript checks it, TestLocalInvoke runs it).
var build struct {
	once sync.Once
	dir  string
	log  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

// buildArtefact runs scripts/build.sh into a temporary OUT_DIR and returns
// it with the script's output.
func buildArtefact(t *testing.T) (outDir, log string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the whole binary")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("bash is required (CI=true) but not found")
		}
		t.Skip("no bash (set CI=true to make this a failure)")
	}
	build.once.Do(func() {
		if build.dir, build.err = os.MkdirTemp("", "idemgate-deploy-"); build.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bash, filepath.Join(repoRoot, "scripts", "build.sh"))
		cmd.Env = append(os.Environ(), "OUT_DIR="+build.dir, "GOOS=darwin", "CGO_ENABLED=1") // the script must override these
		out, err := cmd.CombinedOutput()
		build.log = string(out)
		if err != nil {
			build.err = fmt.Errorf("scripts/build.sh: %w\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.dir, build.log
}

// TestBuildScript builds the deploy zip into a temporary directory and checks
// that FC can run it: main at the root, mode 0755, a static linux/amd64 ELF
// built with CGO off and -trimpath.
func TestBuildScript(t *testing.T) {
	out, log := buildArtefact(t)
	if !strings.Contains(log, "bytes") {
		t.Errorf("build.sh does not print the sizes:\n%s", log)
	}

	z, err := zip.OpenReader(filepath.Join(out, "dist", "function.zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	if len(z.File) != 1 || z.File[0].Name != "main" {
		var names []string
		for _, f := range z.File {
			names = append(names, f.Name)
		}
		t.Fatalf("zip holds %v, want exactly [main]", names)
	}
	entry := z.File[0]
	if mode := entry.Mode(); !mode.IsRegular() || mode.Perm() != 0o755 {
		t.Errorf("main has mode %v in the zip, want -rwxr-xr-x", mode)
	}
	rc, err := entry.Open()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	target, err := os.ReadFile(filepath.Join(out, "target", "main"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bin, target) {
		t.Error("the zip's main differs from target/main (what s deploy uploads)")
	}
	if st, err := os.Stat(filepath.Join(out, "target", "main")); err == nil && st.Mode().Perm()&0o111 == 0 {
		t.Errorf("target/main is not executable: %v", st.Mode())
	}

	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("main is not an ELF file: %v", err)
	}
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 || f.Type != elf.ET_EXEC {
		t.Errorf("ELF %v %v %v, want a 64-bit x86-64 executable", f.Class, f.Machine, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("main asks for a dynamic loader: it must be static (CGO_ENABLED=0)")
		}
	}
	info, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("no Go build info in main: %v", err)
	}
	want := map[string]string{"GOOS": "linux", "GOARCH": "amd64", "CGO_ENABLED": "0", "-trimpath": "true"}
	for _, s := range info.Settings {
		if w, ok := want[s.Key]; ok {
			if s.Value != w {
				t.Errorf("built with %s=%s, want %s", s.Key, s.Value, w)
			}
			delete(want, s.Key)
		}
	}
	if len(want) > 0 {
		t.Errorf("build settings missing from main: %v", want)
	}
	// -trimpath keeps -ldflags out of the build info: look at the sections instead.
	for _, name := range []string{".symtab", ".debug_info", ".zdebug_info"} {
		if f.Section(name) != nil {
			t.Errorf("main has %s: build with -ldflags='-s -w'", name)
		}
	}
}
