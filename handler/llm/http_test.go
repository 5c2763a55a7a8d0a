package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/internal/dev/testenv"
	"github.com/idemgate/idemgate/internal/trace"
)

// testKey is distinctive so that a leak is found by a plain substring search.
const testKey = "sk-TESTSECRET-0123456789abcdef"

func newClient(t *testing.T, baseURL string, timeout time.Duration) *HTTPClient {
	t.Helper()
	c, err := NewHTTPClient(Config{BaseURL: baseURL, APIKey: testKey, Model: "qwen-plus", Timeout: timeout})
	if err != nil {
		t.Fatalf("NewHTTPClient: %v", err)
	}
	return c
}

func okRequest() Request {
	return Request{Key: "biz-key-1", RequestID: "req-1", System: "be brief", Prompt: "Summarise this.", MaxTokens: 64}
}

// classOf asserts err is an *idempotency.Error and returns its class and code.
func classOf(t *testing.T, err error) (idempotency.Class, string) {
	t.Helper()
	var ie *idempotency.Error
	if !errors.As(err, &ie) {
		t.Fatalf("error %v (%T) is not an *idempotency.Error", err, err)
	}
	return ie.Class, ie.Code
}

func assertNoKey(t *testing.T, err error) {
	t.Helper()
	for _, s := range []string{err.Error(), fmt.Sprintf("%v", err), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err), fmt.Sprintf("%s", err)} {
		if strings.Contains(s, testKey) || strings.Contains(s, testKey[3:20]) {
			t.Errorf("API key leaked into error text: %s", s)
		}
	}
	// Walk the chain: a wrapped cause printed by a logger must be clean too.
	for e := err; e != nil; e = errors.Unwrap(e) {
		if s := fmt.Sprintf("%+v", e); strings.Contains(s, testKey) {
			t.Errorf("API key leaked into wrapped error %T: %s", e, s)
		}
	}
}

func TestCompleteSendsContract(t *testing.T) {
	var (
		mu   sync.Mutex
		got  *http.Request
		body map[string]any
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = r.Clone(context.Background())
		_ = json.Unmarshal(data, &body)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-1","model":"qwen-plus-2025","object":"chat.completion",
			"choices":[{"index":0,"message":{"role":"assistant","content":"A summary."},"finish_reason":"stop"}],
			"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`)
	}))
	defer srv.Close()

	c := newClient(t, srv.URL+"/compatible-mode/v1/", time.Second)
	tc, _ := trace.Parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	resp, err := c.Complete(trace.WithContext(context.Background(), tc), okRequest())
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	want := Response{Text: "A summary.", Model: "qwen-plus-2025", ID: "chatcmpl-1", PromptTokens: 12, CompletionTokens: 3, FinishReason: "stop"}
	if resp != want {
		t.Errorf("response = %+v, want %+v", resp, want)
	}

	mu.Lock()
	defer mu.Unlock()
	if got.Method != http.MethodPost || got.URL.Path != "/compatible-mode/v1/chat/completions" {
		t.Errorf("request = %s %s", got.Method, got.URL.Path)
	}
	for h, v := range map[string]string{
		"Authorization":   "Bearer " + testKey,
		"Idempotency-Key": "biz-key-1",
		"X-Request-Id":    "req-1",
		"Content-Type":    "application/json",
		"Traceparent":     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	} {
		if g := got.Header.Get(h); g != v {
			t.Errorf("header %s = %q, want %q", h, g, v)
		}
	}
	if body["model"] != "qwen-plus" || body["max_tokens"] != float64(64) {
		t.Errorf("body model/max_tokens = %v/%v", body["model"], body["max_tokens"])
	}
	msgs, _ := json.Marshal(body["messages"])
	if string(msgs) != `[{"content":"be brief","role":"system"},{"content":"Summarise this.","role":"user"}]` {
		t.Errorf("messages = %s", msgs)
	}
}

func TestCompleteOmitsOptionalFields(t *testing.T) {
	var raw atomic.Value
	var hdr atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		raw.Store(string(data))
		hdr.Store(r.Header.Clone())
		io.WriteString(w, `{"choices":[{"message":{"content":[{"type":"text","text":"in "},{"type":"text","text":"parts"}]},"finish_reason":"length"}]}`)
	}))
	defer srv.Close()

	resp, err := newClient(t, srv.URL, time.Second).Complete(context.Background(), Request{Key: "k", Prompt: "p"})
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if resp.Text != "in parts" || resp.Model != "qwen-plus" || resp.FinishReason != "length" {
		t.Errorf("response = %+v", resp)
	}
	if got := raw.Load().(string); got != `{"model":"qwen-plus","messages":[{"role":"user","content":"p"}]}` {
		t.Errorf("body = %s", got)
	}
	if _, ok := hdr.Load().(http.Header)["X-Request-Id"]; ok {
		t.Error("X-Request-Id sent although RequestID is empty")
	}
	if _, ok := hdr.Load().(http.Header)["Traceparent"]; ok {
		t.Error("traceparent sent although the context carries no trace")
	}
}

// errorCase drives one failure path; every case also runs the key-leak check.
type errorCase struct {
	name    string
	handler http.HandlerFunc // nil: use url
	url     func(t *testing.T) string
	timeout time.Duration
	ctx     func() (context.Context, context.CancelFunc)
	req     *Request
	class   idempotency.Class
	code    string
}

func status(code int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

// The DashScope bodies below follow the shapes documented at
// https://help.aliyun.com/zh/model-studio/error-code and seen in
// https://github.com/camel-ai/owl/issues/432.
const (
	dashscopePolicy = `{"error":{"code":"data_inspection_failed","param":null,"message":"Input data may contain inappropriate content.","type":"data_inspection_failed"},"id":"chatcmpl-x","request_id":"deab386b"}`
	dashscopeAlgo   = `{"error":{"code":"data_inspection_failed","param":null,"message":"<400> InternalError.Algo.DataInspectionFailed: Input text data may contain inappropriate content.","type":"data_inspection_failed"},"request_id":"aab92fd7"}`
	nativePolicy    = `{"code":"DataInspectionFailed","message":"Input or output data may contain inappropriate content.","request_id":"17f9c41d"}`
)

var errorCases = []errorCase{
	{name: "429 throttling", handler: status(429, `{"error":{"code":"limit_requests","message":"Requests rate limit exceeded, please try again later.","type":"limit_requests"}}`), class: idempotency.ClassRetryable, code: CodeRateLimited},
	{name: "429 insufficient_quota", handler: status(429, `{"error":{"code":"insufficient_quota","message":"You exceeded your current quota","type":"insufficient_quota"}}`), class: idempotency.ClassRetryable, code: CodeRateLimited},
	{name: "500 internal_error", handler: status(500, `{"error":{"code":"internal_error","message":"An internal error has occured, please try again later.","type":"internal_error"}}`), class: idempotency.ClassRetryable, code: CodeTemporaryUnavailable},
	{name: "502 html gateway page", handler: status(502, `<html><body>Bad Gateway</body></html>`), class: idempotency.ClassRetryable, code: CodeTemporaryUnavailable},
	{name: "503 ModelUnavailable", handler: status(503, `{"error":{"code":"ModelUnavailable","message":"Model is unavailable, please try again later."}}`), class: idempotency.ClassRetryable, code: CodeTemporaryUnavailable},
	{name: "408 request timeout", handler: status(408, ``), class: idempotency.ClassRetryable, code: CodeTimeout},
	{name: "409 same key in flight", handler: status(409, `{"error":{"message":"request with this Idempotency-Key is being processed"}}`), class: idempotency.ClassRetryable, code: CodeTemporaryUnavailable},
	{name: "400 invalid parameter", handler: status(400, `{"error":{"code":"invalid_parameter_error","message":"<400> InternalError.Algo.InvalidParameter: Range of max_tokens should be [1, 8192]","type":"invalid_request_error"}}`), class: idempotency.ClassFinal, code: CodeInvalidRequest},
	{name: "400 media data inspection is not policy", handler: status(400, `{"code":"InvalidParameter.DataInspection","message":"The media format is not supported or incorrect for the data inspection."}`), class: idempotency.ClassFinal, code: CodeInvalidRequest},
	{name: "400 arrearage", handler: status(400, `{"error":{"code":"Arrearage","message":"Access denied, please make sure your account is in good standing.","type":"Arrearage"}}`), class: idempotency.ClassFinal, code: CodePermissionDenied},
	{name: "401 invalid api key", handler: status(401, `{"error":{"code":"invalid_api_key","message":"Incorrect API key provided.","type":"invalid_request_error"}}`), class: idempotency.ClassFinal, code: CodePermissionDenied},
	{name: "403 access denied", handler: status(403, `{"error":{"code":"AccessDenied.Unpurchased","message":"Access to model denied."}}`), class: idempotency.ClassFinal, code: CodePermissionDenied},
	{name: "404 model not found", handler: status(404, `{"error":{"code":"model_not_found","message":"The model qwen-nope does not exist.","type":"invalid_request_error"}}`), class: idempotency.ClassFinal, code: CodeInvalidRequest},
	{name: "400 policy data_inspection_failed", handler: status(400, dashscopePolicy), class: idempotency.ClassFinal, code: CodePolicyRejected},
	{name: "400 policy InternalError.Algo.DataInspectionFailed", handler: status(400, dashscopeAlgo), class: idempotency.ClassFinal, code: CodePolicyRejected},
	{name: "400 policy native DataInspectionFailed", handler: status(400, nativePolicy), class: idempotency.ClassFinal, code: CodePolicyRejected},
	{name: "400 policy type only", handler: status(400, `{"error":{"message":"Output data may contain inappropriate content.","type":"data_inspection_failed"}}`), class: idempotency.ClassFinal, code: CodePolicyRejected},
	{name: "400 policy message only", handler: status(400, `{"error":{"message":"Input data may contain inappropriate content."}}`), class: idempotency.ClassFinal, code: CodePolicyRejected},
	{name: "400 policy CustomRoleBlocked", handler: status(400, `{"code":"CustomRoleBlocked","message":"Input or output data may contain inappropriate content with custom rule."}`), class: idempotency.ClassFinal, code: CodePolicyRejected},
	{name: "400 policy IPInfringementSuspect", handler: status(400, `{"code":"IPInfringementSuspect","message":"Input data is suspected of being involved in IP infringement."}`), class: idempotency.ClassFinal, code: CodePolicyRejected},
	{name: "200 policy error object", handler: status(200, dashscopePolicy), class: idempotency.ClassFinal, code: CodePolicyRejected},
	{name: "200 finish_reason content_filter", handler: status(200, `{"choices":[{"message":{"content":""},"finish_reason":"content_filter"}]}`), class: idempotency.ClassFinal, code: CodePolicyRejected},
	{name: "200 refusal", handler: status(200, `{"choices":[{"message":{"content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`), class: idempotency.ClassFinal, code: CodePolicyRejected},
	{name: "200 malformed JSON", handler: status(200, `{"choices":[{"message":`), class: idempotency.ClassRetryable, code: CodeBadResponse},
	{name: "200 empty choices", handler: status(200, `{"id":"x","choices":[]}`), class: idempotency.ClassRetryable, code: CodeBadResponse},
	{name: "200 empty content", handler: status(200, `{"choices":[{"message":{"content":"  "},"finish_reason":"stop"}]}`), class: idempotency.ClassRetryable, code: CodeBadResponse},
	{name: "200 unknown error object", handler: status(200, `{"error":{"code":"weird","message":"something"}}`), class: idempotency.ClassRetryable, code: CodeBadResponse},
	{name: "200 oversized answer", handler: func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"choices":[{"message":{"content":"`)
		io.WriteString(w, strings.Repeat("a", maxResponseBody))
		io.WriteString(w, `"}}]}`)
	}, class: idempotency.ClassRetryable, code: CodeBadResponse},
	{name: "302 redirect not followed", handler: func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	}, class: idempotency.ClassFinal, code: CodeInvalidRequest},
	{name: "error body echoes the key", handler: func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		fmt.Fprintf(w, `{"error":{"code":"bad","message":"header was %s"}}`, r.Header.Get("Authorization"))
	}, class: idempotency.ClassFinal, code: CodeInvalidRequest},
	{name: "timeout: server sleeps past the client timeout", timeout: 50 * time.Millisecond, handler: func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}, class: idempotency.ClassRetryable, code: CodeTimeout},
	{name: "timeout: body stalls after headers", timeout: 100 * time.Millisecond, handler: func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"choices":[`)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}, class: idempotency.ClassRetryable, code: CodeTimeout},
	{name: "caller context canceled", ctx: func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, cancel
	}, handler: status(200, `{}`), class: idempotency.ClassRetryable, code: CodeTimeout},
	{name: "connection refused", url: func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return "http://" + addr + "/v1"
	}, class: idempotency.ClassRetryable, code: CodeTemporaryUnavailable},
	{name: "empty prompt", req: &Request{Key: "k", Prompt: "  "}, handler: status(200, `{}`), class: idempotency.ClassFinal, code: CodeInvalidRequest},
	{name: "missing idempotency key", req: &Request{Prompt: "p"}, handler: status(200, `{}`), class: idempotency.ClassFinal, code: CodeInvalidRequest},
	{name: "control character in key", req: &Request{Key: "k\r\nX-Evil: 1", Prompt: "p"}, handler: status(200, `{}`), class: idempotency.ClassFinal, code: CodeInvalidRequest},
	{name: "negative max tokens", req: &Request{Key: "k", Prompt: "p", MaxTokens: -1}, handler: status(200, `{}`), class: idempotency.ClassFinal, code: CodeInvalidRequest},
}

func runErrorCase(t *testing.T, tc errorCase) (int64, error) {
	t.Helper()
	hits := new(atomic.Int64)
	base := ""
	if tc.url != nil {
		base = tc.url(t)
	} else {
		base, hits = testenv.Peer(t, tc.handler)
		base += "/v1"
	}
	timeout := tc.timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if tc.ctx != nil {
		ctx, cancel = tc.ctx()
	}
	defer cancel()
	req := okRequest()
	if tc.req != nil {
		req = *tc.req
	}
	_, err := newClient(t, base, timeout).Complete(ctx, req)
	if err == nil {
		t.Fatal("Complete succeeded, want an error")
	}
	return hits.Load(), err
}

func TestCompleteClassifiesFailures(t *testing.T) {
	for _, tc := range errorCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hits, err := runErrorCase(t, tc)
			class, code := classOf(t, err)
			t.Logf("%s/%s: %v", class, code, err)
			if class != tc.class || code != tc.code {
				t.Errorf("classified %s/%s, want %s/%s (err: %v)", class, code, tc.class, tc.code, err)
			}
			if hits > 1 {
				t.Errorf("server hit %d times: the client must not retry", hits)
			}
			if c2, code2 := idempotency.Classify(err); c2 != class || code2 != code {
				t.Errorf("idempotency.Classify = %s/%s", c2, code2)
			}
		})
	}
}

// TestErrorsNeverContainAPIKey forces every error path above, plus the
// constructor's, and checks that no rendering of the error shows the key.
func TestErrorsNeverContainAPIKey(t *testing.T) {
	for _, tc := range errorCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := runErrorCase(t, tc)
			assertNoKey(t, err)
		})
	}
	t.Run("config errors", func(t *testing.T) {
		for _, cfg := range []Config{
			validConfig(func(c *Config) { c.BaseURL = "ftp://x" }),
			validConfig(func(c *Config) { c.BaseURL = "https://user:" + testKey + "@[::bad" }), // url.Parse errors repeat the URL
			validConfig(func(c *Config) { c.APIKey = testKey + "\x00" }),
			validConfig(func(c *Config) { c.Timeout = -1 }),
		} {
			_, err := NewHTTPClient(cfg)
			if err == nil {
				t.Fatalf("NewHTTPClient(%v) succeeded", cfg)
			}
			assertNoKey(t, err)
		}
	})
}

func TestAPIErrorDetails(t *testing.T) {
	long := strings.Repeat("错误", 400) // multi-byte, so truncation must respect rune boundaries
	_, err := runErrorCase(t, errorCase{handler: status(400, `{"error":{"code":"invalid_parameter_error","message":"`+long+`"},"request_id":"rid-9"}`)})
	var ae *APIError
	if !errors.As(err, &ae) {
		t.Fatalf("no *APIError in %v", err)
	}
	if ae.StatusCode != 400 || ae.Code != "invalid_parameter_error" || ae.RequestID != "rid-9" {
		t.Errorf("APIError = %+v", ae)
	}
	if len(ae.Message) > maxMessage+len("…") || !strings.HasSuffix(ae.Message, "…") || !utf8.ValidString(ae.Message) {
		t.Errorf("message not truncated cleanly: %d bytes", len(ae.Message))
	}
	if !strings.Contains(err.Error(), "HTTP 400") || !strings.Contains(err.Error(), "invalid_parameter_error") {
		t.Errorf("error text lacks status or code: %s", err)
	}

	_, err = runErrorCase(t, errorCase{handler: func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		fmt.Fprintf(w, `{"error":{"code":"bad","message":"you sent %s"}}`, r.Header.Get("Authorization"))
	}})
	if !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("echoed key not redacted: %s", err)
	}
}

func TestCompleteTimeoutIsBounded(t *testing.T) {
	start := time.Now()
	_, err := runErrorCase(t, errorCases[indexOf("timeout: server sleeps past the client timeout")])
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("timed out after %s, want about 50ms", d)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("errors.Is(err, DeadlineExceeded) = false for %v", err)
	}
}

func indexOf(name string) int {
	for i, tc := range errorCases {
		if tc.name == name {
			return i
		}
	}
	panic("no case " + name)
}

func TestHTTPClientDoesNotPrintKey(t *testing.T) {
	c := newClient(t, "https://example.invalid/v1", time.Second)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprintf("%v", *c)} {
		if strings.Contains(s, testKey) {
			t.Errorf("client rendering leaks the key: %s", s)
		}
	}
	cfg := Config{APIKey: testKey}
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg)} {
		if strings.Contains(s, testKey) {
			t.Errorf("config rendering leaks the key: %s", s)
		}
	}
}

// Concurrent invocations on one instance call the model at once; their
// connections must be kept for the next ones (net/http's default keeps 2 per
// host, and every other connection would be re-dialed — a TLS handshake to
// the model — after each round).
func TestConcurrentCallsReuseConnections(t *testing.T) {
	var dials atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(20 * time.Millisecond) // hold the connection so that the round needs one each
		io.WriteString(w, `{"choices":[{"message":{"content":"ok"},"finish_reason":"stop"}]}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := newClient(t, srv.URL, 5*time.Second)
	const concurrent = 8
	for round := 0; round < 3; round++ {
		var wg sync.WaitGroup
		for i := 0; i < concurrent; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.Complete(context.Background(), okRequest()); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	if n := dials.Load(); n > concurrent {
		t.Errorf("%d connections dialed for 3 rounds of %d concurrent calls, want at most %d", n, concurrent, concurrent)
	}
}
