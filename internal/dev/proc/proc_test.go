package proc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMain turns the test binary into the process under test when
// PROC_HELPER names a behaviour: a stand-in for the function that serves
// /initialize on FC_SERVER_PORT.
func TestMain(m *testing.M) {
	if mode := os.Getenv("PROC_HELPER"); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

func helper(mode string) int {
	fmt.Println("helper starting:", mode)
	if mode == "exit" {
		return 3
	}
	if mode == "ignore-term" {
		signal.Ignore(syscall.SIGTERM)
	}
	term := make(chan os.Signal, 1)
	if mode != "ignore-term" {
		signal.Notify(term, syscall.SIGTERM)
	}
	if mode == "silent" { // never listens
		<-term
		return 0
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("FC_SERVER_PORT"))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	go func() {
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if mode == "fail" {
				w.WriteHeader(http.StatusNotFound)
				fmt.Fprint(w, `{"errorType":"initialize_failed","errorMessage":"store unreachable"}`)
				return
			}
			fmt.Fprintf(w, `{"status":"ok","request_id":%q}`, r.Header.Get("x-fc-request-id"))
		}))
	}()
	<-term
	fmt.Println("helper: SIGTERM")
	return 0
}

func start(t *testing.T, mode string, o Options) (*Instance, error) {
	t.Helper()
	o.Env = append(o.Env, "PROC_HELPER="+mode)
	in, err := Start(context.Background(), os.Args[0], o)
	if in != nil {
		t.Cleanup(in.Kill)
	}
	return in, err
}

func TestStartAndStop(t *testing.T) {
	in, err := start(t, "serve", Options{RequestID: "init-1"})
	if err != nil {
		t.Fatal(err)
	}
	if in.Listening.Before(in.Started) || in.Ready.Before(in.Listening) {
		t.Errorf("timestamps out of order: %v %v %v", in.Started, in.Listening, in.Ready)
	}
	if !strings.HasPrefix(in.Base, "http://127.0.0.1:") {
		t.Errorf("base %q", in.Base)
	}
	in.Stop()
	if code := in.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0 (a graceful end)", code)
	}
	if !strings.Contains(in.Output(), "helper: SIGTERM") {
		t.Errorf("output %q", in.Output())
	}
}

// Callers start several instances with one env slice (scripts/chaos): Start
// must not write into its spare capacity.
func TestStartLeavesTheCallersEnvAlone(t *testing.T) {
	env := make([]string, 1, 8)
	env[0] = "PROC_HELPER=serve"
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			in, err := Start(context.Background(), os.Args[0], Options{Env: env})
			if err != nil {
				t.Error(err)
				return
			}
			in.Stop()
		})
	}
	wg.Wait()
	if spare := env[1:cap(env)]; slices.ContainsFunc(spare, func(s string) bool { return s != "" }) {
		t.Fatalf("Start wrote into the caller's env: %q", spare)
	}
}

func TestStartFailures(t *testing.T) {
	cases := []struct {
		name, mode string
		want       []string
		definite   bool
	}{
		{"a non-200 /initialize is definite and its body shown", "fail",
			[]string{"HTTP 404", "store unreachable", "initialize_failed"}, true},
		{"exit before answering shows the output", "exit", []string{"exited", "exit status 3", "helper starting: exit"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			began := time.Now()
			in, err := start(t, c.mode, Options{Timeout: 20 * time.Second})
			if err == nil {
				t.Fatalf("started: %v", in)
			}
			// Both are answers: Start must not wait out its 20 s.
			if el := time.Since(began); el > 10*time.Second {
				t.Errorf("took %s", el)
			}
			if errors.Is(err, ErrInitialize) != c.definite {
				t.Errorf("errors.Is(ErrInitialize) = %v: %v", !c.definite, err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestStartGivesUpAtTheTimeout(t *testing.T) {
	_, err := start(t, "silent", Options{Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "within 300ms") {
		t.Fatalf("err = %v", err)
	}
}

func TestStopKillsAfterTheGrace(t *testing.T) {
	in, err := start(t, "ignore-term", Options{StopGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	in.Stop()
	ws, ok := in.Cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("process state %v, want killed by SIGKILL", in.Cmd.ProcessState)
	}
}

func TestCLI(t *testing.T) {
	out, err := CLI(context.Background(), os.Args[0], []string{"PROC_HELPER=exit"})
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("err = %v, want exit status 3", err)
	}
	if !strings.Contains(out, "helper starting: exit") {
		t.Errorf("stdout %q", out)
	}
}

func TestTail(t *testing.T) {
	cases := []struct {
		name, in, want string
		n              int
	}{
		{"short stays", "abc", "abc", 5},
		{"long is cut and marked", "abcdef", "…def", 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Tail(c.in, c.n); got != c.want {
				t.Errorf("Tail(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
			}
		})
	}
}
