package ossresult_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/ossresult"
	"github.com/idemgate/idemgate/ossresult/resulttest"
)

func openLocal(t *testing.T) resulttest.Subject {
	dir := t.TempDir()
	s, err := ossresult.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	return resulttest.Subject{Store: s, Keys: func(t *testing.T) []string { return localKeys(t, dir) },
		Kind: func(t *testing.T, key string) string { return localKind(t, dir, key) }}
}

// localKind reads the kind from the object's metadata file.
func localKind(t *testing.T, dir, key string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(key)) + ".meta.json")
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Kind string }
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m.Kind
}

// localKeys lists every file but metadata sidecars, so leftover temp files
// show up as unexpected keys.
func localKeys(t *testing.T, dir string) []string {
	t.Helper()
	var keys []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".meta.json") {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		keys = append(keys, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

func TestLocalSuite(t *testing.T) { resulttest.Run(t, openLocal) }

func TestLocalRef(t *testing.T) {
	dir := t.TempDir()
	s, err := ossresult.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	ref, err := s.PutOnce(context.Background(), "a/b.json", []byte("{}"), "application/json", ossresult.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	want := "file://" + filepath.ToSlash(filepath.Join(abs, "a", "b.json"))
	if ref != want {
		t.Fatalf("ref = %q, want %q", ref, want)
	}
	if b, err := os.ReadFile(filepath.Join(abs, "a", "b.json")); err != nil || string(b) != "{}" {
		t.Fatalf("the ref's file holds %q, %v: want the raw body", b, err)
	}
}

func TestLocalErrors(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Log("running as root: permission case skipped")
	}
	for _, tc := range []struct {
		name      string
		setup     func(t *testing.T, dir string)
		key       string
		sentinel  error
		retryable bool
	}{
		{name: "file where a directory must be", key: "a/b", sentinel: ossresult.ErrInvalid,
			setup: func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "a"), "x") }},
		{name: "read-only directory", key: "ro/x", sentinel: ossresult.ErrPermission,
			setup: func(t *testing.T, dir string) {
				if os.Geteuid() == 0 {
					t.Skip("root ignores directory permissions")
				}
				if err := os.Mkdir(filepath.Join(dir, "ro"), 0o555); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "cancelled context", key: "c", retryable: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			s, _ := ossresult.NewLocal(dir)
			ctx, cancel := context.WithCancel(context.Background())
			if tc.sentinel == nil {
				cancel()
			}
			defer cancel()
			_, err := s.PutOnce(ctx, tc.key, []byte("v"), "", ossresult.Meta{})
			if err == nil || (tc.sentinel != nil && !errors.Is(err, tc.sentinel)) || ossresult.Retryable(err) != tc.retryable {
				t.Fatalf("PutOnce = %v (retryable %v); want %v, retryable %v", err, ossresult.Retryable(err), tc.sentinel, tc.retryable)
			}
		})
	}
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Processes, not just goroutines, race for one key: the test binary re-runs
// itself as writers (see TestMain).
func TestLocalCrossProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	key := "tasks/" + resulttest.NewKey() + "/approved/result.md"
	const procs = 6
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*strings.Builder, procs)
	start := time.Now().Add(500 * time.Millisecond) // all writers go at once
	for i := range procs {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^$")
		cmds[i].Env = append(os.Environ(), fmt.Sprintf("OSSRESULT_WRITER=%s|%s|%d|%d", dir, key, i%2, start.UnixNano()))
		outs[i] = &strings.Builder{}
		cmds[i].Stdout = outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	won := map[string]int{}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
		won[outs[i].String()]++
	}
	// Two contents (i%2), three writers each: one content's writers all
	// succeed (same bytes), the other's all conflict.
	if won["ok"] != procs/2 || won["conflict"] != procs/2 {
		t.Fatalf("outcomes = %v", won)
	}
	if keys := localKeys(t, dir); !slices.Equal(keys, []string{key}) {
		t.Fatalf("store holds %v", keys)
	}
}

func TestMain(m *testing.M) {
	if spec := os.Getenv("OSSRESULT_WRITER"); spec != "" {
		os.Exit(writer(spec))
	}
	os.Exit(m.Run())
}

// writer is one competing process: it prints ok or conflict.
func writer(spec string) int {
	parts := strings.Split(spec, "|")
	s, err := ossresult.NewLocal(parts[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if at, err := strconv.ParseInt(parts[3], 10, 64); err == nil {
		time.Sleep(time.Until(time.Unix(0, at)))
	}
	_, err = s.PutOnce(context.Background(), parts[1], []byte("content "+parts[2]), "text/markdown", ossresult.Meta{})
	switch {
	case err == nil:
		fmt.Print("ok")
	case errors.Is(err, ossresult.ErrConflict):
		fmt.Print("conflict")
	default:
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}
