package llm

import (
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
)

// validConfig is a complete Config of the HTTP client; cases change one field.
func validConfig(change func(*Config)) Config {
	c := Config{BaseURL: "https://dashscope.aliyuncs.com/compatible-mode/v1/", APIKey: testKey, Model: "qwen-plus",
		Timeout: 60 * time.Second}
	if change != nil {
		change(&c)
	}
	return c
}

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
	c, err := New(validConfig(nil))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	hc, ok := c.(*HTTPClient)
	if !ok {
		t.Fatalf("New = %T, want *HTTPClient", c)
	}
	if hc.endpoint != "https://dashscope.aliyuncs.com/compatible-mode/v1/chat/completions" || hc.model != "qwen-plus" ||
		hc.timeout != time.Minute {
		t.Errorf("config not applied: %v", hc)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"missing key", validConfig(func(c *Config) { c.APIKey = "" }), []string{"LLM_API_KEY", "DASHSCOPE_API_KEY", "LLM_MODEL=offline"}},
		{"blank key", validConfig(func(c *Config) { c.APIKey, c.Model = "  ", "qwen-max" }), []string{"LLM_API_KEY", `"qwen-max"`}},
		{"no model", validConfig(func(c *Config) { c.Model = " " }), []string{"LLM_MODEL", "offline"}},
		{"no base URL", validConfig(func(c *Config) { c.BaseURL = "" }), []string{"LLM_BASE_URL"}},
		{"not http", validConfig(func(c *Config) { c.BaseURL = "ftp://host/v1" }), []string{"LLM_BASE_URL"}},
		{"no host", validConfig(func(c *Config) { c.BaseURL = "https:///v1" }), []string{"LLM_BASE_URL"}},
		{"query", validConfig(func(c *Config) { c.BaseURL = "https://host/v1?key=x" }), []string{"LLM_BASE_URL"}},
		{"newline in key", validConfig(func(c *Config) { c.APIKey = "sk-abc\x01def" }), []string{"LLM_API_KEY"}},
		{"no timeout", validConfig(func(c *Config) { c.Timeout = 0 }), []string{"timeout"}},
		{"negative timeout", validConfig(func(c *Config) { c.Timeout = -time.Second }), []string{"timeout"}},
		{"huge timeout", validConfig(func(c *Config) { c.Timeout = 2 * time.Hour }), []string{"timeout"}},
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
