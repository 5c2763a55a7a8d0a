// Package config reads the function's configuration from the environment
// (docs/design.md §5). A bad value is a startup error that names the variable; a
// secret's value never appears in an error.
package config

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgate/idemgate/handler/notify"
	"github.com/idemgate/idemgate/idempotency/keys"
	"github.com/idemgate/idemgate/idempotency/redisfast"
)

// Config is the whole environment of the function.
type Config struct {
	RedisURL string
	// RedisKeyPrefix starts every key of the fast layer (REDIS_KEY_PREFIX;
	// empty: keys are idem:{K}), for deployments sharing one Redis database.
	RedisKeyPrefix string
	MySQLDSN       string
	StateDir       string
	OSSEndpoint    string
	OSSBucket      string
	OSSRegion      string
	// Fallback credentials; FC request headers win per invocation.
	AccessKeyID     string
	AccessKeySecret string
	SecurityToken   string
	LLMBaseURL      string
	LLMAPIKey       string
	LLMModel        string
	LLMTimeout      time.Duration
	DedupTTL        time.Duration
	Lease           time.Duration
	MaxAttempts     int
	// WaitInFlight: how long a duplicate that meets another delivery's
	// live lease waits for its result (WAIT_IN_FLIGHT_SECONDS; 0: answer
	// "in progress" at once).
	WaitInFlight time.Duration
	// LocalCacheSize terminal answers kept in the instance for
	// LocalCacheTTL (LOCAL_CACHE_SIZE, LOCAL_CACHE_TTL_SECONDS; 0: off).
	LocalCacheSize int
	LocalCacheTTL  time.Duration
	// ListenPort: FC_CUSTOM_LISTEN_PORT, else FC_SERVER_PORT, else 9000.
	ListenPort int
	// NotifyAllowedHosts: where notify.url may point (empty: nowhere).
	NotifyAllowedHosts notify.AllowList
	// NotifySigningSecret keys the HMAC on every notify POST; empty: unsigned.
	NotifySigningSecret string
	// KeyFallback: "fingerprint" keys events without tenant_id, or without
	// both operation and idempotency_key, by their data's fingerprint (one
	// with tenant_id and idempotency_key keeps that key); "" (strict)
	// refuses them.
	KeyFallback string
	// KeyJMESPath and PayloadJMESPath select K and the payload hash from
	// the event data (KEY_JMESPATH, PAYLOAD_JMESPATH; nil: the default
	// derivation of docs/design.md §4).
	KeyJMESPath, PayloadJMESPath *keys.JMESPath
	// Disabled runs every task without idempotency (IDEMPOTENCY_DISABLED;
	// tests only, refused where Env is production).
	Disabled bool
	// Env is IDEMGATE_ENV; "production" refuses IDEMPOTENCY_DISABLED.
	Env string
	// Retention: how long a terminal record stays whole after its last
	// change (RETENTION_DAYS); its tombstone then keeps the dedup window
	// (TombstoneAge). StatsRetention: how long stats
	// minutes stay (STATS_RETENTION_DAYS).
	Retention, StatsRetention time.Duration
	// ObjectExpiry is how long input.json and attempt outputs live
	// (OBJECT_EXPIRE_DAYS: the bucket's lifecycle rule, ObjectExpireDays):
	// a purged key's tombstone outlives them (TombstoneAge).
	ObjectExpiry time.Duration
}

// TombstoneMargin is how much longer than its objects a purged key's
// tombstone stays: OSS applies a lifecycle rule within a day or so of the
// expiry, not at the second (docs/design.md §6).
const TombstoneMargin = 2 * 24 * time.Hour

// TombstoneAge is how long after its last change a purged key's tombstone
// stays: the objects' lifetime plus TombstoneMargin, never less than the
// records' retention.
func (c Config) TombstoneAge() time.Duration {
	return max(c.ObjectExpiry+TombstoneMargin, c.Retention)
}

// Variables lists every variable Load reads, for the deploy-file consistency
// checks and the README.
var Variables = []string{
	"REDIS_URL", "REDIS_KEY_PREFIX", "MYSQL_DSN", "STATE_DIR", "OSS_ENDPOINT", "OSS_BUCKET", "OSS_REGION",
	"ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET", "ALIBABA_CLOUD_SECURITY_TOKEN",
	"LLM_BASE_URL", "LLM_API_KEY", "DASHSCOPE_API_KEY", "LLM_MODEL", "LLM_TIMEOUT_SECONDS",
	"DEDUP_TTL_SECONDS", "LEASE_SECONDS", "MAX_ATTEMPTS", "WAIT_IN_FLIGHT_SECONDS", "LOCAL_CACHE_SIZE",
	"LOCAL_CACHE_TTL_SECONDS", "FC_CUSTOM_LISTEN_PORT", "FC_SERVER_PORT",
	"NOTIFY_ALLOWED_HOSTS", "NOTIFY_SIGNING_SECRET", "KEY_FALLBACK", "KEY_JMESPATH", "PAYLOAD_JMESPATH",
	"IDEMPOTENCY_DISABLED", "IDEMGATE_ENV",
	"RETENTION_DAYS", "STATS_RETENTION_DAYS", "OBJECT_EXPIRE_DAYS",
}

// Defaults.
const (
	DefaultLLMBaseURL = "https://dashscope.aliyuncs.com/compatible-mode/v1"
	DefaultLLMModel   = "qwen-plus"
	OfflineModel      = "offline"
	// MinSigningSecret is the shortest NOTIFY_SIGNING_SECRET accepted: 32
	// characters, e.g. `openssl rand -hex 32` (64), so the HMAC key is not
	// guessable offline from one signed body.
	MinSigningSecret = 32
	// DefaultRetentionDays is RETENTION_DAYS unset: a month, as long as the
	// results bucket keeps inputs and attempt outputs by default.
	DefaultRetentionDays = 30
	// MinRetentionDays is the shortest retention: FC retries an
	// asynchronous invocation while the event is younger than the
	// function's maximum event age (a day in the deploy files, at most 7
	// days: maxAsyncEventAgeInSeconds ≤ 604800), EventBridge for a day, and
	// a record purged while they go on would run its task again. 8 days
	// cover the longest FC allows, with a day's margin, whatever the
	// function's asynchronous configuration. It is 2304 times the longest
	// DEDUP_TTL_SECONDS (300 s): a fast-layer entry outlives the purge of
	// its record by those seconds at most.
	MinRetentionDays = 8
	// DefaultObjectExpireDays is OBJECT_EXPIRE_DAYS unset, as the deploy
	// files' ObjectExpireDays.
	DefaultObjectExpireDays = 30
	// MinObjectExpireDays is the shortest OBJECT_EXPIRE_DAYS, and the
	// MinValue of the deploy files' ObjectExpireDays (deploy/spec.go): a
	// task's input.json must outlive FC's redeliveries of its event (the
	// deploy files' maximum event age is a day, and deploy's checks hold
	// the rule's shortest expiry past it), or the sweeper and the dead
	// letter's replay find it gone. 2 days leave a day's margin; OSS applies
	// the rule within a day or so of the expiry, not at the second.
	MinObjectExpireDays = 2
	// DefaultLocalCacheTTLSeconds is LOCAL_CACHE_TTL_SECONDS unset: how
	// long another instance may answer a key's final state from memory
	// after an operator's replay reset it.
	DefaultLocalCacheTTLSeconds = 60
	// DefaultStatsRetentionDays is STATS_RETENTION_DAYS unset.
	DefaultStatsRetentionDays = 30
	maxDays                   = 3650
)

// MinRetention is MinRetentionDays as a duration.
const MinRetention = MinRetentionDays * 24 * time.Hour

// maxDurationDays keeps a count of days within time.Duration (292 years).
const maxDurationDays = 100_000

// ParseDuration reads a duration given on a command line: a Go duration
// (90s, 36h), or whole days with d, alone or before one (30d, 1d12h), since
// a retention or a look back is counted in days.
func ParseDuration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	sign, rest := "", v
	if r, ok := strings.CutPrefix(v, "-"); ok {
		sign, rest = "-", r
	}
	days, tail, ok := strings.Cut(rest, "d")
	if !ok {
		return time.ParseDuration(v)
	}
	n, err := strconv.Atoi(days)
	if err != nil || n < 0 || n > maxDurationDays || strings.HasPrefix(days, "+") {
		return 0, fmt.Errorf("time: invalid duration %q", v)
	}
	d := time.Duration(n) * 24 * time.Hour
	if tail != "" {
		t, err := time.ParseDuration(tail)
		if err != nil || t < 0 {
			return 0, fmt.Errorf("time: invalid duration %q", v)
		}
		d += t
	}
	if sign == "-" {
		d = -d
	}
	return d, nil
}

// ParseRetention reads a retention given on a command line (ParseDuration),
// at least MinRetention; name is the flag or variable the error names.
func ParseRetention(name, v string) (time.Duration, error) {
	d, err := ParseDuration(v)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%s: want a duration such as 720h or 30d, got %q", name, v)
	case d < MinRetention || d > maxDays*24*time.Hour:
		return 0, fmt.Errorf("%s: want from %dd (FC may redeliver an event for up to 7 days) to %dd, got %q",
			name, MinRetentionDays, maxDays, v)
	}
	return d, nil
}

// Load reads the configuration through getenv (os.Getenv in main).
func Load(getenv func(string) string) (Config, error) {
	r := &reader{getenv: getenv}
	c := Config{
		RedisURL:        r.str("REDIS_URL", ""),
		RedisKeyPrefix:  r.str("REDIS_KEY_PREFIX", ""),
		MySQLDSN:        r.str("MYSQL_DSN", ""),
		StateDir:        r.str("STATE_DIR", "./.idemgate"),
		OSSEndpoint:     r.str("OSS_ENDPOINT", ""),
		OSSBucket:       r.str("OSS_BUCKET", ""),
		OSSRegion:       r.str("OSS_REGION", ""),
		AccessKeyID:     r.str("ALIBABA_CLOUD_ACCESS_KEY_ID", ""),
		AccessKeySecret: r.str("ALIBABA_CLOUD_ACCESS_KEY_SECRET", ""),
		SecurityToken:   r.str("ALIBABA_CLOUD_SECURITY_TOKEN", ""),
		LLMBaseURL:      strings.TrimRight(r.str("LLM_BASE_URL", DefaultLLMBaseURL), "/"),
		LLMAPIKey:       r.str("LLM_API_KEY", r.str("DASHSCOPE_API_KEY", "")),
		LLMModel:        r.str("LLM_MODEL", ""),

		NotifySigningSecret: r.str("NOTIFY_SIGNING_SECRET", ""),
		KeyFallback:         r.str("KEY_FALLBACK", ""),
		Env:                 r.str("IDEMGATE_ENV", ""),
	}
	r.numbers(&c)
	r.guards(&c)
	r.model(&c)
	r.endpoints(&c)
	return c, errors.Join(r.errs...)
}

// reader reads variables and collects what is wrong with them.
type reader struct {
	getenv func(string) string
	errs   []error
}

func (r *reader) bad(name, why string) { r.errs = append(r.errs, fmt.Errorf("%s: %s", name, why)) }

func (r *reader) str(name, def string) string {
	if v := strings.TrimSpace(r.getenv(name)); v != "" {
		return v
	}
	return def
}

func (r *reader) num(name string, def, lo, hi int) int {
	v := strings.TrimSpace(r.getenv(name))
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		r.bad(name, fmt.Sprintf("want a whole number from %d to %d, got %q", lo, hi, v))
		return def
	}
	return n
}

func (r *reader) numbers(c *Config) {
	c.LLMTimeout = time.Duration(r.num("LLM_TIMEOUT_SECONDS", 60, 1, 3600)) * time.Second
	c.DedupTTL = time.Duration(r.num("DEDUP_TTL_SECONDS", 300, 1, 300)) * time.Second
	c.Lease = time.Duration(r.num("LEASE_SECONDS", 60, 1, 86400)) * time.Second
	c.MaxAttempts = r.num("MAX_ATTEMPTS", 3, 1, 100)
	// A wait never outlasts the invocation's deadline (FC's longest
	// timeout is 86400 s); a cached answer never outlives the fast layer's
	// own bound (idempotency.WithLocalCache).
	c.WaitInFlight = time.Duration(r.num("WAIT_IN_FLIGHT_SECONDS", 0, 0, 86400)) * time.Second
	c.LocalCacheSize = r.num("LOCAL_CACHE_SIZE", 0, 0, 1_000_000)
	c.LocalCacheTTL = time.Duration(r.num("LOCAL_CACHE_TTL_SECONDS", DefaultLocalCacheTTLSeconds, 1, 300)) * time.Second
	c.Retention = time.Duration(r.num("RETENTION_DAYS", DefaultRetentionDays, MinRetentionDays, maxDays)) * 24 * time.Hour
	c.StatsRetention = time.Duration(r.num("STATS_RETENTION_DAYS", DefaultStatsRetentionDays, 1, maxDays)) * 24 * time.Hour
	c.ObjectExpiry = time.Duration(r.num("OBJECT_EXPIRE_DAYS", DefaultObjectExpireDays, MinObjectExpireDays, maxDays)) * 24 * time.Hour
	c.ListenPort = r.num("FC_CUSTOM_LISTEN_PORT", 0, 1, 65535)
	if c.ListenPort == 0 {
		c.ListenPort = r.num("FC_SERVER_PORT", 9000, 1, 65535)
	}
}

// guards reads the key fallback and the kill switch.
func (r *reader) guards(c *Config) {
	switch c.KeyFallback {
	case "", "strict":
		c.KeyFallback = ""
	case "fingerprint":
	default:
		r.bad("KEY_FALLBACK", fmt.Sprintf("want strict or fingerprint, got %q", c.KeyFallback))
	}
	c.KeyJMESPath = r.jmespath("KEY_JMESPATH")
	c.PayloadJMESPath = r.jmespath("PAYLOAD_JMESPATH")
	switch v := r.str("IDEMPOTENCY_DISABLED", "false"); v {
	case "true":
		c.Disabled = true
		if c.Env == "production" {
			r.bad("IDEMPOTENCY_DISABLED", "refused where IDEMGATE_ENV=production: it turns off every guarantee (tests only)")
		}
	case "false":
	default:
		r.bad("IDEMPOTENCY_DISABLED", fmt.Sprintf("want true or false, got %q", v))
	}
}

// jmespath compiles the expression in variable name ("" unset: nil).
func (r *reader) jmespath(name string) *keys.JMESPath {
	v := r.str(name, "")
	if v == "" {
		return nil
	}
	j, err := keys.CompileJMESPath(v)
	if err != nil {
		r.bad(name, err.Error())
	}
	return j
}

// model: no key and no model chosen is a local run on the built-in offline
// model.
func (r *reader) model(c *Config) {
	switch {
	case c.LLMModel == "" && c.LLMAPIKey == "":
		c.LLMModel = OfflineModel
	case c.LLMModel == "":
		c.LLMModel = DefaultLLMModel
	case c.LLMModel != OfflineModel && c.LLMAPIKey == "":
		r.bad("LLM_API_KEY", "required for LLM_MODEL="+c.LLMModel+" (or set DASHSCOPE_API_KEY, or LLM_MODEL=offline)")
	}
	if u, err := url.Parse(c.LLMBaseURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		r.bad("LLM_BASE_URL", "want an http(s) URL")
	}
}

func (r *reader) endpoints(c *Config) {
	if c.MySQLDSN != "" {
		if why := dsnProblem(c.MySQLDSN); why != "" {
			r.bad("MYSQL_DSN", why)
		}
	}
	if c.RedisURL != "" {
		if u, err := url.Parse(c.RedisURL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
			r.bad("REDIS_URL", "want redis://… or rediss://…")
		}
	}
	if !redisfast.ValidKeyPrefix(c.RedisKeyPrefix) { // the layer's own rule, checked before anything starts
		r.bad("REDIS_KEY_PREFIX", fmt.Sprintf("want at most %d of A-Z a-z 0-9 : . _ -, got %q", redisfast.MaxKeyPrefix, c.RedisKeyPrefix))
	}
	var err error
	if c.NotifyAllowedHosts, err = notify.ParseAllowList(r.getenv("NOTIFY_ALLOWED_HOSTS")); err != nil {
		r.bad("NOTIFY_ALLOWED_HOSTS", err.Error())
	}
	if n := len(c.NotifySigningSecret); n > 0 && n < MinSigningSecret { // the value is never echoed
		r.bad("NOTIFY_SIGNING_SECRET", fmt.Sprintf("want at least %d characters (e.g. openssl rand -hex 32), got %d", MinSigningSecret, n))
	}
	oss := []string{c.OSSEndpoint, c.OSSBucket, c.OSSRegion}
	if set := countSet(oss); set != 0 && set != len(oss) {
		r.bad("OSS_ENDPOINT/OSS_BUCKET/OSS_REGION", "set all three (OSS with V4 signing) or none (results under STATE_DIR)")
	}
}

// dsnProblem says what is wrong with a MySQL DSN, before anything connects:
// one the driver does not parse, or one naming no database (the store would
// answer schema_missing for database ""). The driver's reason is kept unless
// it quotes the password.
func dsnProblem(dsn string) string {
	const want = "want user:password@tcp(host:3306)/database[?param=value]"
	c, err := mysql.ParseDSN(dsn)
	switch {
	case err != nil && quotesPassword(dsn, err.Error()):
		return "not a go-sql-driver DSN (" + want + ")"
	case err != nil:
		return fmt.Sprintf("not a go-sql-driver DSN (%s): %s", want, err)
	case c.DBName == "":
		return "names no database (" + want + ")"
	}
	return ""
}

// quotesPassword reports whether msg holds what stands between the first
// ':' and the last '@' of dsn: its password, when it has one.
func quotesPassword(dsn, msg string) bool {
	at := strings.LastIndex(dsn, "@")
	colon := strings.Index(dsn, ":")
	return at > 0 && colon >= 0 && colon < at && strings.Contains(msg, dsn[colon+1:at])
}

// Error is a variable found unusable once a client uses it (a STATE_DIR
// that cannot be made): a configuration error like Load's.
type Error struct {
	Name string
	Err  error
}

func (e *Error) Error() string { return e.Name + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func countSet(vs []string) int {
	n := 0
	for _, v := range vs {
		if v != "" {
			n++
		}
	}
	return n
}

// UseOSS reports whether results go to OSS rather than STATE_DIR.
func (c Config) UseOSS() bool { return c.OSSBucket != "" }
