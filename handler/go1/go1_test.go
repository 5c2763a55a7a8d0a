package go1

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"testing"

	"github.com/aliyun/fc-runtime-go-sdk/fc"
	"github.com/aliyun/fc-runtime-go-sdk/fc/messages"
	"github.com/aliyun/fc-runtime-go-sdk/fccontext"

	"github.com/idemgate/idemgate/handler"
)

func fcCtx() context.Context {
	return fccontext.NewContext(context.Background(), &fccontext.FcContext{
		RequestID: "req-1",
		Credentials: fccontext.Credentials{AccessKeyId: "STS.ak", AccessKeySecret: "sk-secret",
			SecurityToken: "sts-token"},
		Function:   fccontext.Function{Name: "idemgate", Handler: "main", Timeout: 60},
		Service:    fccontext.Service{Name: "svc"},
		Region:     "cn-hangzhou",
		AccountId:  "1234567890",
		RetryCount: 2,
	})
}

func TestHandler(t *testing.T) {
	failBody := `{"idempotency_key":"k","status":"FAILED","errorType":"llm_timeout","errorMessage":"deadline"}`
	tests := []struct {
		name    string
		reply   handler.Reply
		want    string // the result JSON on success
		wantErr *messages.InvokeResponse_Error
	}{
		{name: "success is the body itself",
			reply: handler.Reply{Status: http.StatusOK, Body: []byte(`{"status":"SUCCEEDED","duplicate":false}`)},
			want:  `{"status":"SUCCEEDED","duplicate":false}`},
		{name: "non-JSON success body is sent as a JSON string, not failed",
			reply: handler.Reply{Status: http.StatusOK, Body: []byte("plain")},
			want:  `"plain"`},
		{name: "failure carries the reply's errorType and the body as errorMessage",
			reply:   handler.Reply{Status: http.StatusNotFound, Body: []byte(failBody), ErrorType: "llm_timeout"},
			wantErr: &messages.InvokeResponse_Error{Message: failBody, Type: "llm_timeout"}},
		{name: "failure without ErrorType takes the body's errorType",
			reply:   handler.Reply{Status: http.StatusNotFound, Body: []byte(failBody)},
			wantErr: &messages.InvokeResponse_Error{Message: failBody, Type: "llm_timeout"}},
		{name: "failure naming no type falls back to the default",
			reply:   handler.Reply{Status: http.StatusInternalServerError, Body: []byte("oops")},
			wantErr: &messages.InvokeResponse_Error{Message: "oops", Type: ErrorTypeDefault}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var gotBody []byte
			var gotMeta handler.Meta
			h := Handler(func(_ context.Context, body []byte, meta handler.Meta) handler.Reply {
				gotBody, gotMeta = body, meta
				return tc.reply
			}, nil)
			// Through the SDK's own wrapper: the same reflection, payload
			// passing and json.Marshal the runtime loop uses.
			out, err := fc.NewHandler(h).Invoke(fcCtx(), []byte(`raw "payload"`))
			if string(gotBody) != `raw "payload"` {
				t.Errorf("handle got body %q, want the raw payload", gotBody)
			}
			if gotMeta.RequestID != "req-1" {
				t.Errorf("handle got meta %+v", gotMeta)
			}
			if tc.wantErr == nil {
				if err != nil || string(out) != tc.want {
					t.Fatalf("Invoke = %s, %v; want %s, nil", out, err, tc.want)
				}
				return
			}
			// The SDK posts exactly this value (a type assertion, not errors.As).
			ive, ok := err.(messages.InvokeResponse_Error)
			if !ok {
				t.Fatalf("Invoke error = %T %v, want messages.InvokeResponse_Error", err, err)
			}
			if !reflect.DeepEqual(ive, *tc.wantErr) {
				t.Errorf("error = %+v, want %+v", ive, *tc.wantErr)
			}
			posted, _ := json.Marshal(ive)
			var wire map[string]string
			if err := json.Unmarshal(posted, &wire); err != nil || wire["errorType"] != tc.wantErr.Type ||
				wire["errorMessage"] != tc.wantErr.Message {
				t.Errorf("posted error body %s", posted)
			}
		})
	}
}

func TestHandlerSecrets(t *testing.T) {
	var got []string
	released := 0
	h := Handler(func(context.Context, []byte, handler.Meta) handler.Reply {
		if len(got) == 0 || released != 0 {
			t.Errorf("while handle runs: secrets %q, released %d times", got, released)
		}
		return handler.Reply{Status: http.StatusOK, Body: []byte(`{}`)}
	}, func(v ...string) func() { got = append(got, v...); return func() { released++ } })
	if _, err := h(fcCtx(), nil); err != nil {
		t.Fatal(err)
	}
	if want := []string{"sk-secret", "sts-token"}; !slices.Equal(got, want) || released != 1 {
		t.Errorf("secrets = %q (want %q), released %d times (want 1)", got, want, released)
	}
}

func TestMeta(t *testing.T) {
	tests := []struct {
		name string
		ctx  context.Context
		want handler.Meta
	}{
		{name: "full fccontext", ctx: fcCtx(), want: handler.Meta{
			RequestID: "req-1",
			Credentials: handler.Credentials{AccessKeyID: "STS.ak", AccessKeySecret: "sk-secret",
				SecurityToken: "sts-token"},
			FunctionName: "idemgate", Region: "cn-hangzhou", AccountID: "1234567890", RetryCount: 2,
		}},
		{name: "empty fccontext (no retry header reads as 0)",
			ctx:  fccontext.NewContext(context.Background(), &fccontext.FcContext{RequestID: "r"}),
			want: handler.Meta{RequestID: "r"}},
		{name: "no fccontext", ctx: context.Background(), want: handler.Meta{RetryCount: -1}},
		{name: "FC's Jaeger span context becomes the traceparent",
			ctx: fccontext.NewContext(context.Background(), &fccontext.FcContext{RequestID: "r",
				Tracing: fccontext.Tracing{OpenTracingSpanContext: "124ed43254b54966:e0a1b2c3d4:0:1"}}),
			want: handler.Meta{RequestID: "r", TraceParent: "00-0000000000000000124ed43254b54966-000000e0a1b2c3d4-01"}},
		{name: "an unreadable span context is none",
			ctx: fccontext.NewContext(context.Background(), &fccontext.FcContext{RequestID: "r",
				Tracing: fccontext.Tracing{OpenTracingSpanContext: "not-a-span"}}),
			want: handler.Meta{RequestID: "r"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Meta(tc.ctx); got != tc.want {
				t.Errorf("Meta = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestLifecycle(t *testing.T) {
	boom := errors.New("db unreachable")
	tests := []struct {
		name    string
		hook    func(func(context.Context) error) func(context.Context)
		fn      func(context.Context) error
		wantErr *messages.InvokeResponse_Error
	}{
		{name: "nil init is a no-op", hook: Initializer},
		{name: "init ok", hook: Initializer, fn: func(context.Context) error { return nil }},
		{name: "init error fails the initializer", hook: Initializer,
			fn:      func(context.Context) error { return boom },
			wantErr: &messages.InvokeResponse_Error{Message: "db unreachable", Type: ErrorTypeInitialize}},
		{name: "pre-stop error fails the pre-stop call", hook: PreStop,
			fn:      func(context.Context) error { return boom },
			wantErr: &messages.InvokeResponse_Error{Message: "db unreachable", Type: ErrorTypePreStop}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var panicked any
			func() {
				defer func() { panicked = recover() }()
				// The SDK's wrapper validates the hook's signature too.
				fc.NewLifeCycleHandler(tc.hook(tc.fn)).Invoke(fcCtx())
			}()
			if tc.wantErr == nil {
				if panicked != nil {
					t.Fatalf("hook panicked with %v", panicked)
				}
				return
			}
			if got, ok := panicked.(messages.InvokeResponse_Error); !ok || !reflect.DeepEqual(got, *tc.wantErr) {
				t.Fatalf("hook panicked with %#v, want %#v", panicked, *tc.wantErr)
			}
		})
	}
}
