package netrig

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/dev/proc"
)

func TestPreflight(t *testing.T) {
	all := func(string) (string, error) { return "/usr/bin/x", nil }
	without := func(missing string) func(string) (string, error) {
		return func(name string) (string, error) {
			if name == missing {
				return "", exec.ErrNotFound
			}
			return "/usr/bin/" + name, nil
		}
	}
	for _, tc := range []struct {
		name     string
		mode     string
		delay    time.Duration
		look     func(string) (string, error)
		euid     int
		wantErr  string // "" ok
		wantNone string // must not be named
	}{
		{"everything there", ModeAuto, 150 * time.Microsecond, all, 0, "", ""},
		{"not root", ModeAuto, 150 * time.Microsecond, all, 1000, "root privilege", ""},
		{"no ip", ModeProxy, 150 * time.Microsecond, without("ip"), 0, "ip not found", ""},
		{"no taskset", ModeProxy, 150 * time.Microsecond, without("taskset"), 0, "taskset not found", ""},
		{"no tc for netem", ModeNetem, 150 * time.Microsecond, without("tc"), 0, "tc not found", ""},
		{"no tc for auto", ModeAuto, 150 * time.Microsecond, without("tc"), 0, "tc not found", ""},
		{"the proxy needs no tc", ModeProxy, 150 * time.Microsecond, without("tc"), 0, "", ""},
		{"a zero delay needs no tc", ModeNetem, 0, without("tc"), 0, "", ""},
		{"unknown mode", "tcp", 150 * time.Microsecond, all, 0, `-delay-mode "tcp"`, ""},
		{"negative delay", ModeProxy, -time.Microsecond, all, 0, "want 0 to 1s", ""},
		{"two things missing, both named", ModeAuto, time.Millisecond, without("taskset"), 1000, "root privilege", "tc not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Preflight(tc.mode, tc.delay, tc.look, tc.euid)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one naming %q", err, tc.wantErr)
			case tc.wantNone != "" && strings.Contains(err.Error(), tc.wantNone):
				t.Fatalf("error %v names %q", err, tc.wantNone)
			}
			if tc.name == "two things missing, both named" && !strings.Contains(err.Error(), "taskset not found") {
				t.Fatalf("error %v does not name taskset", err)
			}
		})
	}
}

func TestParsePins(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ncpu     int
		err      bool
	}{
		{"auto", "gen=0,fn=0,redis=1,mysql=1", 2, false},
		{"auto", "none", 1, false},
		{"auto", "gen=0,fn=1,redis=2,mysql=2", 3, false},
		{"auto", "gen=0,fn=1,redis=2,mysql=3", 8, false},
		{"none", "none", 4, false},
		{"gen=0,fn=1:2,redis=3,mysql=3", "gen=0,fn=1:2,redis=3,mysql=3", 4, false},
		{"gen=0,fn=4", "", 4, true},
		{"web=0", "", 4, true},
		{"gen", "", 4, true},
	} {
		p, err := ParsePins(tc.in, tc.ncpu)
		if tc.err != (err != nil) || (err == nil && p.String() != tc.want) {
			t.Errorf("ParsePins(%q, %d) = %v, %v; want %q (error %v)", tc.in, tc.ncpu, p, err, tc.want, tc.err)
		}
	}
}

// echo serves one connection: what it reads it writes back, and it closes
// at EOF.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// TestProxyDelaysEachDirection sends a message through the proxy to an echo
// server: the answer cannot come back sooner than two one-way delays (less
// the overshoot the proxy subtracts, at most 80 µs each); the bytes arrive
// whole and in order, a megabyte too; the client's half-close reaches the
// server, whose close comes back as EOF. Only a lower bound is checked: a
// loaded machine makes it slower, never faster.
func TestProxyDelaysEachDirection(t *testing.T) {
	const delay = 20 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{Delay: delay, Upstream: echo(t)}
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 3 {
		start := time.Now()
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("read %q, %v", buf, err)
		}
		if rtt, least := time.Since(start), 2*(delay-80*time.Microsecond); rtt < least {
			t.Fatalf("round trip through the proxy took %s, less than two one-way delays (%s)", rtt, least)
		}
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	go func() { _, _ = c.Write(big); _ = c.(*net.TCPConn).CloseWrite() }()
	got, err := io.ReadAll(c) // EOF only once the echo server saw ours and closed
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("1 MiB through the proxy: got %d bytes (equal %v), %v", len(got), bytes.Equal(got, big), err)
	}
	if s := p.Stats(); s.Connections != 1 || s.Bytes != 2*int64(len(big)+3*4) || s.Delay != delay {
		t.Fatalf("stats %+v", s)
	}
}

// needRoot skips without root or ip, and fails under CI=true (.ci/run runs
// as root).
func needRoot(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("ip")
	if os.Geteuid() == 0 && err == nil {
		return
	}
	msg := "needs root and ip (network namespaces)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// TestNamespacesComeAndGo creates the rig's network, checks an address and
// the pinning prefix, starts a process inside a namespace, and checks that
// Close ends it and leaves nothing; then that RemoveStale removes the
// namespaces of an owner that no longer runs, and only those.
func TestNamespacesComeAndGo(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	n, err := Create(ctx, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			n.Close()
		}
	}()
	out, err := exec.Command("ip", "-n", n.NS[RoleRedis], "-4", "addr", "show", "eth0").CombinedOutput()
	if err != nil || !strings.Contains(string(out), Subnet+".3/24") {
		t.Fatalf("redis namespace's eth0: %s %v", out, err)
	}
	if w := strings.Join(n.Exec(RoleFunction, "1"), " "); w != "ip netns exec "+n.NS[RoleFunction]+" taskset -c 1" {
		t.Fatalf("Exec = %q", w)
	}
	// A process inside: Close must end it.
	sleeper := exec.Command("ip", "netns", "exec", n.NS[RoleFunction], "sleep", "300")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = sleeper.Wait() }()
	time.Sleep(100 * time.Millisecond)
	if left := Leftovers(os.Getpid()); len(left) != len(Roles)+2 { // 5 namespaces and the sleeper
		t.Fatalf("before Close: %v", left)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	if left := Leftovers(os.Getpid()); len(left) > 0 {
		t.Fatalf("left after Close: %v", left)
	}

	// A dead owner's namespaces go; a live one's stay.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadNS, liveNS := nsName(dead.Process.Pid, "gen"), nsName(os.Getpid(), "gen")
	for _, ns := range []string{deadNS, liveNS} {
		if err := run(ctx, "ip", "netns", "add", ns); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { _ = removeNamespaces([]string{deadNS, liveNS}) }()
	stale, err := RemoveStale()
	if err != nil || len(stale) != 1 || stale[0] != deadNS {
		t.Fatalf("RemoveStale = %v, %v; want [%s]", stale, err, deadNS)
	}
	if !exists(liveNS) || exists(deadNS) {
		t.Fatalf("after RemoveStale: %v", List())
	}
}

// TestResolveMode: a zero delay needs nothing; netem either works or fails
// naming the missing qdisc (never a silent loopback run); auto says which
// it chose.
func TestResolveMode(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	n, err := Create(ctx, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	var said []string
	say := func(s string) { said = append(said, s) }
	if m, err := n.ResolveMode(ctx, ModeNetem, 0, say); err != nil || m != ModeNone {
		t.Fatalf("zero delay: %s, %v", m, err)
	}
	netemErr := n.ProbeNetem(ctx)
	m, err := n.ResolveMode(ctx, ModeNetem, 150*time.Microsecond, say)
	switch {
	case netemErr == nil && (err != nil || m != ModeNetem):
		t.Fatalf("netem available, but ResolveMode(netem) = %s, %v", m, err)
	case netemErr != nil && (!errors.Is(err, ErrNoNetem) || !strings.Contains(err.Error(), "netem qdisc")):
		t.Fatalf("no netem here (%v), but ResolveMode(netem) = %s, %v: want an error naming the netem qdisc", netemErr, m, err)
	}
	m, err = n.ResolveMode(ctx, ModeAuto, 150*time.Microsecond, say)
	want := ModeProxy
	if netemErr == nil {
		want = ModeNetem
	}
	if err != nil || m != want || !strings.Contains(said[len(said)-1], "DELAY MODE auto → "+want) {
		t.Fatalf("auto: %s, %v, said %q; want %s", m, err, said, want)
	}
}

// TestStopKillsAStuckServer: a server that does not act on SIGTERM (here
// one that ignores it, and is stopped with SIGSTOP besides, as a server
// hung in its shutdown) is killed once the grace has passed, and Stop
// returns within the bound. (A stopped process without a handler would die
// of SIGTERM at once: the kernel kills on a fatal signal.)
func TestStopKillsAStuckServer(t *testing.T) {
	p, err := start("stuck", nil, []string{"sh", "-c", `trap "" TERM; exec sleep 60`}, filepath.Join(t.TempDir(), "stuck.log"), nil)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the trap is set and sleep exec'd
	if err := syscall.Kill(p.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	const grace = 300 * time.Millisecond
	began := time.Now()
	if !p.Stop(grace) {
		t.Fatal("Stop: the process did not exit")
	}
	if took := time.Since(began); took < grace || took > grace+2*time.Second {
		t.Errorf("Stop took %s; want the grace (%s), then SIGKILL at once", took, grace)
	}
	if p.Alive() || alive(p.Pid()) {
		t.Error("the process is still there")
	}
}

// TestMariaDBRedoLogOutlastsALoadTest: the rig's server has proc.LoadRedoLog's
// redo log, not the private servers' default 16 MiB, which a first-delivery
// phase fills within seconds: every write then waits for a checkpoint, and
// the rig saw that wait stall all writes for 42 s (completes failing at the
// engine's 5 s bound).
func TestMariaDBRedoLogOutlastsALoadTest(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("mariadb"); err != nil {
		t.Skip("no mariadb client")
	}
	ctx := context.Background()
	n, err := Create(ctx, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	m, err := n.StartMariaDB(ctx, t.TempDir(), "", 20)
	if err != nil {
		if errors.Is(err, proc.ErrNoMariaDB) && os.Getenv("CI") != "true" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	defer m.Stop()
	out, err := exec.Command("mariadb", "--no-defaults", "-uroot", "--socket="+m.Socket(), "-N", "-e",
		"SELECT @@innodb_log_file_size").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	const least = 512 << 20
	if size, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err != nil || size < least {
		t.Fatalf("innodb_log_file_size = %s; want at least %d", out, least)
	}
}
