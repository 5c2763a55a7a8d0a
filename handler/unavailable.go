package handler

import (
	"context"

	"github.com/idemgate/idemgate/handler/event"
)

// Unavailable answers body as Handle would with a durable store that cannot
// be used at all (its check failed: down, or not migrated), without touching
// the store: each task event is parsed and keyed as Handle keys it and
// answered with cause, so the answer names K and the request id whenever
// they can be derived (docs/events.md, Answers); an event refused on its own
// is answered with its own refusal, as Handle refuses it before any claim.
// `main invoke` answers with it when the store fails its check.
func (p *Pipeline) Unavailable(ctx context.Context, body []byte, meta Meta, cause error) Reply {
	if meta.RequestID == "" {
		meta.RequestID = newOwner("no-request-id")
	}
	inv, err := event.ParseWith(body, event.Options{KeyFallback: p.KeyFallback})
	if inv == nil || (err != nil && inv.Kind != event.KindBatch) {
		o := failure(Outcome{RequestID: meta.RequestID}, err)
		return reply(o, true, o.ErrorType)
	}
	vp := *p // keyed offline: the result store is never opened
	vp.Results = func(context.Context, Credentials) (ResultStore, error) { return noResults{}, nil }
	answer := func(ev *event.Task, _ string) Outcome {
		_, o, err := vp.prepare(ctx, ev, meta)
		if err == nil {
			err = cause
		}
		return failure(o, err)
	}
	switch inv.Kind {
	case event.KindSingle:
		o := answer(inv.Tasks[0], meta.RequestID)
		return reply(o, true, o.ErrorType)
	case event.KindBatch:
		return p.batchOf(ctx, inv, err, meta, answer)
	case event.KindTimer:
		o := failure(Outcome{RequestID: meta.RequestID}, cause)
		return reply(o, true, o.ErrorType)
	}
	return p.Handle(ctx, body, meta) // a dead letter or an unsupported event: refused without the store
}
