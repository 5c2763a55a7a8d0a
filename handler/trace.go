package handler

import (
	"context"
	"log/slog"

	"github.com/idemgate/idemgate/handler/event"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/internal/logx"
	"github.com/idemgate/idemgate/internal/trace"
)

// LogTraceID is the log key of the trace id every line of an invocation
// carries.
const LogTraceID = "trace_id"

// withTrace returns ctx working under c: the model call and the notify POST
// send it (handler/llm, handler/notify), and every line logged with ctx
// carries its trace id.
func withTrace(ctx context.Context, c trace.Context) context.Context {
	return logx.With(trace.WithContext(ctx, c), slog.String(LogTraceID, c.TraceIDString()))
}

// TraceInvocation returns ctx carrying the invocation's trace context: a
// span of our own under meta.TraceParent (the invocation's traceparent
// header, or what the go1 runtime hands over), or a new trace when it is
// absent or invalid (an invalid one is logged and replaced, never an
// error). The FC adapters call it before their first line, with the
// invocation's own log attributes (one logx.With for them and the trace's);
// a ctx that carries a trace already keeps it.
func TraceInvocation(ctx context.Context, meta Meta, log *slog.Logger, attrs ...slog.Attr) context.Context {
	if _, ok := trace.FromContext(ctx); ok {
		if len(attrs) == 0 {
			return ctx
		}
		return logx.With(ctx, attrs...)
	}
	c, err := trace.Continue(meta.TraceParent)
	ctx = logx.With(trace.WithContext(ctx, c), append(attrs, slog.String(LogTraceID, c.TraceIDString()))...)
	if err != nil {
		log.InfoContext(ctx, "traceparent replaced by a new trace", "error", "the invocation's "+err.Error())
	}
	return ctx
}

// traceTask returns ctx for one task event: a span under the event's own
// traceparent (the CloudEvents distributed-tracing extension attribute),
// which names the producer's trace and so wins over the invocation's; else
// the invocation's, or a new trace when there is none (operator commands).
func (p *Pipeline) traceTask(ctx context.Context, ev *event.Task) context.Context {
	if v, ok := ev.Extensions[trace.Header]; ok {
		c, err := trace.Parse(v)
		if err == nil {
			return withTrace(ctx, c.Child())
		}
		p.Log.InfoContext(ctx, "event traceparent ignored", "error", "the event's "+err.Error())
	}
	if _, ok := trace.FromContext(ctx); ok {
		return ctx
	}
	return withTrace(ctx, trace.New())
}

// traceRecord returns ctx for work the sweeper or a replay takes up on rec:
// a span under the trace its first delivery worked under, so the re-drive
// shows in the same trace; ctx's own when the record has none.
func (p *Pipeline) traceRecord(ctx context.Context, rec driver.Record) context.Context {
	c, err := trace.Parse(rec.TraceParent)
	if err != nil {
		return ctx
	}
	return withTrace(ctx, c.Child())
}

// traceParentOf is the traceparent ctx works under ("" when none).
func traceParentOf(ctx context.Context) string {
	if c, ok := trace.FromContext(ctx); ok {
		return c.String()
	}
	return ""
}
