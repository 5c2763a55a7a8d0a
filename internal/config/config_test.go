package config

import (
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoad(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		check   func(t *testing.T, c Config)
		wantErr string // substring naming the variable
	}{
		{name: "embedded defaults", env: nil, check: func(t *testing.T, c Config) {
			if c.StateDir != "./.idemgate" || c.LLMModel != OfflineModel || c.DedupTTL != 300*time.Second ||
				c.Lease != 60*time.Second || c.MaxAttempts != 3 || c.ListenPort != 9000 || c.LLMTimeout != time.Minute {
				t.Fatalf("defaults: %+v", c)
			}
		}},
		{name: "key selects the default model", env: map[string]string{"DASHSCOPE_API_KEY": "sk-x"}, check: func(t *testing.T, c Config) {
			if c.LLMModel != DefaultLLMModel || c.LLMAPIKey != "sk-x" {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "custom listen port wins", env: map[string]string{"FC_CUSTOM_LISTEN_PORT": "9100", "FC_SERVER_PORT": "9200"},
			check: func(t *testing.T, c Config) {
				if c.ListenPort != 9100 {
					t.Fatal(c.ListenPort)
				}
			}},
		{name: "server port fallback", env: map[string]string{"FC_SERVER_PORT": "9200"}, check: func(t *testing.T, c Config) {
			if c.ListenPort != 9200 {
				t.Fatal(c.ListenPort)
			}
		}},
		{name: "a DSN that does not parse", env: map[string]string{"MYSQL_DSN": "this is not a dsn"},
			wantErr: "MYSQL_DSN: not a go-sql-driver DSN (want user:password@tcp(host:3306)/database[?param=value]): invalid DSN"},
		{name: "a DSN without a database", env: map[string]string{"MYSQL_DSN": "root@tcp(127.0.0.1:3306)/"},
			wantErr: "MYSQL_DSN: names no database"},
		{name: "a DSN with a bad parameter", env: map[string]string{"MYSQL_DSN": "root@tcp(127.0.0.1:3306)/db?tls=bogus"},
			wantErr: "MYSQL_DSN: not a go-sql-driver DSN (want user:password@tcp(host:3306)/database[?param=value]): invalid value / unknown config name: bogus"},
		{name: "ttl above 300", env: map[string]string{"DEDUP_TTL_SECONDS": "301"}, wantErr: "DEDUP_TTL_SECONDS"},
		{name: "kill switch in a test", env: map[string]string{"IDEMPOTENCY_DISABLED": "true"}, check: func(t *testing.T, c Config) {
			if !c.Disabled {
				t.Fatal("not disabled")
			}
		}},
		{name: "kill switch refused in production", env: map[string]string{"IDEMPOTENCY_DISABLED": "true", "IDEMGATE_ENV": "production"},
			wantErr: "IDEMPOTENCY_DISABLED: refused where IDEMGATE_ENV=production"},
		{name: "kill switch not a boolean", env: map[string]string{"IDEMPOTENCY_DISABLED": "yes"}, wantErr: "IDEMPOTENCY_DISABLED"},
		{name: "fingerprint fallback", env: map[string]string{"KEY_FALLBACK": "fingerprint"}, check: func(t *testing.T, c Config) {
			if c.KeyFallback != "fingerprint" {
				t.Fatal(c.KeyFallback)
			}
		}},
		{name: "strict is the default", env: map[string]string{"KEY_FALLBACK": "strict"}, check: func(t *testing.T, c Config) {
			if c.KeyFallback != "" {
				t.Fatal(c.KeyFallback)
			}
		}},
		{name: "unknown fallback", env: map[string]string{"KEY_FALLBACK": "jmespath"}, wantErr: "KEY_FALLBACK"},
		{name: "lease not a number", env: map[string]string{"LEASE_SECONDS": "1m"}, wantErr: "LEASE_SECONDS"},
		{name: "zero attempts", env: map[string]string{"MAX_ATTEMPTS": "0"}, wantErr: "MAX_ATTEMPTS"},
		{name: "model without key", env: map[string]string{"LLM_MODEL": "qwen-max"}, wantErr: "LLM_API_KEY"},
		{name: "bad redis url", env: map[string]string{"REDIS_URL": "tcp://x"}, wantErr: "REDIS_URL"},
		// A brace would move the hash tag {K}; a pattern character would make
		// SCAN MATCH <prefix>* find other deployments' keys.
		{name: "redis key prefix with a brace", env: map[string]string{"REDIS_KEY_PREFIX": "a{b}:"}, wantErr: "REDIS_KEY_PREFIX"},
		{name: "redis key prefix with a pattern", env: map[string]string{"REDIS_KEY_PREFIX": "app*"}, wantErr: "REDIS_KEY_PREFIX"},
		{name: "redis key prefix too long", env: map[string]string{"REDIS_KEY_PREFIX": strings.Repeat("p", 65)}, wantErr: "REDIS_KEY_PREFIX"},
		{name: "half OSS", env: map[string]string{"OSS_BUCKET": "b"}, wantErr: "OSS_ENDPOINT"},
		{name: "bad port", env: map[string]string{"FC_SERVER_PORT": "70000"}, wantErr: "FC_SERVER_PORT"},
		{name: "bad llm timeout", env: map[string]string{"LLM_TIMEOUT_SECONDS": "-1"}, wantErr: "LLM_TIMEOUT_SECONDS"},
		{name: "notify refused everywhere by default", env: nil, check: func(t *testing.T, c Config) {
			if !c.NotifyAllowedHosts.Empty() || c.NotifySigningSecret != "" {
				t.Fatalf("notify defaults: %v %d", c.NotifyAllowedHosts, len(c.NotifySigningSecret))
			}
		}},
		{name: "notify settings", env: map[string]string{
			"NOTIFY_ALLOWED_HOSTS":  " hooks.example.com, http://hooks.internal:8080;private ",
			"NOTIFY_SIGNING_SECRET": strings.Repeat("s", MinSigningSecret)},
			check: func(t *testing.T, c Config) {
				if got := c.NotifyAllowedHosts.String(); got != "https://hooks.example.com:443,http://hooks.internal:8080;private" {
					t.Fatalf("allow list %q", got)
				}
				if c.NotifySigningSecret != strings.Repeat("s", MinSigningSecret) {
					t.Fatal("signing secret not read")
				}
			}},
		{name: "bad allow-list entry", env: map[string]string{"NOTIFY_ALLOWED_HOSTS": "hooks.example.com/path"}, wantErr: "NOTIFY_ALLOWED_HOSTS: entry 1"},
		{name: "short signing secret", env: map[string]string{"NOTIFY_SIGNING_SECRET": "short-secret"}, wantErr: "NOTIFY_SIGNING_SECRET"},
		{name: "retention defaults", env: nil, check: func(t *testing.T, c Config) {
			if c.Retention != 30*24*time.Hour || c.StatsRetention != 30*24*time.Hour {
				t.Fatalf("retention %s, stats %s", c.Retention, c.StatsRetention)
			}
		}},
		{name: "retention set", env: map[string]string{"RETENTION_DAYS": "8", "STATS_RETENTION_DAYS": "1"},
			check: func(t *testing.T, c Config) {
				if c.Retention != 8*24*time.Hour || c.StatsRetention != 24*time.Hour {
					t.Fatalf("retention %s, stats %s", c.Retention, c.StatsRetention)
				}
			}},
		{name: "retention under the floor", env: map[string]string{"RETENTION_DAYS": "7"}, wantErr: "RETENTION_DAYS: want a whole number from 8"},
		{name: "retention in hours", env: map[string]string{"RETENTION_DAYS": "720h"}, wantErr: "RETENTION_DAYS"},
		{name: "objects expiring within FC's redeliveries", env: map[string]string{"OBJECT_EXPIRE_DAYS": "1"},
			wantErr: "OBJECT_EXPIRE_DAYS: want a whole number from 2 to 3650, got \"1\""},
		{name: "objects expiring after two days", env: map[string]string{"OBJECT_EXPIRE_DAYS": "2"},
			check: func(t *testing.T, c Config) {
				if c.ObjectExpiry != 48*time.Hour {
					t.Fatalf("object expiry %s", c.ObjectExpiry)
				}
			}},
		{name: "stats retention zero", env: map[string]string{"STATS_RETENTION_DAYS": "0"}, wantErr: "STATS_RETENTION_DAYS"},
		{name: "default keys", env: nil, check: func(t *testing.T, c Config) {
			if c.KeyJMESPath != nil || c.PayloadJMESPath != nil {
				t.Fatalf("key %v, payload %v", c.KeyJMESPath, c.PayloadJMESPath)
			}
		}},
		{name: "key expressions", env: map[string]string{"KEY_JMESPATH": "[tenant_id, input.order_id]", "PAYLOAD_JMESPATH": " input.order_id "},
			check: func(t *testing.T, c Config) {
				if c.KeyJMESPath.String() != "[tenant_id, input.order_id]" || c.PayloadJMESPath.String() != "input.order_id" {
					t.Fatalf("key %v, payload %v", c.KeyJMESPath, c.PayloadJMESPath)
				}
			}},
		{name: "bad key expression", env: map[string]string{"KEY_JMESPATH": "input.["}, wantErr: "KEY_JMESPATH: keys: not a JMESPath expression"},
		{name: "unknown function in the payload expression", env: map[string]string{"PAYLOAD_JMESPATH": "md5(input)"},
			wantErr: "PAYLOAD_JMESPATH: keys: not a JMESPath expression"},
		{name: "wait and cache off by default", env: nil, check: func(t *testing.T, c Config) {
			if c.WaitInFlight != 0 || c.LocalCacheSize != 0 || c.LocalCacheTTL != DefaultLocalCacheTTLSeconds*time.Second {
				t.Fatalf("wait %s, cache %d for %s", c.WaitInFlight, c.LocalCacheSize, c.LocalCacheTTL)
			}
		}},
		{name: "wait and cache set", env: map[string]string{"WAIT_IN_FLIGHT_SECONDS": "20", "LOCAL_CACHE_SIZE": "1000", "LOCAL_CACHE_TTL_SECONDS": "300"},
			check: func(t *testing.T, c Config) {
				if c.WaitInFlight != 20*time.Second || c.LocalCacheSize != 1000 || c.LocalCacheTTL != 300*time.Second {
					t.Fatalf("wait %s, cache %d for %s", c.WaitInFlight, c.LocalCacheSize, c.LocalCacheTTL)
				}
			}},
		{name: "negative wait", env: map[string]string{"WAIT_IN_FLIGHT_SECONDS": "-1"}, wantErr: "WAIT_IN_FLIGHT_SECONDS"},
		{name: "cache size not a number", env: map[string]string{"LOCAL_CACHE_SIZE": "1k"}, wantErr: "LOCAL_CACHE_SIZE"},
		{name: "cache ttl past the fast layer's bound", env: map[string]string{"LOCAL_CACHE_TTL_SECONDS": "301"}, wantErr: "LOCAL_CACHE_TTL_SECONDS"},
		{name: "cache ttl zero", env: map[string]string{"LOCAL_CACHE_TTL_SECONDS": "0"}, wantErr: "LOCAL_CACHE_TTL_SECONDS"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(env(tc.env))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestLoadNeverEchoesSecrets(t *testing.T) {
	_, err := Load(env(map[string]string{"REDIS_URL": "tcp://user:hunter2@x", "LLM_MODEL": "m", "MAX_ATTEMPTS": "x",
		"NOTIFY_SIGNING_SECRET": "hunter3-too-short"}))
	if err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "hunter3") ||
		!strings.Contains(err.Error(), "NOTIFY_SIGNING_SECRET") {
		t.Fatalf("err = %v", err)
	}
}

func TestParseRetention(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     time.Duration
		wantErr  string
	}{
		{"hours", "720h", 30 * 24 * time.Hour, ""},
		{"days", "30d", 30 * 24 * time.Hour, ""},
		{"the floor", "8d", MinRetention, ""},
		{"mixed duration", "192h30m", 192*time.Hour + 30*time.Minute, ""},
		{"under the floor", "191h", 0, "--older-than: want from 8d"},
		{"seven days", "7d", 0, "--older-than: want from 8d (FC may redeliver an event for up to 7 days)"},
		{"negative days", "-30d", 0, "--older-than: want from 8d"},
		{"past the ceiling", "3651d", 0, "to 3650d"},
		{"not a duration", "a month", 0, `--older-than: want a duration such as 720h or 30d, got "a month"`},
		{"fractional days", "1.5d", 0, "want a duration"},
		{"empty", "", 0, "want a duration"},
		{"days and hours", "8d12h", MinRetention + 12*time.Hour, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseRetention("--older-than", c.in)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("ParseRetention(%q) = %s, %v; want an error with %q", c.in, got, err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("ParseRetention(%q) = %s, %v; want %s", c.in, got, err, c.want)
			}
		})
	}
}

func TestParseDuration(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     time.Duration
		ok       bool
	}{
		{"go duration", "90s", 90 * time.Second, true},
		{"a day", "1d", 24 * time.Hour, true},
		{"days and a go duration", "1d12h30m", 36*time.Hour + 30*time.Minute, true},
		{"zero days", "0d", 0, true},
		{"negative days", "-2d", -48 * time.Hour, true},
		{"spaces around", " 7d ", 7 * 24 * time.Hour, true},
		{"fractional days", "1.5d", 0, false},
		{"a day unit without a number", "d", 0, false},
		{"a plus sign", "+1d", 0, false},
		{"a negative tail", "1d-1h", 0, false},
		{"garbage after the days", "1dx", 0, false},
		{"two day units", "1d1d", 0, false},
		{"no unit", "5", 0, false},
		{"past what a Duration holds", "100001d", 0, false},
		{"empty", "", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseDuration(c.in)
			if (err == nil) != c.ok || got != c.want {
				t.Fatalf("ParseDuration(%q) = %s, %v; want %s, ok %v", c.in, got, err, c.want, c.ok)
			}
		})
	}
}

// The driver's reason for refusing a DSN is dropped when it would quote the
// password (here the password is also the bad tls value).
func TestDSNErrorNeverQuotesThePassword(t *testing.T) {
	_, err := Load(env(map[string]string{"MYSQL_DSN": "root:s3cr3t-pw@tcp(127.0.0.1:3306)/db?tls=s3cr3t-pw"}))
	if err == nil || !strings.Contains(err.Error(), "MYSQL_DSN: not a go-sql-driver DSN") || strings.Contains(err.Error(), "s3cr3t-pw") {
		t.Fatalf("err = %v", err)
	}
}
