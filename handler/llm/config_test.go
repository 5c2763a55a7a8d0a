package llm

import (
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
)

func TestNewChoosesModel(t *testing.T) {
	for _, model := range []string{"offline", " Offline "} {
		c, err := New(Config{Model: model})
		if err != nil {
			t.Fatalf("New(%q): %v", model, err)
		}
		if _, ok := c.(*Offline); !ok {
			t.Errorf("New(%q) = %T, want *Offline", model, c)
		}
	}
	c, err := New(Config{APIKey: testKey})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	hc, ok := c.(*HTTPClient)
	if !ok {
		t.Fatalf("New = %T, want *HTTPClient", c)
	}
	if hc.endpoint != DefaultBaseURL+"/chat/completions" || hc.model != DefaultModel || hc.timeout != DefaultTimeout {
		t.Errorf("defaults not applied: %v", hc)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"missing key", Config{}, []string{"LLM_API_KEY", "DASHSCOPE_API_KEY", "LLM_MODEL=offline"}},
		{"blank key", Config{APIKey: "  ", Model: "qwen-max"}, []string{"LLM_API_KEY", `"qwen-max"`}},
		{"not http", Config{APIKey: testKey, BaseURL: "ftp://host/v1"}, []string{"LLM_BASE_URL"}},
		{"no host", Config{APIKey: testKey, BaseURL: "https:///v1"}, []string{"LLM_BASE_URL"}},
		{"query", Config{APIKey: testKey, BaseURL: "https://host/v1?key=x"}, []string{"LLM_BASE_URL"}},
		{"newline in key", Config{APIKey: "sk-abc\x01def"}, []string{"LLM_API_KEY"}},
		{"negative timeout", Config{APIKey: testKey, Timeout: -time.Second}, []string{"timeout"}},
		{"huge timeout", Config{APIKey: testKey, Timeout: 2 * time.Hour}, []string{"timeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil {
				t.Fatal("New succeeded")
			}
			if class, code := idempotency.Classify(err); class != idempotency.ClassFinal || code != CodeInvalidConfig {
				t.Errorf("classified %s/%s", class, code)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	cfg, err := ConfigFromEnv(env(map[string]string{
		"LLM_BASE_URL": "https://dashscope-intl.aliyuncs.com/compatible-mode/v1", "DASHSCOPE_API_KEY": " sk-alt ",
		"LLM_MODEL": "qwen-max", "LLM_TIMEOUT_SECONDS": "2.5",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.APIKey != "sk-alt" || cfg.Model != "qwen-max" || cfg.Timeout != 2500*time.Millisecond ||
		cfg.BaseURL != "https://dashscope-intl.aliyuncs.com/compatible-mode/v1" {
		t.Errorf("cfg = %#v (key %q)", cfg, cfg.APIKey)
	}
	cfg, _ = ConfigFromEnv(env(map[string]string{"LLM_API_KEY": "sk-main", "DASHSCOPE_API_KEY": "sk-alt"}))
	if cfg.APIKey != "sk-main" {
		t.Errorf("LLM_API_KEY must win over DASHSCOPE_API_KEY")
	}
	for _, bad := range []string{"0", "-1", "abc", "99999"} {
		_, err := ConfigFromEnv(env(map[string]string{"LLM_TIMEOUT_SECONDS": bad}))
		if err == nil || !strings.Contains(err.Error(), "LLM_TIMEOUT_SECONDS") {
			t.Errorf("LLM_TIMEOUT_SECONDS=%q: err = %v", bad, err)
		}
	}
}
