package cli

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/config"
	"github.com/idemgate/idemgate/internal/dev/proc"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// Secrets in every place the configuration can hold one, including those the
// redactor does not know (a password in LLM_BASE_URL or OSS_ENDPOINT).
// (The model client refuses a query in LLM_BASE_URL; bareURL drops one anyway.)
var secretEnv = []string{
	"MYSQL_DSN=idemgate:dsn-SECRET-1@tcp(127.0.0.1:1)/idemgate_prod",
	"REDIS_URL=redis://:redis-SECRET-2@127.0.0.1:1/3",
	"LLM_API_KEY=sk-SECRET-3", "LLM_MODEL=qwen-plus",
	"LLM_BASE_URL=https://proxy:url-SECRET-4@127.0.0.1:1/v1",
	"OSS_ENDPOINT=https://oss:oss-SECRET-6@127.0.0.1:1", "OSS_BUCKET=idemgate-results", "OSS_REGION=cn-hangzhou",
	"ALIBABA_CLOUD_ACCESS_KEY_ID=LTAI-id", "ALIBABA_CLOUD_ACCESS_KEY_SECRET=ak-SECRET-7", "ALIBABA_CLOUD_SECURITY_TOKEN=sts-SECRET-8",
}

func getenv(kv []string) func(string) string {
	return func(name string) string {
		for _, s := range kv {
			if k, v, _ := strings.Cut(s, "="); k == name {
				return v
			}
		}
		return ""
	}
}

func TestBackends(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		env  []string
		want map[string]string
	}{
		{"nothing configured", []string{"STATE_DIR=" + dir}, map[string]string{
			"store": "embedded " + filepath.Join(dir, "idempotency.db"), "fast": "none",
			"results": "local " + filepath.Join(dir, "results"), "model": "offline"}},
		{"every backend, with secrets", secretEnv, map[string]string{
			"store": "mysql 127.0.0.1:1/idemgate_prod", "fast": "redis 127.0.0.1:1/3",
			"results": "oss bucket idemgate-results at https://127.0.0.1:1 (cn-hangzhou)",
			"model":   "qwen-plus at https://127.0.0.1:1/v1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Load(getenv(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			kv := backends(cfg) // before any redaction
			got := map[string]string{}
			for i := 0; i+1 < len(kv); i += 2 {
				got[kv[i].(string)] = kv[i+1].(string)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("backends = %v", got)
			}
			assertNoSecret(t, fmtKV(got))
		})
	}
}

func fmtKV(m map[string]string) string {
	b, _ := json.Marshal(m)
	return string(b)
}

func assertNoSecret(t *testing.T, text string) {
	t.Helper()
	if i := strings.Index(text, "SECRET"); i >= 0 {
		t.Errorf("a secret is shown: …%s…", text[max(0, i-40):min(len(text), i+20)])
	}
}

// Every command and the server log one line naming the backends at start,
// and nothing they print shows a secret.
func TestStartupLine(t *testing.T) {
	setEnv(t, secretEnv...)
	t.Run("a command", func(t *testing.T) {
		_, stderr, code := cli("stats") // MySQL at 127.0.0.1:1 answers nothing
		if code != ExitStoreUnavailable {
			t.Fatalf("exit %d:\n%s", code, stderr)
		}
		line := backendLine(t, stderr)
		if line["command"] != "stats" || line["store"] != "mysql 127.0.0.1:1/idemgate_prod" {
			t.Fatalf("line = %v", line)
		}
		assertNoSecret(t, stderr)
	})
	t.Run("the server", func(t *testing.T) {
		var out proc.Buffer
		a, err := open(&out, "serve", slog.LevelInfo, os.Getenv)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if line := backendLine(t, out.String()); line["command"] != "serve" || line["model"] != "qwen-plus at https://127.0.0.1:1/v1" {
			t.Fatalf("line = %v", line)
		}
		assertNoSecret(t, out.String())
	})
}

// backendLine finds the one "backends" log line in logs.
func backendLine(t *testing.T, logs string) map[string]any {
	t.Helper()
	var found []map[string]any
	for _, l := range strings.Split(logs, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "backends" {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d backends lines in:\n%s", len(found), logs)
	}
	for _, k := range []string{"store", "fast", "results", "model"} {
		if s, _ := found[0][k].(string); s == "" {
			t.Errorf("the line lacks %s: %v", k, found[0])
		}
	}
	return found[0]
}

// The start line says which backends answered, not only which are
// configured: the embedded store answers, a MySQL nobody listens for does
// not (and says why, without its password), a live Redis answers with its
// version, a dead one does not.
func TestStartupLineSaysWhatAnswered(t *testing.T) {
	redisURL := testenv.RedisURL(t)
	tests := []struct {
		name        string
		env         []string
		store, fast string // prefixes of store_answered, fast_answered
	}{
		{"embedded store alone", nil, "answered", "none"},
		{"embedded store and a live Redis", []string{"REDIS_URL=" + redisURL}, "answered", "answered (redis "},
		{"a MySQL and a Redis that do not answer", []string{"MYSQL_DSN=idemgate:dsn-SECRET-1@tcp(127.0.0.1:1)/idemgate_prod",
			"REDIS_URL=redis://:redis-SECRET-2@127.0.0.1:1/3"}, "idempotency: durable store unavailable: dial tcp 127.0.0.1:1", "redisfast: INFO server: dial tcp 127.0.0.1:1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			setEnv(t, tc.env...)
			var out proc.Buffer
			a, err := open(&out, "serve", slog.LevelInfo, os.Getenv)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			line := backendLine(t, out.String())
			store, _ := line["store_answered"].(string)
			fast, _ := line["fast_answered"].(string)
			if !strings.HasPrefix(store, tc.store) || !strings.HasPrefix(fast, tc.fast) {
				t.Fatalf("store_answered %q, fast_answered %q; want %q…, %q…", store, fast, tc.store, tc.fast)
			}
			assertNoSecret(t, out.String())
		})
	}
}

// With Redis down, go-redis's own complaints are log lines like every other:
// every line on stderr is one JSON object (docs/operations.md), and the
// library's dial failure is among them, not a "redis: … pool.go:…" line of
// its own.
func TestRedisDownEveryLineIsJSON(t *testing.T) {
	setEnv(t, "REDIS_URL=redis://127.0.0.1:1/0")
	stdout, stderr, code := cli("invoke", "--event", uniqueTask(t))
	if o := outcome(t, stdout); code != ExitOK || o["status"] != "SUCCEEDED" {
		t.Fatalf("exit %d, %v\n%s", code, o, stderr)
	}
	fromRedis := 0
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("a line that is not one JSON object: %q", l)
		}
		if m["msg"] == "redis client" {
			fromRedis++
			if e, _ := m["error"].(string); !strings.Contains(e, "127.0.0.1:1") || m["level"] != "WARN" {
				t.Errorf("go-redis's line: %v", m)
			}
		}
	}
	if fromRedis == 0 {
		t.Fatalf("no line of go-redis's among the logs:\n%s", stderr)
	}
}
