package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idemgate/idemgate/internal/dev/proc"
)

// -perf-dir: where the function's own CPU goes in a real process, beside the
// raw function's. Each profiled phase gets one `perf record` of its
// processes, started with its events disabled after the warm-up and enabled
// only while one of the phase's measured slices runs (perf's control FIFO,
// each command acknowledged), so that a profile holds that phase's work in
// every run and nothing else. The phases: first deliveries and Redis
// duplicates (the instances with Redis), the raw function (its processes).
var profiledPhases = []string{PhaseFirst, PhaseDupRedis, PhaseRawFunction}

// perfTopN bounds by-function.txt: the symbols with the most CPU, callees
// included.
const perfTopN = 40

// perfAck bounds the wait for perf's acknowledgement of a command; the
// first one waits for perf to attach.
const perfAck = 30 * time.Second

// perfStop bounds the wait for perf record to write its file after SIGINT
// (then SIGKILL), and each perf report.
const perfStop = 2 * time.Minute

// ErrNoPerf: -perf-dir without perf on PATH.
var ErrNoPerf = errors.New("-perf-dir: perf not found on PATH (the linux-perf / linux-tools package; cpu-clock sampling needs no hardware counters)")

// startProfiler starts -perf-dir's sessions (none without it).
func (r *runner) startProfiler() error {
	if r.o.PerfDir == "" {
		return nil
	}
	pids := map[string][]int{PhaseRawFunction: r.fl.rawPIDs} // spawned only with -first-n
	if r.o.Redis {                                           // the phases of the instances with Redis run
		if r.o.FirstN > 0 {
			pids[PhaseFirst] = r.fl.loadPIDs
		}
		if r.o.DupN > 0 {
			pids[PhaseDupRedis] = r.fl.loadPIDs
		}
	}
	var err error
	r.prof, err = startProfiler(r.o.PerfDir, r.work, pids, r.logf)
	return err
}

// buildProfilable builds pkg with the deploy flags, keeping its symbols
// with -perf-dir (the same machine code, which perf can then name).
func buildProfilable(ctx context.Context, o Options, pkg, bin string) (string, error) {
	if o.PerfDir != "" {
		return proc.BuildProfiled(ctx, pkg, bin)
	}
	return proc.BuildPackage(ctx, pkg, bin, true)
}

// profiler holds the perf sessions of a run, by phase.
type profiler struct {
	sessions map[string]*perfSession
}

// perfSession is one perf record: its output directory, its control and
// acknowledgement FIFOs, and its exit once stopped.
type perfSession struct {
	dir      string
	cmd      *exec.Cmd
	ctl, ack *os.File
	acks     *bufio.Reader
	stderr   bytes.Buffer
	done     chan error
	err      error // the first failure: the session records no more
	stopped  bool
}

// startProfiler starts a session for each profiled phase that has
// processes (pids by phase), writing under dir/<phase>; fifos go to work.
func startProfiler(dir, work string, pids map[string][]int, logf func(string, ...any)) (*profiler, error) {
	p := &profiler{sessions: map[string]*perfSession{}}
	for i, phase := range profiledPhases {
		if len(pids[phase]) == 0 {
			continue
		}
		s, err := startPerf(filepath.Join(dir, phase), filepath.Join(work, "perf-"+strconv.Itoa(i)), pids[phase])
		if err != nil {
			p.stop()
			return nil, fmt.Errorf("perf record for %s: %w", phase, err)
		}
		p.sessions[phase] = s
		logf("perf record of %s (pids %v) into %s", phase, pids[phase], s.dir)
	}
	return p, nil
}

func startPerf(dir, fifo string, pids []int) (*perfSession, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s := &perfSession{dir: dir, done: make(chan error, 1)}
	var err error
	// Both ends opened read-write: neither open waits for perf, and perf's
	// own opens (its ctl read-write, its ack write-only) find a reader.
	for _, f := range []struct {
		path string
		file **os.File
	}{{fifo + ".ctl", &s.ctl}, {fifo + ".ack", &s.ack}} {
		if err = syscall.Mkfifo(f.path, 0o600); err != nil {
			s.closeFifos()
			return nil, err
		}
		if *f.file, err = os.OpenFile(f.path, os.O_RDWR, 0); err != nil {
			s.closeFifos()
			return nil, err
		}
	}
	s.acks = bufio.NewReader(s.ack)
	ids := make([]string, len(pids))
	for i, pid := range pids {
		ids[i] = strconv.Itoa(pid)
	}
	// -D -1: events disabled until "enable"; -N: nothing added to
	// ~/.debug (the rig leaves nothing behind).
	s.cmd = exec.Command("perf", "record", "-e", "cpu-clock", "-g", "-p", strings.Join(ids, ","),
		"-o", filepath.Join(dir, "perf.data"), "-D", "-1", "--control", "fifo:"+fifo+".ctl,"+fifo+".ack", "-N", "-q")
	s.cmd.Stdout, s.cmd.Stderr = &s.stderr, &s.stderr
	// Should this program die without stopping it, perf stops and writes.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGINT}
	if err := s.cmd.Start(); err != nil {
		s.closeFifos()
		return nil, err
	}
	go func() { s.done <- s.cmd.Wait() }()
	return s, nil
}

// command sends "enable" or "disable" and waits for perf's "ack"; a failure
// ends the session (stop reports it).
func (s *perfSession) command(c string) {
	if s == nil || s.err != nil || s.stopped {
		return
	}
	if _, err := s.ctl.WriteString(c + "\n"); err != nil {
		s.err = fmt.Errorf("%s: %w", c, err)
		return
	}
	_ = s.ack.SetReadDeadline(time.Now().Add(perfAck))
	line, err := s.acks.ReadString('\n')
	// perf writes "ack\n" with its C string's NUL: the next read starts with it.
	if err != nil || strings.Trim(line, "\x00\n") != "ack" {
		s.err = fmt.Errorf("%s: no acknowledgement from perf record (%q, %v)", c, line, err)
	}
}

// session is phase's session (nil: not profiled; its methods do nothing).
func (p *profiler) session(phase string) *perfSession {
	if p == nil {
		return nil
	}
	return p.sessions[phase]
}

// stop stops every session (SIGINT, the wait bounded, then SIGKILL) and
// returns the first failure. Safe to call again, and on a nil profiler.
func (p *profiler) stop() error {
	if p == nil {
		return nil
	}
	var errs []error
	for _, phase := range profiledPhases {
		if s := p.sessions[phase]; s != nil {
			if err := s.stop(); err != nil {
				errs = append(errs, fmt.Errorf("perf record for %s: %w", phase, err))
			}
		}
	}
	return errors.Join(errs...)
}

func (s *perfSession) stop() error {
	if s.stopped {
		return s.err
	}
	s.stopped = true
	defer s.closeFifos()
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	var err error
	select {
	case err = <-s.done:
	case <-time.After(perfStop):
		_ = s.cmd.Process.Kill()
		err = fmt.Errorf("did not stop within %s after SIGINT; killed (%v)", perfStop, <-s.done)
	}
	// perf record ends itself with the SIGINT it handled, once its file is
	// written; any other exit is a failure.
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGINT {
			err = nil
		}
	}
	if err != nil && s.err == nil {
		s.err = err
	}
	if s.err != nil {
		s.err = fmt.Errorf("%w (perf: %s)", s.err, strings.TrimSpace(s.stderr.String()))
	}
	return s.err
}

func (s *perfSession) closeFifos() {
	for _, f := range []*os.File{s.ctl, s.ack} {
		if f != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}
}

// finish stops the sessions and writes each phase's reports beside its
// perf.data, while the profiled binaries still exist (perf names their
// functions from them): self.txt, perf report's flat list of the samples by
// symbol (--no-children), and by-function.txt, the perfTopN symbols with
// the most CPU, callees included (--children). Interrupted (ctx done), it
// only stops them.
func (p *profiler) finish(ctx context.Context) error {
	if err := p.stop(); err != nil || p == nil || ctx.Err() != nil {
		return err
	}
	for _, phase := range profiledPhases {
		s := p.sessions[phase]
		if s == nil {
			continue
		}
		data := filepath.Join(s.dir, "perf.data")
		for _, r := range []struct {
			file string
			args []string
			top  int
		}{
			{"self.txt", []string{"--no-children", "--sort", "dso,sym", "--percent-limit", "0.05"}, 0},
			{"by-function.txt", []string{"--children", "--sort", "sym"}, perfTopN},
		} {
			if err := perfReport(ctx, data, filepath.Join(s.dir, r.file), r.top, r.args...); err != nil {
				return fmt.Errorf("perf report for %s: %w", phase, err)
			}
		}
	}
	return nil
}

// perfReport writes perf report's flat list (no call graphs) of data to
// out: its header and its first top entries (0: all).
func perfReport(ctx context.Context, data, out string, top int, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, perfStop)
	defer cancel()
	cmd := exec.CommandContext(ctx, "perf", append([]string{"report", "-i", data, "--stdio", "-g", "none"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%w: %s", err, stderr.String())
	}
	return os.WriteFile(out, headAndTop(b, top), 0o644)
}

// headAndTop keeps perf report's comment lines and its first top entries.
func headAndTop(b []byte, top int) []byte {
	if top <= 0 {
		return b
	}
	var out bytes.Buffer
	n := 0
	for line := range bytes.Lines(b) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			if n++; n > top {
				break
			}
		}
		out.Write(line)
	}
	return out.Bytes()
}
