package go1

// The go1 path end to end: the real SDK loop (fc.Start via Start) in a
// subprocess, against an in-process stand-in of the FC runtime API. A
// subprocess because fc.Start never returns and calls log.Fatalf when its
// loop ends.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/internal/dev/proc"
	"github.com/idemgate/idemgate/internal/dev/runtimeapi"
)

// echo is what the helper's handle answers: what reached it.
type echo struct {
	RequestID    string   `json:"request_id"`
	FunctionName string   `json:"function_name"`
	Region       string   `json:"region"`
	AccountID    string   `json:"account_id"`
	AccessKeyID  string   `json:"access_key_id"`
	RetryCount   int      `json:"retry_count"`
	Body         string   `json:"body"`
	Inits        int64    `json:"inits"`
	Secrets      []string `json:"secrets"`
}

const failPayload = `{"fail":true}`

// fakeReply is the helper's handle, pure so the test can predict its bytes.
func fakeReply(body []byte, meta handler.Meta, inits int64, secrets []string) handler.Reply {
	if string(body) == failPayload {
		b, _ := json.Marshal(map[string]string{"errorType": "boom", "errorMessage": "asked to fail",
			"request_id": meta.RequestID})
		return handler.Reply{Status: http.StatusNotFound, Body: b, ErrorType: "boom"}
	}
	b, _ := json.Marshal(echo{RequestID: meta.RequestID, FunctionName: meta.FunctionName, Region: meta.Region,
		AccountID: meta.AccountID, AccessKeyID: meta.Credentials.AccessKeyID, RetryCount: meta.RetryCount,
		Body: string(body), Inits: inits, Secrets: secrets})
	return handler.Reply{Status: http.StatusOK, Body: b}
}

// TestHelperProcess is the function process: it runs only when re-executed
// by startFunction.
func TestHelperProcess(t *testing.T) {
	if os.Getenv("GO1_HELPER") != "1" {
		t.Skip("helper process for TestRuntimeAPI")
	}
	var inits atomic.Int64
	var mu sync.Mutex
	var secrets []string
	Start(func(_ context.Context, body []byte, meta handler.Meta) handler.Reply {
		mu.Lock()
		defer mu.Unlock()
		return fakeReply(body, meta, inits.Load(), secrets)
	}, handler.Hooks{
		Init: func(context.Context) error {
			if os.Getenv("GO1_HELPER_INIT_FAIL") == "1" {
				return errors.New("warm-up failed: db unreachable")
			}
			inits.Add(1)
			return nil
		},
		PreStop: func(context.Context) error {
			fmt.Println("helper: pre-stop called")
			return nil
		},
		Shutdown: func(context.Context) error {
			fmt.Println("helper: shutdown called")
			return nil
		},
		Secrets: func(v ...string) func() {
			mu.Lock()
			defer mu.Unlock()
			secrets = append(secrets, v...)
			return func() {}
		},
	})
}

// eventually reports whether b comes to contain s: the process wrote it
// before answering, but the pipe is copied into b asynchronously.
func eventually(b *proc.Buffer, s string) bool {
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if strings.Contains(b.String(), s) {
			return true
		}
	}
	return false
}

// fnProcess is the running helper process and its stand-in.
type fnProcess struct {
	api            *runtimeapi.Server
	cmd            *exec.Cmd
	stdout, stderr *proc.Buffer
	exited         chan error // receives cmd.Wait's result
}

func startFunction(t *testing.T, invs []runtimeapi.Invocation, env ...string) *fnProcess {
	t.Helper()
	api := runtimeapi.Start(invs...)
	p := &fnProcess{api: api, stdout: &proc.Buffer{}, stderr: &proc.Buffer{}}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), append([]string{"GO1_HELPER=1", "FC_RUNTIME_API=" + api.Addr()}, env...)...)
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		api.Close()
		t.Fatal(err)
	}
	p.cmd, p.exited = cmd, make(chan error, 1)
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		// The SDK loop never ends by itself; the killed process drops its poll.
		_ = cmd.Process.Kill()
		<-p.exited
		p.exited <- nil
		api.Close()
		if strings.Contains(p.stderr.String(), "DATA RACE") {
			t.Errorf("race in the function process:\n%s", p.stderr)
		}
		if t.Failed() {
			t.Logf("function stdout:\n%s\nfunction stderr:\n%s", p.stdout, p.stderr)
		}
	})
	return p
}

// collect waits for n answers, keyed by request id.
func (p *fnProcess) collect(t *testing.T, n int) map[string]runtimeapi.Post {
	t.Helper()
	got := map[string]runtimeapi.Post{}
	timeout := time.After(60 * time.Second)
	for len(got) < n {
		select {
		case ps := <-p.api.Posts():
			if strings.HasPrefix(ps.Kind, "unexpected") {
				t.Fatalf("SDK sent %s", ps.Kind)
			}
			if _, dup := got[ps.ID]; dup {
				t.Fatalf("two answers for %s", ps.ID)
			}
			got[ps.ID] = ps
		case <-timeout:
			t.Fatalf("got %d of %d answers: %+v", len(got), n, got)
		}
	}
	return got
}

func TestRuntimeAPI(t *testing.T) {
	creds := map[string]string{
		"x-fc-access-key-id": "STS.test-ak", "x-fc-access-key-secret": "test-secret-value",
		"x-fc-security-token": "test-sts-token", "x-fc-function-name": "idemgate",
		"x-fc-region": "cn-shanghai", "x-fc-account-id": "1234567890",
	}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range creds {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	okBody := `{"task":"summarize","text":"héllo <world> & co"}`
	rawBody := "plain text, not JSON"
	p := startFunction(t, []runtimeapi.Invocation{
		{ID: "init-1", FuncType: runtimeapi.TypeInitializer},
		{ID: "req-ok", Body: okBody, Headers: with(map[string]string{"x-fc-retry-count": "2"})},
		{ID: "req-raw", Body: rawBody, Headers: with(nil)},
		{ID: "req-fail", Body: failPayload, Headers: with(nil)},
		{ID: "stop-1", FuncType: runtimeapi.TypePreStop},
	})
	got := p.collect(t, 5)

	for id, ps := range got {
		if ps.ContentType != "application/json" {
			t.Errorf("%s: Content-Type %q", id, ps.ContentType)
		}
	}
	for _, id := range []string{"init-1", "stop-1"} {
		if ps := got[id]; ps.Kind != "response" || len(ps.Body) != 0 {
			t.Errorf("%s: posted to /%s with %q, want an empty /response", id, ps.Kind, ps.Body)
		}
	}
	if !eventually(p.stdout, "helper: pre-stop called") {
		t.Error("pre-stop did not call the PreStop hook")
	}

	secrets := []string{"test-secret-value", "test-sts-token"}
	meta := handler.Meta{RequestID: "req-ok", FunctionName: "idemgate", Region: "cn-shanghai",
		AccountID: "1234567890", RetryCount: 2, Credentials: handler.Credentials{AccessKeyID: "STS.test-ak",
			AccessKeySecret: "test-secret-value", SecurityToken: "test-sts-token"}}
	successes := []struct {
		name, id, body string
		meta           handler.Meta
		secrets        []string
	}{
		// inits=1: the initializer ran before the first event.
		{name: "JSON event with retry count", id: "req-ok", body: okBody, meta: meta, secrets: secrets},
		{name: "non-JSON event reaches handle raw", id: "req-raw", body: rawBody,
			meta:    func() handler.Meta { m := meta; m.RequestID, m.RetryCount = "req-raw", 0; return m }(),
			secrets: append(append([]string{}, secrets...), secrets...)},
	}
	for _, tc := range successes {
		t.Run(tc.name, func(t *testing.T) {
			ps := got[tc.id]
			want := fakeReply([]byte(tc.body), tc.meta, 1, tc.secrets).Body
			if ps.Kind != "response" || !bytes.Equal(ps.Body, want) {
				t.Fatalf("posted to /%s:\n%s\nwant /response with the reply body itself:\n%s", ps.Kind, ps.Body, want)
			}
		})
	}

	t.Run("failure reply goes to /error", func(t *testing.T) {
		ps := got["req-fail"]
		if ps.Kind != "error" {
			t.Fatalf("posted to /%s: %s", ps.Kind, ps.Body)
		}
		var e struct {
			ErrorMessage string `json:"errorMessage"`
			ErrorType    string `json:"errorType"`
		}
		if err := json.Unmarshal(ps.Body, &e); err != nil {
			t.Fatalf("error body %s: %v", ps.Body, err)
		}
		want := fakeReply([]byte(failPayload), handler.Meta{RequestID: "req-fail"}, 0, nil)
		if e.ErrorType != "boom" || e.ErrorMessage != string(want.Body) {
			t.Errorf("error body %s; want errorType boom and errorMessage %s", ps.Body, want.Body)
		}
	})
}

func TestRuntimeAPIInitFailure(t *testing.T) {
	p := startFunction(t, []runtimeapi.Invocation{{ID: "init-1", FuncType: runtimeapi.TypeInitializer}}, "GO1_HELPER_INIT_FAIL=1")
	ps := p.collect(t, 1)["init-1"]
	if ps.Kind != "error" {
		t.Fatalf("failed initializer posted to /%s: %s", ps.Kind, ps.Body)
	}
	var e map[string]any
	if err := json.Unmarshal(ps.Body, &e); err != nil {
		t.Fatal(err)
	}
	if e["errorType"] != ErrorTypeInitialize || e["errorMessage"] != "warm-up failed: db unreachable" {
		t.Errorf("error body %s", ps.Body)
	}
	if !eventually(p.stderr, "initializer failed") {
		t.Errorf("init error not logged; stderr:\n%s", p.stderr)
	}
}

// TestRuntimeAPIPreStopKeepsServing: FC calls PreStop before a freeze as
// well as before destruction, so the loop must serve after it, and only
// SIGTERM runs Shutdown (then the process exits 0).
func TestRuntimeAPIPreStopKeepsServing(t *testing.T) {
	p := startFunction(t, []runtimeapi.Invocation{
		{ID: "init-1", FuncType: runtimeapi.TypeInitializer},
		{ID: "req-before", Body: `{"n":1}`},
		{ID: "stop-1", FuncType: runtimeapi.TypePreStop},
		{ID: "req-after", Body: `{"n":2}`},
	})
	got := p.collect(t, 4)
	for _, id := range []string{"req-before", "stop-1", "req-after"} {
		if got[id].Kind != "response" {
			t.Errorf("%s: posted to /%s: %s", id, got[id].Kind, got[id].Body)
		}
	}
	if !eventually(p.stdout, "helper: pre-stop called") {
		t.Fatal("pre-stop did not call the PreStop hook")
	}
	if strings.Contains(p.stdout.String(), "shutdown called") {
		t.Fatal("pre-stop ran the Shutdown hook")
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		p.exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the process did not exit after SIGTERM")
	}
	if !strings.Contains(p.stdout.String(), "helper: shutdown called") {
		t.Error("SIGTERM did not run the Shutdown hook")
	}
}
