package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/internal/trace"
	"github.com/idemgate/idemgate/internal/transport"
)

// Read limits. A chat completion is a few KiB; anything near these sizes is
// not an answer we want to hold in memory.
const (
	maxResponseBody = 4 << 20
	maxErrorBody    = 64 << 10
)

// HTTPClient calls an OpenAI-compatible chat-completions endpoint. Build it
// with [NewHTTPClient] or [New]; it is safe for concurrent use.
type HTTPClient struct {
	endpoint string
	apiKey   string
	model    string
	timeout  time.Duration
	hc       *http.Client
}

// NewHTTPClient checks cfg (see [Config]) and returns a client. Errors are
// FINAL invalid_config.
func NewHTTPClient(cfg Config) (*HTTPClient, error) {
	cfg, u, err := cfg.check()
	if err != nil {
		return nil, err
	}
	var hc http.Client
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient // a copy, so the caller's client keeps its redirect policy
	}
	if hc.Transport == nil {
		hc.Transport = transport.NewTransport() // sized for concurrent invocations
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	u.Path = strings.TrimRight(u.Path, "/") + "/chat/completions"
	return &HTTPClient{endpoint: u.String(), apiKey: cfg.APIKey, model: cfg.Model, timeout: cfg.Timeout, hc: &hc}, nil
}

// String omits the API key so that logging the client cannot leak it. The
// value receiver covers a dereferenced copy too.
func (c HTTPClient) String() string {
	return fmt.Sprintf("llm.HTTPClient{endpoint:%q model:%q timeout:%s apiKey:[redacted]}", c.endpoint, c.model, c.timeout)
}

// GoString keeps %#v as safe as %v.
func (c HTTPClient) GoString() string { return c.String() }

// Model is the configured model name.
func (c *HTTPClient) Model() string { return c.model }

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model     string        `json:"model"`
	Messages  []chatMessage `json:"messages"`
	MaxTokens int           `json:"max_tokens,omitempty"`
}

type chatResponse struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content json.RawMessage `json:"content"`
			Refusal string          `json:"refusal"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// Complete sends one chat completion. It makes exactly one HTTP request:
// retrying is the caller's retry policy's job. Every error is an
// [*idempotency.Error]; API failures wrap an [*APIError].
func (c *HTTPClient) Complete(ctx context.Context, r Request) (Response, error) {
	if err := r.validate(); err != nil {
		return Response{}, err
	}
	if r.Key == "" || !validHeaderValue(r.Key) || !validHeaderValue(r.RequestID) {
		return Response{}, idempotency.Final(CodeInvalidRequest,
			errors.New("llm: Key (the Idempotency-Key) must be non-empty and Key and RequestID free of control characters"))
	}
	msgs := make([]chatMessage, 0, 2)
	if r.System != "" {
		msgs = append(msgs, chatMessage{Role: "system", Content: r.System})
	}
	msgs = append(msgs, chatMessage{Role: "user", Content: r.Prompt})
	body, err := json.Marshal(chatRequest{Model: c.model, Messages: msgs, MaxTokens: r.MaxTokens})
	if err != nil {
		return Response{}, idempotency.Final(CodeInvalidRequest, fmt.Errorf("llm: encode request: %w", err))
	}

	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return Response{}, idempotency.Final(CodeInvalidRequest, fmt.Errorf("llm: build request: %w", err))
	}
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Idempotency-Key", r.Key)
	if r.RequestID != "" {
		req.Header.Set("X-Request-Id", r.RequestID)
	}
	if tc, ok := trace.FromContext(ctx); ok { // the invocation's trace (handler.TraceInvocation)
		req.Header.Set(trace.Header, tc.String())
	}

	res, err := c.hc.Do(req)
	if err != nil {
		return Response{}, classifyTransport("POST chat/completions", err, ctx.Err())
	}
	defer res.Body.Close()

	if res.StatusCode < 200 || res.StatusCode > 299 {
		// A failed read leaves the status, which alone still classifies.
		data, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxErrorBody)) // lets the connection be reused
		e, _ := parseAPIError(res.StatusCode, data, c.apiKey)
		if res.StatusCode < 400 && e.Message == "" {
			e.Message = "redirect not followed; check " + EnvBaseURL
		}
		return Response{}, classifyAPIError(e)
	}

	data, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBody+1))
	if err != nil {
		return Response{}, classifyTransport("read chat/completions answer", err, ctx.Err())
	}
	if len(data) > maxResponseBody {
		return Response{}, badResponse("answer larger than %d bytes", maxResponseBody)
	}
	return c.decode(res.StatusCode, data)
}

// decode turns a 2xx body into a Response or a classified error.
func (c *HTTPClient) decode(status int, data []byte) (Response, error) {
	var cr chatResponse
	if err := json.Unmarshal(data, &cr); err != nil {
		return Response{}, badResponse("HTTP %d: malformed JSON answer: %s", status, clean(err.Error(), c.apiKey))
	}
	if len(cr.Choices) == 0 {
		// Only an answer without choices is read again as an error: on the
		// hot path the body is parsed once.
		if e, ok := parseAPIError(status, data, c.apiKey); ok {
			return Response{}, classifyAPIError(e)
		}
		return Response{}, badResponse("HTTP %d: answer has no choices", status)
	}
	ch := cr.Choices[0]
	text := messageText(ch.Message.Content)
	switch {
	case ch.FinishReason == "content_filter":
		return Response{}, idempotency.Final(CodePolicyRejected, &APIError{StatusCode: status, Code: "content_filter",
			Message: "the answer was withheld by the provider's content filter (finish_reason content_filter)"})
	case strings.TrimSpace(text) == "" && ch.Message.Refusal != "":
		return Response{}, idempotency.Final(CodePolicyRejected, &APIError{StatusCode: status, Code: "refusal",
			Message: clean(ch.Message.Refusal, c.apiKey)})
	case strings.TrimSpace(text) == "":
		return Response{}, badResponse("HTTP %d: empty answer (finish_reason %q)", status, clean(ch.FinishReason, c.apiKey))
	}
	model := cr.Model
	if model == "" {
		model = c.model
	}
	return Response{
		Text: text, Model: model, ID: cr.ID,
		PromptTokens: cr.Usage.PromptTokens, CompletionTokens: cr.Usage.CompletionTokens,
		FinishReason: ch.FinishReason,
	}, nil
}

// messageText accepts a string, null, or an array of {"type":"text","text":...}
// parts (some compatible servers answer in parts).
func messageText(raw json.RawMessage) string {
	if s, ok := jsonString(raw); ok {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" || p.Type == "" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}
