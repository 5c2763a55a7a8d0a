package main_test

// End-to-end tests of the real binary, driven over the FC custom-runtime
// protocol exactly as the platform drives it (headers, 404 + x-fc-status).

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "idemgate-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "main")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuffer collects a process's output for assertions after it stopped.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type instance struct {
	cmd  *exec.Cmd
	base string
	out  *syncBuffer
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// baseEnv is a clean environment: PATH and HOME only, plus the test's own.
func baseEnv(extra ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, extra...)
}

// start runs the binary as a custom-runtime server and waits for /initialize.
func start(t *testing.T, env ...string) *instance {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(binary)
	out := &syncBuffer{}
	cmd.Env = baseEnv(append(env, fmt.Sprintf("FC_SERVER_PORT=%d", port))...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inst := &instance{cmd: cmd, base: fmt.Sprintf("http://127.0.0.1:%d", port), out: out}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		if t.Failed() {
			t.Logf("instance output:\n%s", out.String())
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Post(inst.base+"/initialize", "application/octet-stream", nil)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return inst
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance did not initialize: %v\n%s", err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("answer is not JSON: %s", a.body)
	}
	return m
}

// invoke sends body to /invoke with the headers FC sends.
func (i *instance) invoke(t *testing.T, body []byte, requestID string, extra map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, i.base+"/invoke", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("x-fc-request-id", requestID)
	req.Header.Set("x-fc-function-name", "idemgate")
	req.Header.Set("x-fc-region", "cn-hangzhou")
	req.Header.Set("x-fc-account-id", "1234567890123456")
	req.Header.Set("x-fc-function-timeout", "60")
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

func nonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// taskEvent is an EventBridge CloudEvent of a summarize task.
func taskEvent(id, content string, extra map[string]any) []byte {
	data := map[string]any{"tenant_id": "acme", "task_type": "summarize", "operation": "summarize",
		"input": map[string]any{"content": content}, "request_id": "req-" + id}
	for k, v := range extra {
		data[k] = v
	}
	b, _ := json.Marshal(map[string]any{"id": id, "source": "idemgate.test", "specversion": "1.0",
		"type": "idemgate:Task:Submitted", "time": "2026-11-30T07:05:12Z", "datacontenttype": "application/json",
		"aliyunaccountid": "1234567890123456", "aliyuneventbusname": "default", "aliyunregionid": "cn-hangzhou", "data": data})
	return b
}

// llmFake is an OpenAI-compatible chat-completions endpoint that counts calls
// per Idempotency-Key.
type llmFake struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls map[string]int
	keys  []string
	total atomic.Int32
	delay time.Duration
	// behave, when set, decides each call (n counts from 1): a delay before
	// answering and an HTTP status (0 or 200: a normal answer).
	behave atomic.Pointer[func(n int32) (time.Duration, int)]
	// errBody, when set, is the body of a non-200 answer.
	errBody atomic.Pointer[string]
	// arrived receives each call's number as it arrives.
	arrived chan int32
}

func (f *llmFake) set(b func(n int32) (time.Duration, int)) { f.behave.Store(&b) }

// accept adds an API key the fake answers (sk-test-key always is).
func (f *llmFake) accept(key string) { f.mu.Lock(); f.keys = append(f.keys, key); f.mu.Unlock() }

func (f *llmFake) accepted(auth string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range append([]string{"sk-test-key"}, f.keys...) {
		if auth == "Bearer "+k {
			return true
		}
	}
	return false
}

func newLLMFake(t *testing.T, delay time.Duration) *llmFake {
	f := &llmFake{calls: map[string]int{}, delay: delay, arrived: make(chan int32, 1000)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || !f.accepted(r.Header.Get("Authorization")) {
			// Quotes what it got, as a careless gateway would: the client must
			// keep the key out of its errors.
			http.Error(w, fmt.Sprintf(`{"error":{"code":"invalid_api_key","message":"bad key: %s"}}`,
				r.Header.Get("Authorization")), http.StatusUnauthorized)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		f.mu.Lock()
		f.calls[key]++
		f.mu.Unlock()
		n := f.total.Add(1)
		f.arrived <- n
		delay, status := f.delay, 0
		if b := f.behave.Load(); b != nil {
			delay, status = (*b)(n)
		}
		time.Sleep(delay)
		if status != 0 && status != 200 {
			w.WriteHeader(status)
			if b := f.errBody.Load(); b != nil {
				fmt.Fprint(w, *b)
			} else {
				fmt.Fprintf(w, `{"error":{"code":"fake","message":"status %d"}}`, status)
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"cmpl-1","object":"chat.completion","model":"qwen-plus","choices":[{"index":0,"message":{"role":"assistant","content":"summary %d for %s"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, n, key[:8])
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *llmFake) env() []string {
	return []string{"LLM_BASE_URL=" + f.srv.URL + "/v1", "LLM_API_KEY=sk-test-key", "LLM_MODEL=qwen-plus"}
}
