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

// Redis is a private redis-server: no persistence (a restart or a promotion
// keeps only what it holds in memory).
type Redis struct {
	Addr    string // host:port (127.0.0.1:<free port> unless RedisOptions say otherwise)
	LogPath string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// StartRedis starts redis-server in dir (its working directory and log) on
// a free loopback port and returns once it accepts connections; with
// replicaOf (host:port) it is a replica of that server.
// IDEMGATE_TEST_REDIS_SERVER names the binary (default: on PATH).
func StartRedis(ctx context.Context, dir, replicaOf string) (*Redis, error) {
	return StartRedisWith(ctx, dir, RedisOptions{ReplicaOf: replicaOf})
}

// RedisOptions place a private Redis elsewhere than a loopback port of the
// caller's network namespace. The zero value is StartRedis's without a
// primary.
type RedisOptions struct {
	ReplicaOf string // host:port of the primary; "": none
	// Placement: where it runs and listens; Args e.g. --protected-mode no.
	Placement
	// Ready reports whether the server answers; default: a TCP connect
	// from this process (which cannot reach another namespace).
	Ready func(ctx context.Context, r *Redis) error
}

// StartRedisWith is StartRedis placed as o says; it returns once Ready
// succeeds (20 s at most).
func StartRedisWith(ctx context.Context, dir string, o RedisOptions) (*Redis, error) {
	bin := os.Getenv("IDEMGATE_TEST_REDIS_SERVER")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("redis-server"); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoRedis, err)
		}
	}
	host, port, err := o.address()
	if err != nil {
		return nil, err
	}
	r := &Redis{Addr: net.JoinHostPort(host, strconv.Itoa(port)), LogPath: filepath.Join(dir, "redis.log"), exited: make(chan struct{})}
	args := []string{"--port", strconv.Itoa(port), "--bind", host, "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", r.LogPath, "--daemonize", "no"}
	if o.ReplicaOf != "" {
		h, p, err := net.SplitHostPort(o.ReplicaOf)
		if err != nil {
			return nil, err
		}
		args = append(args, "--replicaof", h, p)
	}
	r.cmd = o.command(bin, args...)
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	go func() { _ = r.cmd.Wait(); close(r.exited) }()
	ready := o.Ready
	if ready == nil {
		ready = func(ctx context.Context, r *Redis) error {
			c, err := (&net.Dialer{Timeout: 100 * time.Millisecond}).DialContext(ctx, "tcp", r.Addr)
			if err == nil {
				c.Close()
			}
			return err
		}
	}
	if err := r.await(ctx, ready); err != nil {
		r.Kill()
		return nil, err
	}
	return r, nil
}

// await asks ready until it succeeds, the server exits, ctx ends or 20 s
// pass.
func (r *Redis) await(ctx context.Context, ready func(context.Context, *Redis) error) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := ready(c, r)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-r.exited:
			b, _ := os.ReadFile(r.LogPath)
			return fmt.Errorf("redis-server exited at start: %s", Tail(string(b), 1500))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s: no answer within 20 s: %w", r.Addr, err)
		}
	}
}

// Pid is the server's process id.
func (r *Redis) Pid() int { return r.cmd.Process.Pid }

// Stop ends the server: SIGTERM, SIGKILL after grace (Terminate: bounded);
// it reports whether the server exited. Nil-safe.
func (r *Redis) Stop(grace time.Duration) bool {
	if r == nil {
		return true
	}
	return Terminate(r.cmd.Process, r.exited, grace)
}

// Kill ends the server with SIGKILL and waits for it. Nil-safe.
func (r *Redis) Kill() {
	if r == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.exited
}
