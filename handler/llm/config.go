package llm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/idempotency"
)

// Defaults (DESIGN §4.4).
const (
	DefaultBaseURL = "https://dashscope.aliyuncs.com/compatible-mode/v1"
	DefaultModel   = "qwen-plus"
	DefaultTimeout = 60 * time.Second
	// OfflineModel selects the built-in deterministic model.
	OfflineModel = "offline"
)

// Environment variables read by [ConfigFromEnv].
const (
	EnvBaseURL   = "LLM_BASE_URL"
	EnvAPIKey    = "LLM_API_KEY"
	EnvAPIKeyAlt = "DASHSCOPE_API_KEY"
	EnvModel     = "LLM_MODEL"
	EnvTimeout   = "LLM_TIMEOUT_SECONDS"
)

// CodeInvalidConfig is the error code of a bad [Config] (a startup error).
const CodeInvalidConfig = "invalid_config"

// maxTimeout bounds LLM_TIMEOUT_SECONDS: FC invocations last at most 24 h, and
// a typo such as 6000 should not park a worker for hours.
const maxTimeout = time.Hour

// Config configures [New]. Zero fields take the defaults.
type Config struct {
	BaseURL string // default DefaultBaseURL
	APIKey  string // required unless Model is "offline"
	Model   string // default DefaultModel; "offline" selects [Offline]
	// Timeout bounds one Complete call, body included (default 60 s).
	Timeout time.Duration
	// HTTPClient is used as a template (default: a fresh client). Redirects are
	// never followed: an API that redirects a POST is misconfigured.
	HTTPClient *http.Client
}

// String omits the API key so that a logged Config cannot leak it.
func (c Config) String() string {
	key := "unset"
	if c.APIKey != "" {
		key = "[redacted]"
	}
	return fmt.Sprintf("llm.Config{BaseURL:%q Model:%q Timeout:%s APIKey:%s}", c.BaseURL, c.Model, c.Timeout, key)
}

// GoString keeps %#v as safe as %v.
func (c Config) GoString() string { return c.String() }

// Request is one completion.
type Request struct {
	// Key is the business key, sent as Idempotency-Key (required).
	Key string
	// RequestID is sent as X-Request-Id (optional).
	RequestID string
	// System is the optional system message; Prompt the user message (required).
	System, Prompt string
	// MaxTokens caps the answer (0: the provider's default).
	MaxTokens int
}

// Response is the model's answer.
type Response struct {
	Text  string
	Model string // the model that answered ("offline" for the stand-in)
	ID    string // the provider's completion id
	// Token usage as reported by the provider (estimated by the stand-in).
	PromptTokens, CompletionTokens int
	// FinishReason is the provider's finish_reason ("stop", "length", ...).
	FinishReason string
	// Offline is true when the built-in stand-in answered, not a real LLM.
	Offline bool
}

// Completer is what [New] returns: [*HTTPClient] or [*Offline].
type Completer interface {
	Complete(ctx context.Context, r Request) (Response, error)
}

var (
	_ Completer = (*HTTPClient)(nil)
	_ Completer = (*Offline)(nil)
)

// New returns the [Offline] model when cfg.Model is "offline", else an
// [HTTPClient]. A missing API key for a real model is a FINAL invalid_config
// error that names LLM_API_KEY and DASHSCOPE_API_KEY.
func New(cfg Config) (Completer, error) {
	if strings.EqualFold(strings.TrimSpace(cfg.Model), OfflineModel) {
		return NewOffline(), nil
	}
	return NewHTTPClient(cfg)
}

// ConfigFromEnv reads LLM_BASE_URL, LLM_API_KEY (else DASHSCOPE_API_KEY),
// LLM_MODEL and LLM_TIMEOUT_SECONDS through lookup (os.LookupEnv in main).
// A bad value is an error that names the variable; [New] checks the rest.
func ConfigFromEnv(lookup func(string) (string, bool)) (Config, error) {
	get := func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	cfg := Config{BaseURL: get(EnvBaseURL), APIKey: get(EnvAPIKey), Model: get(EnvModel)}
	if cfg.APIKey == "" {
		cfg.APIKey = get(EnvAPIKeyAlt)
	}
	if s := get(EnvTimeout); s != "" {
		secs, err := strconv.ParseFloat(s, 64)
		if err != nil || secs <= 0 || secs > maxTimeout.Seconds() {
			return Config{}, configErr("%s must be a number of seconds in (0, %d], got %q", EnvTimeout, int(maxTimeout.Seconds()), s)
		}
		cfg.Timeout = time.Duration(secs * float64(time.Second))
	}
	return cfg, nil
}

// withDefaults fills zero fields and checks the rest.
func (c Config) withDefaults() (Config, *url.URL, error) {
	c.BaseURL = strings.TrimSpace(c.BaseURL)
	c.Model = strings.TrimSpace(c.Model)
	c.APIKey = strings.TrimSpace(c.APIKey)
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	if c.Model == "" {
		c.Model = DefaultModel
	}
	switch {
	case c.Timeout < 0 || c.Timeout > maxTimeout:
		return c, nil, configErr("LLM timeout must be in (0, %s], got %s", maxTimeout, c.Timeout)
	case c.Timeout == 0:
		c.Timeout = DefaultTimeout
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		// The URL is config, not a secret, but its userinfo could be.
		return c, nil, configErr("%s must be an http(s) URL with a host", EnvBaseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return c, nil, configErr("%s must not have a query or fragment", EnvBaseURL)
	}
	if c.APIKey == "" {
		return c, nil, configErr("%s (or %s) is required for model %q; set %s=%s for the built-in offline model",
			EnvAPIKey, EnvAPIKeyAlt, c.Model, EnvModel, OfflineModel)
	}
	if !validHeaderValue(c.APIKey) {
		// Never echo the key, not even a bad one.
		return c, nil, configErr("%s contains characters not allowed in an HTTP header", EnvAPIKey)
	}
	return c, u, nil
}

func configErr(format string, a ...any) error {
	return idempotency.Final(CodeInvalidConfig, fmt.Errorf("llm: "+format, a...))
}

// validHeaderValue rejects control characters, which net/http would refuse
// at send time (a key read from a file often ends in a newline).
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b == 0x7f {
			return false
		}
	}
	return true
}

// validate checks what every model needs from a request.
func (r Request) validate() error {
	switch {
	case strings.TrimSpace(r.Prompt) == "":
		return idempotency.Final(CodeInvalidRequest, errors.New("llm: empty prompt"))
	case r.MaxTokens < 0:
		return idempotency.Final(CodeInvalidRequest, fmt.Errorf("llm: negative max_tokens %d", r.MaxTokens))
	}
	return nil
}
