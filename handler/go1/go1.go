// Package go1 runs the function on FC's go1 runtime (docs/design.md §2), used when
// FC_RUNTIME_API is set: github.com/aliyun/fc-runtime-go-sdk (v0.3.1) pulls
// invocations from the runtime API and this package translates each one to
// the shared handler signature and its [handler.Reply] back.
//
// What the SDK does with what we return (v0.3.1):
//   - The handler must be a func (fc.StartHandler wraps its argument with
//     fc.NewHandler, which rejects anything that is not a func, so a struct
//     implementing fc.Handler does not work).
//   - A []byte argument receives the raw invocation payload; any other type
//     is JSON-decoded.
//   - The result is passed through json.Marshal, so a []byte result would be
//     sent base64-encoded: we return json.RawMessage, which is sent as the
//     JSON itself (compacted by encoding/json).
//   - A non-nil error is posted to the runtime API's /error as
//     {"errorMessage","errorType"}. errorType is the error's Go type name,
//     except for a messages.InvokeResponse_Error value, which is posted
//     as is: that is how a failed Reply reaches FC with its own errorType.
package go1

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aliyun/fc-runtime-go-sdk/fc"
	"github.com/aliyun/fc-runtime-go-sdk/fc/messages"
	"github.com/aliyun/fc-runtime-go-sdk/fccontext"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/internal/logx"
	"github.com/idemgate/idemgate/internal/trace"
)

// Handle is the shared invocation handler (handler.Pipeline.Handle).
type Handle = func(ctx context.Context, body []byte, meta handler.Meta) handler.Reply

// Error types posted for lifecycle hooks; the same strings as the custom
// runtime's, so a failed initializer reads the same on both runtimes.
const (
	ErrorTypeInitialize = "initialize_failed"
	ErrorTypePreStop    = "prestop_failed"
	// ErrorTypeDefault is posted for a failed Reply that names no errorType.
	ErrorTypeDefault = "HandlerError"
)

// ShutdownGrace bounds the wait for the invocations in flight at SIGTERM,
// as the custom runtime's ListenAndServe does.
const ShutdownGrace = 30 * time.Second

// Start registers the lifecycle hooks and runs the SDK loop against
// $FC_RUNTIME_API. hooks.Init runs on FC's Initializer call, hooks.PreStop on
// PreStop (after the invocations in flight have finished; the loop goes on
// serving), hooks.Shutdown on SIGTERM (after them too), and then the process
// exits 0; hooks.Secrets holds each invocation's AccessKey secret and STS
// token for the log redactor while it runs. Start never returns: the SDK exits the process
// (log.Fatalf) if its loop ends.
func Start(handle Handle, hooks handler.Hooks) {
	var fl handler.Inflight
	fc.RegisterInitializerFunction(Initializer(hooks.Init))
	fc.RegisterPreStopFunction(PreStop(afterInflight(&fl, hooks.PreStop)))
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		<-term
		os.Exit(shutdown(&fl, hooks.Shutdown))
	}()
	fc.Start(Handler(track(&fl, handle), hooks.Secrets))
}

// afterInflight runs fn once no invocation runs (or ctx ends): a flush then
// counts the invocations that were finishing.
func afterInflight(fl *handler.Inflight, fn func(context.Context) error) func(context.Context) error {
	if fn == nil {
		return nil
	}
	return func(ctx context.Context) error {
		fl.Wait(ctx)
		// The wait may have used up ctx; fn must still get its chance.
		return fn(context.WithoutCancel(ctx))
	}
}

// shutdown waits (at most ShutdownGrace) for the invocations in flight,
// runs fn, and returns the exit code.
func shutdown(fl *handler.Inflight, fn func(context.Context) error) int {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	fl.Wait(ctx)
	if fn == nil {
		return 0
	}
	if err := fn(context.WithoutCancel(ctx)); err != nil {
		slog.Error("shutdown failed", "error", err.Error())
		return 1
	}
	return 0
}

// track counts h's invocations in fl.
func track(fl *handler.Inflight, h Handle) Handle {
	return func(ctx context.Context, body []byte, meta handler.Meta) handler.Reply {
		defer fl.Begin()()
		return h(ctx, body, meta)
	}
}

// Handler returns the SDK event handler for handle: it builds the Meta from
// the invocation's fccontext, holds the credentials with secrets (which
// may be nil) while it runs, and turns the Reply into the SDK's result. A 200 reply's body
// is the invocation result; any other status becomes an error so FC records
// a failed invocation (and retries an async one or sends it to the failure
// destination): see [ReplyError].
func Handler(handle Handle, secrets func(values ...string) (release func())) func(ctx context.Context, payload []byte) (json.RawMessage, error) {
	return func(ctx context.Context, payload []byte) (json.RawMessage, error) {
		meta := Meta(ctx)
		if secrets != nil {
			defer secrets(meta.Credentials.AccessKeySecret, meta.Credentials.SecurityToken)()
		}
		// The same per-invocation log fields as the custom runtime.
		ctx = logx.With(ctx, slog.String("request_id", meta.RequestID), slog.String("fc_request_id", meta.RequestID))
		rep := handle(ctx, payload, meta)
		if rep.Status != http.StatusOK {
			return nil, ReplyError(rep)
		}
		return result(rep.Body), nil
	}
}

// result makes body safe to hand to json.Marshal: json.RawMessage must be
// valid JSON or the SDK would turn the success into a MarshalerError failure
// (and FC would retry work that succeeded). Replies are always JSON; anything
// else is sent as a JSON string rather than lost.
func result(body []byte) json.RawMessage {
	if json.Valid(body) {
		return json.RawMessage(body)
	}
	quoted, _ := json.Marshal(string(body)) // a string always encodes
	return quoted
}

// ReplyError is the error a failed Reply becomes. The SDK posts a
// messages.InvokeResponse_Error value unchanged, so FC shows
// {"errorMessage": <the reply body, the outcome JSON as a string>,
// "errorType": rep.ErrorType}; errorType falls back to the body's own
// errorType field, then to ErrorTypeDefault. Any other error type would be
// shown under its Go type name.
func ReplyError(rep handler.Reply) error {
	typ := rep.ErrorType
	if typ == "" {
		var b struct {
			ErrorType string `json:"errorType"`
		}
		if json.Unmarshal(rep.Body, &b) == nil {
			typ = b.ErrorType
		}
	}
	if typ == "" {
		typ = ErrorTypeDefault
	}
	return messages.InvokeResponse_Error{Message: string(rep.Body), Type: typ}
}

// Meta maps the SDK's fccontext to handler.Meta. The SDK reports a missing
// x-fc-retry-count as 0, so RetryCount is never -1 when the context is there
// (a claim never takes 0 to be later than another try, so FC's retry of a
// try that died waits for its lease, answered retry_later: docs/design.md §6);
// without a context (not an FC invocation) everything is empty and
// RetryCount is -1. fccontext (v0.3.1) carries no W3C traceparent, only
// FC's Jaeger span context (Tracing.OpenTracingSpanContext, when tracing is
// on): its trace and span become TraceParent, which the pipeline continues.
func Meta(ctx context.Context) handler.Meta {
	lc, ok := fccontext.FromContext(ctx)
	if !ok {
		return handler.Meta{RetryCount: -1}
	}
	return handler.Meta{
		RequestID: lc.RequestID,
		Credentials: handler.Credentials{
			AccessKeyID:     lc.Credentials.AccessKeyId,
			AccessKeySecret: lc.Credentials.AccessKeySecret,
			SecurityToken:   lc.Credentials.SecurityToken,
		},
		FunctionName: lc.Function.Name,
		Region:       lc.Region,
		AccountID:    lc.AccountId,
		RetryCount:   lc.RetryCount,
		TraceParent:  traceParent(lc.Tracing.OpenTracingSpanContext),
	}
}

// traceParent is the W3C form of a Jaeger span context ("" when there is
// none or it does not parse: the pipeline then starts a trace).
func traceParent(jaeger string) string {
	if c, err := trace.FromJaeger(jaeger); err == nil {
		return c.String()
	}
	return ""
}

// Initializer returns the SDK initializer hook for init. The SDK's hooks
// return nothing; its only failure path is a panic, which it recovers and
// posts to /error (an InvokeResponse_Error panic value is posted as is). So
// an init error is logged and then raised that way, and FC sees the
// initializer fail with errorType ErrorTypeInitialize.
func Initializer(init func(ctx context.Context) error) func(ctx context.Context) {
	return lifecycle("initializer", ErrorTypeInitialize, init)
}

// PreStop returns the SDK pre-stop hook for fn; a failure is reported like
// the initializer's, with errorType ErrorTypePreStop.
func PreStop(fn func(ctx context.Context) error) func(ctx context.Context) {
	return lifecycle("pre-stop", ErrorTypePreStop, fn)
}

func lifecycle(name, errType string, fn func(ctx context.Context) error) func(ctx context.Context) {
	return func(ctx context.Context) {
		if fn == nil {
			return
		}
		if err := fn(ctx); err != nil {
			slog.ErrorContext(ctx, name+" failed", "request_id", Meta(ctx).RequestID, "error", err.Error())
			panic(messages.InvokeResponse_Error{Message: err.Error(), Type: errType})
		}
	}
}
