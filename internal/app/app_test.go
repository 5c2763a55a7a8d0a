package app

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/config"
	"github.com/idemgate/idemgate/internal/logx"
)

// Every secret the configuration holds reaches the redactor, so no log line
// can show it, the notify signing key included.
func TestSecretsAreRedacted(t *testing.T) {
	secrets := map[string]string{
		"LLM_API_KEY":                     "sk-SECRET-llm-0001",
		"ALIBABA_CLOUD_ACCESS_KEY_SECRET": "ak-SECRET-env-0002",
		"ALIBABA_CLOUD_SECURITY_TOKEN":    "tok-SECRET-sts-0003",
		"NOTIFY_SIGNING_SECRET":           "notify-SECRET-0123456789abcdef-0004",
	}
	env := map[string]string{"MYSQL_DSN": "u:dsn-SECRET-pw-0005@tcp(127.0.0.1:3306)/db",
		"REDIS_URL": "redis://:redis-SECRET-pw-0006@127.0.0.1:6379/0"}
	for k, v := range secrets {
		env[k] = v
	}
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	red := &logx.Redactor{}
	red.Add(Secrets(cfg)...)
	var buf bytes.Buffer
	log := logx.New(&buf, slog.LevelInfo, red)
	all := []string{"dsn-SECRET-pw-0005", "redis-SECRET-pw-0006"}
	for _, v := range secrets {
		all = append(all, v)
	}
	for _, v := range all {
		log.Info("message "+v, "error", "wrapped: "+v)
	}
	out := buf.String()
	for _, v := range all {
		if strings.Contains(out, v) {
			t.Errorf("log shows %s", v)
		}
	}
	if n := strings.Count(out, "[REDACTED]"); n != 2*len(all) {
		t.Errorf("%d redactions, want %d:\n%s", n, 2*len(all), out)
	}
}
