// Why a small net/http client rather than github.com/openai/openai-go (v3.99.0 evaluated):
// the SDK retries twice unless told option.WithMaxRetries(0), silently reads OPENAI_API_KEY and
// OPENAI_BASE_URL, reads bodies with an unbounded io.ReadAll, and keeps the *http.Request (with
// its Authorization header) inside *openai.Error; a stripped one-call binary is 24.7 MB with it
// versus 6.1 MB without. We use one endpoint and a handful of JSON fields: a few hundred audited lines win.

// Package llm calls a chat-completion model for the task pipeline (docs/design.md §12).
//
// [HTTPClient] speaks the OpenAI-compatible POST {BaseURL}/chat/completions
// (internal/config defaults BaseURL to DashScope's compatible mode). It sends
// the business key as Idempotency-Key and the request id as X-Request-Id, never retries by
// itself (the task's retry policy decides), bounds what it reads, and returns
// only errors classified with [idempotency.Retryable] or [idempotency.Final].
// Error strings carry the HTTP status and the provider's code and message
// (truncated), never the API key.
//
// [Offline] is a deterministic stand-in for local runs (LLM_MODEL=offline): an
// extractive summary of the prompt under a label line that says it is not a
// real model.
package llm
