package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/dev/proc"
)

// The server has no authentication of its own: outside FC it listens on
// loopback only, inside FC (any runtime variable) on every interface as FC
// requires, and --listen chooses either way.
func TestListenAddr(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	tests := []struct {
		name, listen string
		port         int
		getenv       func(string) string
		want         string
	}{
		{"a laptop", "", 9000, env(), "127.0.0.1:9000"},
		{"a laptop, another port", "", 9321, env(), "127.0.0.1:9321"},
		{"FC's custom runtime", "", 9000, env("FC_CUSTOM_LISTEN_PORT", "9000"), "0.0.0.0:9000"},
		{"an FC instance", "", 9000, env("FC_FUNCTION_NAME", "idemgate"), "0.0.0.0:9000"},
		{"the local stand-ins", "", 9123, env("FC_SERVER_PORT", "9123"), "0.0.0.0:9123"},
		{"--listen on every interface", ":9000", 9000, env(), ":9000"},
		{"--listen inside FC", "127.0.0.1:9001", 9000, env("FC_FUNCTION_NAME", "idemgate"), "127.0.0.1:9001"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := listenAddr(tc.listen, tc.port, tc.getenv); got != tc.want {
				t.Fatalf("listenAddr = %q, want %q", got, tc.want)
			}
		})
	}
}

// `main serve --listen` serves where it is told and says so.
func TestServeListen(t *testing.T) {
	setEnv(t)
	for _, v := range fcRuntimeVars {
		t.Setenv(v, "")
	}
	var out proc.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- serve(ctx, &run{name: "serve", stdout: &out, stderr: &out}, "127.0.0.1:0") }()
	defer func() {
		cancel()
		if code := <-done; code != ExitOK {
			t.Errorf("serve ended with %d\n%s", code, out.String())
		}
	}()
	var addr string
	for i := 0; addr == "" && i < 3000; i++ {
		for _, l := range strings.Split(out.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "listening" {
				addr, _ = m["addr"].(string)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("listening on %q\n%s", addr, out.String())
	}
	resp, err := http.Get("http://" + addr + "/tasks/" + strings.Repeat("a", 64))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET of an unknown task: %d", resp.StatusCode)
	}
}
