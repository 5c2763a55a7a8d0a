package llm

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/idemgate/idemgate/internal/transport"

	"github.com/idemgate/idemgate/idempotency"
)

// Error codes (the outcome's errorType, docs/design.md §10).
const (
	// RETRYABLE
	CodeTimeout              = "timeout"
	CodeRateLimited          = "rate_limited"
	CodeTemporaryUnavailable = "temporary_unavailable"
	// CodeBadResponse: a 2xx answer we cannot use (malformed JSON, no
	// choices, empty text, oversized). Retryable: it is most often a provider
	// or proxy hiccup, and the attempt budget bounds the cost if it is not.
	CodeBadResponse = "bad_response"
	// FINAL
	CodeInvalidRequest   = "invalid_request"
	CodePermissionDenied = "permission_denied"
	CodePolicyRejected   = "policy_rejected"
)

// maxMessage bounds the provider message kept in an error.
const maxMessage = 300

// APIError is a non-2xx answer (or a 2xx carrying an error object). It is
// always wrapped in an [*idempotency.Error]; use errors.As to read it.
type APIError struct {
	StatusCode int
	// Code and Type are the provider's error code and type (either may be
	// empty); Message is its message, truncated and stripped of the API key.
	Code, Type, Message string
	// RequestID is the provider's request id, for support tickets.
	RequestID string
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "llm: chat/completions: HTTP %d", e.StatusCode)
	if e.Code != "" {
		fmt.Fprintf(&b, " code=%s", e.Code)
	}
	if e.Type != "" && e.Type != e.Code {
		fmt.Fprintf(&b, " type=%s", e.Type)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (request_id %s)", e.RequestID)
	}
	return b.String()
}

// policyCodes are provider codes (lowercased) that mean "the content was
// refused by a content-safety check": retrying the same input cannot help.
// Sources: Alibaba Cloud Model Studio error codes
// (https://help.aliyun.com/zh/model-studio/error-code,
// https://www.alibabacloud.com/help/en/model-studio/error-code) and OpenAI's
// content_filter / content_policy_violation.
var policyCodes = map[string]bool{
	"data_inspection_failed":                  true, // compatible mode, 400
	"datainspectionfailed":                    true, // DashScope native, 400
	"internalerror.algo.datainspectionfailed": true, // seen as the code prefix of the message
	"customroleblocked":                       true, // 400, custom moderation rule
	"faqruleblocked":                          true, // 400, FAQ intervention rule
	"ipinfringementsuspect":                   true, // 400, suspected IP infringement
	"content_filter":                          true, // OpenAI / Azure
	"content_policy_violation":                true, // OpenAI
}

// permissionCodes are 400-class codes that are really access denials.
var permissionCodes = map[string]bool{
	"arrearage":       true, // 400: the account is in arrears
	"invalidapikey":   true,
	"invalid_api_key": true,
	"accessdenied":    true,
	"access_denied":   true,
}

// apiErrorBody accepts the OpenAI shape {"error":{code,message,type}} and the
// DashScope native shape {code,message,request_id}. Code may be a number.
type apiErrorBody struct {
	Error     json.RawMessage `json:"error"`
	Code      json.RawMessage `json:"code"`
	Message   string          `json:"message"`
	RequestID string          `json:"request_id"`
}

type apiErrorObject struct {
	Code    json.RawMessage `json:"code"`
	Type    string          `json:"type"`
	Message string          `json:"message"`
}

// parseAPIError reads whatever error the body holds; ok is false when it
// holds none (a 2xx answer without an error object).
func parseAPIError(status int, body []byte, apiKey string) (e *APIError, ok bool) {
	e = &APIError{StatusCode: status}
	var b apiErrorBody
	if json.Unmarshal(body, &b) != nil {
		// Not JSON (an HTML gateway page, say): keep a snippet.
		e.Message = clean(string(body), apiKey)
		return e, status >= 300
	}
	e.RequestID = clean(b.RequestID, apiKey)
	switch raw := trimNull(b.Error); {
	case len(raw) > 0 && raw[0] == '{':
		var o apiErrorObject
		_ = json.Unmarshal(raw, &o)
		e.Code, e.Type, e.Message = rawString(o.Code), o.Type, o.Message
	case len(raw) > 0 && raw[0] == '"':
		_ = json.Unmarshal(raw, &e.Message)
	case len(raw) > 0:
		e.Message = string(raw)
	default:
		e.Code, e.Message = rawString(b.Code), b.Message
	}
	ok = status >= 300 || e.Code != "" || e.Message != "" || e.Type != ""
	e.Code, e.Type, e.Message = clean(e.Code, apiKey), clean(e.Type, apiKey), clean(e.Message, apiKey)
	return e, ok
}

// classifyAPIError maps an API error to a class and code (docs/design.md §12).
func classifyAPIError(e *APIError) error {
	code, typ := strings.ToLower(e.Code), strings.ToLower(e.Type)
	s := e.StatusCode
	switch {
	// A 5xx is the provider failing, whatever its body says.
	case s >= 500:
		return idempotency.Retryable(CodeTemporaryUnavailable, e)
	case s == 429:
		// Includes DashScope's Throttling.* and quota/billing codes under
		// 429: the contract says RETRYABLE, and the attempt budget ends it.
		return idempotency.Retryable(CodeRateLimited, e)
	case policyCodes[code] || policyCodes[typ] ||
		strings.Contains(strings.ToLower(e.Message), "datainspectionfailed") ||
		strings.Contains(strings.ToLower(e.Message), "may contain inappropriate content"):
		return idempotency.Final(CodePolicyRejected, e)
	case s == 401 || s == 403 || permissionCodes[code] || permissionCodes[typ]:
		return idempotency.Final(CodePermissionDenied, e)
	case s == 408:
		return idempotency.Retryable(CodeTimeout, e)
	// 409: a request with the same Idempotency-Key is still being processed
	// (IETF httpapi-idempotency-key-header); 425: Too Early. Both pass.
	case s == 409 || s == 425:
		return idempotency.Retryable(CodeTemporaryUnavailable, e)
	case s >= 300:
		// 400, 404 model_not_found, 413, 422 (key reused with another body),
		// and 3xx (redirects are not followed: LLM_BASE_URL is wrong).
		return idempotency.Final(CodeInvalidRequest, e)
	default:
		// An error object inside a 2xx answer.
		return idempotency.Retryable(CodeBadResponse, e)
	}
}

// classifyTransport maps a failure to reach the peer (internal/transport).
func classifyTransport(op string, err, ctxErr error) error {
	return transport.Classify("llm: "+op, err, ctxErr)
}

func badResponse(format string, a ...any) error {
	return idempotency.Retryable(CodeBadResponse, fmt.Errorf("llm: chat/completions: "+format, a...))
}

// clean makes provider text safe to put in an error: the API key is cut out
// (some gateways echo request headers), control characters become spaces so
// a log line stays one line, and the result is cut to maxMessage bytes on a
// rune boundary. The key is cut before truncating so no prefix of it survives.
func clean(s, apiKey string) string {
	if apiKey != "" {
		s = strings.ReplaceAll(s, apiKey, "[redacted]")
	}
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(strings.ToValidUTF8(s, "?"))
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func trimNull(raw json.RawMessage) json.RawMessage {
	raw = json.RawMessage(strings.TrimSpace(string(raw)))
	if string(raw) == "null" {
		return nil
	}
	return raw
}

// rawString renders a JSON string or number as text ("" for null/absent).
func rawString(raw json.RawMessage) string {
	if s, ok := jsonString(raw); ok {
		return s
	}
	return string(trimNull(raw))
}

// jsonString is raw as a JSON string ("" for null or absent); ok is false
// when raw holds something else.
func jsonString(raw json.RawMessage) (s string, ok bool) {
	raw = trimNull(raw)
	if len(raw) == 0 {
		return "", true
	}
	return s, json.Unmarshal(raw, &s) == nil
}
