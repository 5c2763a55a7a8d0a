package llm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/idemgate/idemgate/idempotency"
)

// OfflineModel selects the built-in deterministic model.
const OfflineModel = "offline"

// The environment variables internal/config reads a Config from; the
// errors name them, as that is what a user has to fix.
const (
	EnvBaseURL   = "LLM_BASE_URL"
	EnvAPIKey    = "LLM_API_KEY"
	EnvAPIKeyAlt = "DASHSCOPE_API_KEY"
	EnvModel     = "LLM_MODEL"
)

// CodeInvalidConfig is the error code of a bad [Config] (a startup error).
const CodeInvalidConfig = "invalid_config"

// maxTimeout bounds Timeout: a value such as 6000 s should not park a
// worker for hours (internal/config allows at most 3600 s too).
const maxTimeout = time.Hour

// Config configures [New]; internal/config fills it from the environment,
// with its defaults. Every field but HTTPClient is required, except that
// the offline model needs none.
type Config struct {
	BaseURL string
	APIKey  string
	Model   string // "offline" selects [Offline]
	// Timeout bounds one Complete call, body included: in (0, 1 h].
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

// check trims the fields and checks them.
func (c Config) check() (Config, *url.URL, error) {
	c.BaseURL = strings.TrimSpace(c.BaseURL)
	c.Model = strings.TrimSpace(c.Model)
	c.APIKey = strings.TrimSpace(c.APIKey)
	switch {
	case c.Model == "":
		return c, nil, configErr("%s is required (a model name, or %s)", EnvModel, OfflineModel)
	case c.Timeout <= 0 || c.Timeout > maxTimeout:
		return c, nil, configErr("LLM timeout must be in (0, %s], got %s", maxTimeout, c.Timeout)
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
