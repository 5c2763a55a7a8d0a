package proc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// ErrNoRedis: redis-server was not found.
var ErrNoRedis = errors.New("no redis-server binary")

// Redis is a private redis-server on a loopback port: no persistence (a
// restart or a promotion keeps only what it holds in memory).
type Redis struct {
	Addr    string // 127.0.0.1:<port>
	LogPath string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// StartRedis starts redis-server in dir (its working directory and log) and
// returns once it accepts connections; with replicaOf (host:port) it is a
// replica of that server. IDEMGATE_TEST_REDIS_SERVER names the binary
// (default: on PATH).
func StartRedis(ctx context.Context, dir, replicaOf string) (*Redis, error) {
	bin := os.Getenv("IDEMGATE_TEST_REDIS_SERVER")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("redis-server"); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoRedis, err)
		}
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	r := &Redis{Addr: "127.0.0.1:" + strconv.Itoa(port), LogPath: filepath.Join(dir, "redis.log"), exited: make(chan struct{})}
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", r.LogPath}
	if replicaOf != "" {
		host, p, err := net.SplitHostPort(replicaOf)
		if err != nil {
			return nil, err
		}
		args = append(args, "--replicaof", host, p)
	}
	r.cmd = exec.Command(bin, args...)
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	go func() { _ = r.cmd.Wait(); close(r.exited) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", r.Addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return r, nil
		}
		select {
		case <-r.exited:
			b, _ := os.ReadFile(r.LogPath)
			return nil, fmt.Errorf("redis-server exited at start: %s", Tail(string(b), 1500))
		case <-ctx.Done():
			r.Kill()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.Kill()
			return nil, fmt.Errorf("redis-server on %s: no answer within 10 s: %w", r.Addr, err)
		}
	}
}

// Kill ends the server with SIGKILL and waits for it. Nil-safe.
func (r *Redis) Kill() {
	if r == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.exited
}
