package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/dev/proc"
)

// TestProfiler records a process (testdata/perfspin, built as -perf-dir
// builds: symbols kept) with a phase's session: only what runs between
// "enable" and "disable" is in the profile, the reports name it,
// by-function.txt holds at most perfTopN symbols, and perf has exited once
// finish returns.
func TestProfiler(t *testing.T) {
	if _, err := exec.LookPath("perf"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs perf, and root to record any process")
	}
	ctx := context.Background()
	bin, err := proc.BuildProfiled(ctx, "./scripts/loadtest/testdata/perfspin", filepath.Join(t.TempDir(), "perfspin"))
	if err != nil {
		t.Fatal(err)
	}
	spin := exec.Command(bin)
	stdin, _ := spin.StdinPipe()
	stdout, _ := spin.StdoutPipe()
	if err := spin.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); spin.Wait() }()
	answers := bufio.NewScanner(stdout)
	turn := func() { // one spin of perfspin, by turns recorded and not
		if _, err := stdin.Write([]byte("go\n")); err != nil || !answers.Scan() {
			t.Fatalf("perfspin: %v %v", err, answers.Err())
		}
	}
	dir := t.TempDir()
	p, err := startProfiler(dir, t.TempDir(), map[string][]int{PhaseDupRedis: {spin.Process.Pid}}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	if p.session(PhaseFirst) != nil || p.session(PhaseMain) != nil {
		t.Error("a phase without processes, or not profiled, has a session")
	}
	s := p.session(PhaseDupRedis)
	s.command("enable")
	turn()
	s.command("disable")
	turn()
	if err := p.finish(ctx); err != nil {
		t.Fatal(err)
	}
	if s.cmd.ProcessState == nil {
		t.Error("perf record still runs after finish")
	}
	for _, f := range []string{"self.txt", "by-function.txt"} {
		b, err := os.ReadFile(filepath.Join(dir, PhaseDupRedis, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte("main.spinRecorded")) || bytes.Contains(b, []byte("spinUnrecorded")) {
			t.Errorf("%s: want main.spinRecorded and not spinUnrecorded:\n%s", f, b)
		}
		if f == "by-function.txt" {
			if n := entries(b); n == 0 || n > perfTopN {
				t.Errorf("%s: %d entries, want 1 to %d", f, n, perfTopN)
			}
		}
	}
	if err := p.stop(); err != nil { // again: a no-op
		t.Error(err)
	}
}

func TestProfilerNeedsPerf(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	o := DefaultOptions()
	o.Spawn, o.PerfDir = 1, t.TempDir()
	if err := o.check(); err != ErrNoPerf || !strings.Contains(err.Error(), "perf not found") {
		t.Fatalf("check: %v, want ErrNoPerf", err)
	}
}

func entries(report []byte) int {
	n := 0
	for line := range bytes.Lines(report) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			n++
		}
	}
	return n
}
