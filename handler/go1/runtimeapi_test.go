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
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handler"
)

// Runtime API paths of fc-runtime-go-sdk v0.3.1 (runtime_api_client.go).
const apiPrefix = "/2020-11-11/runtime/invocation/"

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
	}, func(context.Context) error {
		if os.Getenv("GO1_HELPER_INIT_FAIL") == "1" {
			return errors.New("warm-up failed: db unreachable")
		}
		inits.Add(1)
		return nil
	}, func(context.Context) error {
		fmt.Println("helper: stop called")
		return nil
	}, func(v ...string) {
		mu.Lock()
		defer mu.Unlock()
		secrets = append(secrets, v...)
	})
}

// invocation is one item the stand-in hands out on GET next.
type invocation struct {
	id       string
	funcType string // x-fc-function-type: "" an event, "1" initializer, "2" pre-stop
	body     string
	headers  map[string]string
}

// post is what the SDK sent back for one invocation.
type post struct {
	id, kind    string // kind: "response", "error", or "unexpected <method> <path>"
	contentType string
	body        []byte
}

// standIn serves the runtime API one invocation at a time, as FC does for a
// single-concurrency instance: the next invocation is handed out only after
// the previous one was answered, so the initializer completes first. When
// the queue is empty, GET next blocks until the test ends.
type standIn struct {
	queue chan invocation
	turn  chan struct{}
	posts chan post
	done  chan struct{}
}

func newStandIn(invs []invocation) *standIn {
	s := &standIn{queue: make(chan invocation, len(invs)), turn: make(chan struct{}, 1),
		posts: make(chan post, len(invs)+16), done: make(chan struct{})}
	for _, inv := range invs {
		s.queue <- inv
	}
	s.turn <- struct{}{}
	return s
}

func (s *standIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, apiPrefix)
	switch {
	case ok && r.Method == http.MethodGet && rest == "next":
		s.next(w, r)
		return
	case ok && r.Method == http.MethodPost:
		if id, kind, ok := strings.Cut(rest, "/"); ok && (kind == "response" || kind == "error") {
			body, _ := io.ReadAll(r.Body)
			s.posts <- post{id: id, kind: kind, contentType: r.Header.Get("Content-Type"), body: body}
			s.turn <- struct{}{}
			return
		}
	}
	s.posts <- post{kind: "unexpected " + r.Method + " " + r.URL.Path}
	http.NotFound(w, r)
}

func (s *standIn) next(w http.ResponseWriter, r *http.Request) {
	select {
	case <-s.turn:
	case <-s.done:
		return
	case <-r.Context().Done():
		return
	}
	var inv invocation
	select {
	case inv = <-s.queue:
	default:
		select { // nothing left: hold the poll like an idle instance
		case <-s.done:
		case <-r.Context().Done():
		}
		return
	}
	h := w.Header()
	h.Set("x-fc-request-id", inv.id)
	h.Set("x-fc-function-deadline", strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10))
	h.Set("x-fc-function-timeout", "60")
	if inv.funcType != "" {
		h.Set("x-fc-function-type", inv.funcType)
	}
	for k, v := range inv.headers {
		h.Set(k, v)
	}
	_, _ = io.WriteString(w, inv.body)
}

// syncBuffer collects a subprocess's output while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// eventually reports whether b comes to contain s: the process wrote it
// before answering, but the pipe is copied into b asynchronously.
func eventually(b *syncBuffer, s string) bool {
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if strings.Contains(b.String(), s) {
			return true
		}
	}
	return false
}

// fnProcess is the running helper process and its stand-in.
type fnProcess struct {
	api            *standIn
	stdout, stderr *syncBuffer
}

func startFunction(t *testing.T, invs []invocation, env ...string) *fnProcess {
	t.Helper()
	api := newStandIn(invs)
	srv := httptest.NewServer(api)
	p := &fnProcess{api: api, stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), append([]string{"GO1_HELPER=1",
		"FC_RUNTIME_API=" + srv.Listener.Addr().String()}, env...)...) // host:port, the SDK adds http://
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		srv.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The SDK loop never ends by itself; the killed process drops its poll.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		close(api.done)
		srv.Close()
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
func (p *fnProcess) collect(t *testing.T, n int) map[string]post {
	t.Helper()
	got := map[string]post{}
	timeout := time.After(60 * time.Second)
	for len(got) < n {
		select {
		case ps := <-p.api.posts:
			if strings.HasPrefix(ps.kind, "unexpected") {
				t.Fatalf("SDK sent %s", ps.kind)
			}
			if _, dup := got[ps.id]; dup {
				t.Fatalf("two answers for %s", ps.id)
			}
			got[ps.id] = ps
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
	p := startFunction(t, []invocation{
		{id: "init-1", funcType: "1"},
		{id: "req-ok", body: okBody, headers: with(map[string]string{"x-fc-retry-count": "2"})},
		{id: "req-raw", body: rawBody, headers: with(nil)},
		{id: "req-fail", body: failPayload, headers: with(nil)},
		{id: "stop-1", funcType: "2"},
	})
	got := p.collect(t, 5)

	for id, ps := range got {
		if ps.contentType != "application/json" {
			t.Errorf("%s: Content-Type %q", id, ps.contentType)
		}
	}
	for _, id := range []string{"init-1", "stop-1"} {
		if ps := got[id]; ps.kind != "response" || len(ps.body) != 0 {
			t.Errorf("%s: posted to /%s with %q, want an empty /response", id, ps.kind, ps.body)
		}
	}
	if !eventually(p.stdout, "helper: stop called") {
		t.Error("pre-stop did not call stop")
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
			if ps.kind != "response" || !bytes.Equal(ps.body, want) {
				t.Fatalf("posted to /%s:\n%s\nwant /response with the reply body itself:\n%s", ps.kind, ps.body, want)
			}
		})
	}

	t.Run("failure reply goes to /error", func(t *testing.T) {
		ps := got["req-fail"]
		if ps.kind != "error" {
			t.Fatalf("posted to /%s: %s", ps.kind, ps.body)
		}
		var e struct {
			ErrorMessage string `json:"errorMessage"`
			ErrorType    string `json:"errorType"`
		}
		if err := json.Unmarshal(ps.body, &e); err != nil {
			t.Fatalf("error body %s: %v", ps.body, err)
		}
		want := fakeReply([]byte(failPayload), handler.Meta{RequestID: "req-fail"}, 0, nil)
		if e.ErrorType != "boom" || e.ErrorMessage != string(want.Body) {
			t.Errorf("error body %s; want errorType boom and errorMessage %s", ps.body, want.Body)
		}
	})
}

func TestRuntimeAPIInitFailure(t *testing.T) {
	p := startFunction(t, []invocation{{id: "init-1", funcType: "1"}}, "GO1_HELPER_INIT_FAIL=1")
	ps := p.collect(t, 1)["init-1"]
	if ps.kind != "error" {
		t.Fatalf("failed initializer posted to /%s: %s", ps.kind, ps.body)
	}
	var e map[string]any
	if err := json.Unmarshal(ps.body, &e); err != nil {
		t.Fatal(err)
	}
	if e["errorType"] != ErrorTypeInitialize || e["errorMessage"] != "warm-up failed: db unreachable" {
		t.Errorf("error body %s", ps.body)
	}
	if !eventually(p.stderr, "initializer failed") {
		t.Errorf("init error not logged; stderr:\n%s", p.stderr)
	}
}
