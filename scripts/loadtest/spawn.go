package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/idemgate/idemgate/internal/devbuild"
)

// Instance is a spawned function process.
type Instance struct {
	Base    string
	Cmd     *exec.Cmd
	LogPath string
	exited  chan struct{}
}

// baseEnv is a clean environment for the function: PATH and HOME only.
func baseEnv(extra ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, extra...)
}

// Migrate runs `main migrate` with the DSN (STATE_DIR under dir: the
// binary creates its results directory even for migrate).
func Migrate(ctx context.Context, bin, dsn, dir string) error {
	cmd := exec.CommandContext(ctx, bin, "migrate")
	cmd.Env = baseEnv("MYSQL_DSN="+dsn, "LLM_MODEL=offline", "STATE_DIR="+filepath.Join(dir, "state"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("migrate: %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Spawn starts the binary as a custom-runtime server with env and waits
// until /initialize answers 200 (at most 15 s). Its JSON log goes to logPath.
func Spawn(ctx context.Context, bin, logPath string, env []string) (*Instance, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin)
	cmd.Env = baseEnv(append(env, "FC_SERVER_PORT="+strconv.Itoa(port))...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	inst := &Instance{Base: fmt.Sprintf("http://127.0.0.1:%d", port), Cmd: cmd, LogPath: logPath, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(inst.exited) }()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := client.Post(inst.Base+"/initialize", "application/octet-stream", nil)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return inst, nil
			}
		}
		select {
		case <-inst.exited:
			return nil, fmt.Errorf("instance exited before /initialize answered; log: %s", tail(logPath))
		case <-ctx.Done():
			inst.Stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			inst.Stop()
			return nil, fmt.Errorf("instance did not initialize in 15 s; log: %s", tail(logPath))
		}
	}
}

// Stop sends SIGTERM (the instance flushes its stats and closes its clients)
// and kills it if it has not exited within 5 s.
func (i *Instance) Stop() {
	if i == nil || i.Cmd.Process == nil {
		return
	}
	_ = i.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-i.exited:
	case <-time.After(5 * time.Second):
		_ = i.Cmd.Process.Kill()
		<-i.exited
	}
}

// RSSSampler records the largest RSS of a set of processes every 50 ms
// between Start and Stop.
type RSSSampler struct {
	mu   sync.Mutex
	max  map[int]int64
	stop chan struct{}
	done chan struct{}
}

// Start samples pids until Stop.
func (s *RSSSampler) Start(pids []int) {
	s.max = map[int]int64{}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			for _, p := range pids {
				if n, err := devbuild.RSS(p); err == nil {
					s.mu.Lock()
					s.max[p] = max(s.max[p], n)
					s.mu.Unlock()
				}
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
}

// Stop ends sampling and returns the largest RSS seen of each pid.
func (s *RSSSampler) Stop() map[int]int64 {
	if s.stop == nil {
		return nil
	}
	close(s.stop)
	<-s.done
	s.stop = nil
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// CPUTime is the user+system CPU time of pids so far (/proc/<pid>/stat,
// in clock ticks of USER_HZ = 100 on Linux).
func CPUTime(pids []int) time.Duration {
	var ticks int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The command name (field 2) is in parentheses and may hold spaces.
		rest := string(b)
		if i := strings.LastIndexByte(rest, ')'); i >= 0 {
			rest = rest[i+1:]
		}
		f := strings.Fields(rest) // f[0] is field 3 (state): utime is field 14, stime 15
		if len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			s, _ := strconv.ParseInt(f[12], 10, 64)
			ticks += u + s
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}
