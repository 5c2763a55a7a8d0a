package e2e_test

// End-to-end tests of the real binary, driven over the FC custom-runtime
// protocol exactly as the platform drives it (headers, 404 + x-fc-status).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/dev/modelfake"
	"github.com/idemgate/idemgate/internal/dev/proc"
)

// nonce makes ids and contents that never repeat across runs (Redis and
// MariaDB are shared).
var nonce = proc.Nonce

// binary is the function, built once for the package; root is the
// repository (the README's commands run there).
var binary, root string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "idemgate-bin")
	if err != nil {
		panic(err)
	}
	root, err = proc.RepoRoot()
	if err == nil {
		binary, err = proc.Build(context.Background(), dir, false)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// instance is a running custom-runtime server of the binary.
type instance struct {
	*proc.Instance
}

// start runs the binary with env (after PATH and HOME) and waits for
// /initialize; the process is killed when the test ends, and its output
// logged if the test failed.
func start(t *testing.T, env ...string) *instance {
	t.Helper()
	in, err := proc.Start(context.Background(), binary, proc.Options{Env: env})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Kill()
		if t.Failed() {
			t.Logf("instance output:\n%s", in.Output())
		}
	})
	return &instance{in}
}

// cli runs a subcommand of the binary with env and returns its stdout and
// exit code; stderr is logged when the exit code is not 0.
func cli(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	out, err := proc.CLI(context.Background(), binary, env, args...)
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		t.Logf("%v", err)
		return out, ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out, 0
}

// migrate applies the schema to env's MYSQL_DSN.
func migrate(t *testing.T, env []string) {
	t.Helper()
	if out, code := cli(t, env, "migrate"); code != 0 {
		t.Fatalf("migrate: %s", out)
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
	req, err := http.NewRequest(http.MethodPost, i.Base+"/invoke", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("x-fc-request-id", requestID)
	req.Header.Set("x-fc-function-name", "idemgate")
	req.Header.Set("x-fc-region", "cn-hangzhou")
	req.Header.Set("x-fc-account-id", "1234567890123456")
	req.Header.Set("x-fc-function-timeout", "60")
	return send(t, req, extra)
}

// send sends req with the extra headers and reads the whole answer.
func send(t *testing.T, req *http.Request, extra map[string]string) answer {
	t.Helper()
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

// newLLMFake starts the model fake (every answer delayed by delay unless a
// test sets another behaviour), closed when the test ends.
func newLLMFake(t *testing.T, delay time.Duration) *modelfake.Fake {
	f := modelfake.Start()
	if delay > 0 {
		f.Set(func(int64) (time.Duration, int) { return delay, 0 })
	}
	t.Cleanup(f.Close)
	return f
}
