package proc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Nonce is 16 random hex digits: ids, keys and database names that must not
// repeat across runs (Redis and MariaDB are shared between runs).
func Nonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Tail is the last n bytes of s, marked with "…" when cut.
func Tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// BaseEnv is a clean environment: PATH and HOME, then extra (a later entry
// of a name wins).
func BaseEnv(extra ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, extra...)
}

// CLI runs a subcommand of the binary with BaseEnv(env...) and returns its
// stdout. A non-zero exit is an error that wraps the *exec.ExitError and
// carries the tail of stderr.
func CLI(ctx context.Context, bin string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = BaseEnv(env...)
	cmd.SysProcAttr = sysProcAttr()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err,
			Tail(stderr.String(), 2000))
	}
	return stdout.String(), nil
}

// killWait bounds the wait for a process after SIGKILL: one stuck in the
// kernel (uninterruptible I/O) is reported, not waited for.
const killWait = 5 * time.Second

// Terminate ends a server: SIGTERM, then SIGKILL when it has not exited
// within grace (a server that ignores SIGTERM, or is stopped, or hangs in
// its shutdown), then waits killWait at most. exited is closed once the
// process was reaped; Terminate reports whether it was. No wait of it is
// unbounded, so a cleanup that calls it always ends.
func Terminate(p *os.Process, exited <-chan struct{}, grace time.Duration) bool {
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return true
	case <-time.After(grace):
	}
	_ = p.Kill()
	select {
	case <-exited:
		return true
	case <-time.After(killWait):
		return false
	}
}

// Placement puts a private server (StartMariaDBWith, StartRedisWith)
// elsewhere than a free loopback port of the caller's network namespace.
type Placement struct {
	// Wrap runs the server through a command that execs it (ip netns exec
	// NS taskset -c 1), so that its Pid is still the server's.
	Wrap []string
	// Host and Port are where it listens (default 127.0.0.1 and a free
	// loopback port).
	Host string
	Port int
	// Args are more server options, after the starter's own.
	Args []string
}

// address is where the server listens: Host and Port, or their defaults.
func (p Placement) address() (string, int, error) {
	host, port := p.Host, p.Port
	if host == "" {
		host = "127.0.0.1"
	}
	if port == 0 {
		var err error
		if port, err = FreePort(); err != nil {
			return "", 0, err
		}
	}
	return host, port, nil
}

// command is bin with args and then Args, through Wrap.
func (p Placement) command(bin string, args ...string) *exec.Cmd {
	argv := append(append(append(slices.Clone(p.Wrap), bin), args...), p.Args...)
	return exec.Command(argv[0], argv[1:]...)
}
