// Package proc runs the function binary for the end-to-end tests and the
// tools (scripts/loadtest, scripts/chaos, scripts/coldstart): build it,
// start it as a custom-runtime server with an environment of its own on a
// free loopback port, wait until POST /initialize answers, stop it (SIGTERM,
// then SIGKILL), and read its log, memory and CPU time. Development only:
// nothing in the function imports it.
package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Options configure Start. The zero value is usable.
type Options struct {
	// Env is the process's environment after PATH and HOME (later entries
	// win); FC_SERVER_PORT is added last.
	Env []string
	// LogPath receives the process's stdout and stderr; "" keeps them in
	// memory (Instance.Output).
	LogPath string
	// Timeout bounds the wait for /initialize (default 15 s).
	Timeout time.Duration
	// Poll is the interval between readiness probes (default 20 ms).
	Poll time.Duration
	// RequestID is the x-fc-request-id of the /initialize call.
	RequestID string
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL
	// (default 5 s).
	StopGrace time.Duration
	// Wrap runs the binary through a command that execs it in the same
	// process (e.g. ip netns exec NS taskset -c 1), so that Pid is still
	// the binary's; "" none.
	Wrap []string
	// Host is the address the instance is reached at (default 127.0.0.1):
	// its address inside the network namespace Wrap enters.
	Host string
}

// Instance is a started process.
type Instance struct {
	Base    string // http://127.0.0.1:<port> (Options.Host)
	Cmd     *exec.Cmd
	LogPath string // "" when the output is kept in memory
	// Started is the exec; Listening the first successful TCP connect;
	// Ready the 200 answer of /initialize.
	Started, Listening, Ready time.Time

	grace  time.Duration
	mem    *Buffer
	exited chan struct{}
}

// ErrInitialize wraps a definite failure of /initialize: the instance
// answered it, and not with 200.
var ErrInitialize = errors.New("/initialize failed")

// Start runs bin as a custom-runtime server and returns once /initialize
// answered 200. A non-200 answer is definite: Start kills the process and
// returns the answer's body (wrapping ErrInitialize) rather than asking
// again; it also gives up when the process exits, ctx ends or o.Timeout
// passes, with the tail of the process's output.
func Start(ctx context.Context, bin string, o Options) (*Instance, error) {
	o = o.withDefaults()
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	in := &Instance{Base: "http://" + net.JoinHostPort(o.Host, strconv.Itoa(port)), LogPath: o.LogPath, grace: o.StopGrace,
		exited: make(chan struct{})}
	out, closeOut, err := in.output()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin)
	if len(o.Wrap) > 0 {
		cmd = exec.Command(o.Wrap[0], append(o.Wrap[1:len(o.Wrap):len(o.Wrap)], bin)...)
	}
	// A new slice: o.Env may be shared by callers starting several at once.
	cmd.Env = append(BaseEnv(o.Env...), "FC_SERVER_PORT="+strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	in.Cmd = cmd
	in.Started = time.Now()
	if err := cmd.Start(); err != nil {
		closeOut()
		return nil, err
	}
	go func() { _ = cmd.Wait(); closeOut(); close(in.exited) }()
	if err := in.await(ctx, port, o); err != nil {
		in.Kill()
		return nil, err
	}
	return in, nil
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = 15 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = 20 * time.Millisecond
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 5 * time.Second
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	return o
}

// output opens where the process writes.
func (in *Instance) output() (io.Writer, func(), error) {
	if in.LogPath == "" {
		in.mem = &Buffer{}
		return in.mem, func() {}, nil
	}
	f, err := os.Create(in.LogPath)
	if err != nil {
		return nil, nil, err
	}
	return f, func() { f.Close() }, nil
}

// await probes the socket until it accepts, then /initialize until it
// answers.
func (in *Instance) await(ctx context.Context, port int, o Options) error {
	deadline := in.Started.Add(o.Timeout)
	addr := net.JoinHostPort(o.Host, strconv.Itoa(port))
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: (&net.Dialer{Timeout: 100 * time.Millisecond}).DialContext}}
	for {
		var err error
		if in.Listening.IsZero() {
			var c net.Conn
			if c, err = net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
				c.Close()
				in.Listening = time.Now()
			}
		}
		if !in.Listening.IsZero() {
			var definite bool
			if definite, err = in.initialize(ctx, client, deadline, o.RequestID); err == nil {
				in.Ready = time.Now()
				return nil
			} else if definite {
				return err
			}
		}
		select {
		case <-in.exited:
			return fmt.Errorf("%s exited before /initialize answered (%s): %s", in.Cmd.Path, in.Cmd.ProcessState, in.Tail(1500))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(o.Poll):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer from /initialize within %s (%v): %s", o.Timeout, err, in.Tail(1500))
		}
	}
}

// initialize calls /initialize once; definite reports that the instance
// answered (so asking again would not help).
func (in *Instance) initialize(ctx context.Context, client *http.Client, deadline time.Time, requestID string) (definite bool, err error) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.Base+"/initialize", nil)
	if err != nil {
		return true, err
	}
	if requestID != "" {
		req.Header.Set("x-fc-request-id", requestID)
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return true, fmt.Errorf("%w: HTTP %d %s", ErrInitialize, resp.StatusCode, bytes.TrimSpace(body))
	}
	return false, nil
}

// Pid is the process id.
func (in *Instance) Pid() int { return in.Cmd.Process.Pid }

// Signal sends sig to the process.
func (in *Instance) Signal(sig syscall.Signal) { _ = in.Cmd.Process.Signal(sig) }

// Exited is closed once the process has been reaped.
func (in *Instance) Exited() <-chan struct{} { return in.exited }

// Wait returns once the process has exited.
func (in *Instance) Wait() { <-in.exited }

// Stop asks the process to end (SIGCONT, as a stopped process would not act
// on it, then SIGTERM: the function drains and flushes) and kills it when it
// has not exited within the grace period. A nil Instance is fine.
func (in *Instance) Stop() {
	if in == nil {
		return
	}
	in.Signal(syscall.SIGCONT)
	in.Signal(syscall.SIGTERM)
	select {
	case <-in.exited:
	case <-time.After(in.grace):
		in.Kill()
	}
}

// Kill ends the process with SIGKILL and waits for it.
func (in *Instance) Kill() {
	if in == nil {
		return
	}
	in.Signal(syscall.SIGKILL)
	<-in.exited
}

// Output is what the process wrote so far.
func (in *Instance) Output() string {
	if in.mem != nil {
		return in.mem.String()
	}
	b, _ := os.ReadFile(in.LogPath)
	return string(b)
}

// Tail is the last n bytes of Output.
func (in *Instance) Tail(n int) string { return Tail(in.Output(), n) }

// Buffer collects a process's output while others read it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
