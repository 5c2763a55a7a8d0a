package handler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/ossresult"
)

// ForgetReport is what `main forget` did.
type ForgetReport struct {
	IdempotencyKey string   `json:"idempotency_key"`
	PriorStatus    string   `json:"prior_status"`
	Objects        []string `json:"objects_deleted"` // the keys asked to go (a missing one is no error)
}

// deleter is a result store that can delete (operators' stores do; the
// function's role may not).
type deleter interface {
	Delete(ctx context.Context, key string) error
}

// Forget evicts K for an operator (idempotency.Engine.Forget): its next
// delivery runs again with the whole budget. K's objects go first —
// input.json, every attempt's output, approved/result.md — so that the new
// life never meets one of the old (docs/design.md §11): a forgotten key has
// neither record nor objects left, which is the retention rule's end state.
// Refused, changing nothing: an unknown key (ErrUnknownKey), a record under
// a live lease. If the record changed after its objects went (a delivery
// took it over meanwhile), the forget is refused and may be run again.
func (p *Pipeline) Forget(ctx context.Context, key string, r ReplayRequest, meta Meta) (ForgetReport, error) {
	rep := ForgetReport{IdempotencyKey: key}
	if err := r.check(); err != nil {
		return rep, err
	}
	rec, err := p.Engine.Get(ctx, key)
	if errors.Is(err, driver.ErrNotFound) {
		return rep, fmt.Errorf("forget %s: %w", key, ErrUnknownKey)
	}
	if err != nil {
		return rep, fmt.Errorf("forget %s: %w", key, err)
	}
	rep.PriorStatus = string(rec.Status)
	rp := driver.Replay{Reason: r.Reason, Operator: r.Operator, Source: "forget", ExpectFence: rec.Fence}
	check := rec // refused before any object goes; the store checks again under its lock
	if err := driver.ApplyForget(&check, rp, time.Now()); err != nil {
		return rep, fmt.Errorf("forget %s: %w", key, err)
	}
	rs, err := p.Results(ctx, meta.Credentials)
	if err != nil {
		return rep, classifyResultErr("result store", err)
	}
	del, ok := rs.(deleter)
	if !ok {
		return rep, fmt.Errorf("forget %s: the result store cannot delete objects", key)
	}
	if rep.Objects, err = objectsOf(key, rec.Attempt); err != nil {
		return rep, err
	}
	for _, obj := range rep.Objects {
		if err := del.Delete(ctx, obj); err != nil {
			return rep, fmt.Errorf("forget %s: the record is unchanged: %w", key, err)
		}
	}
	if _, err := p.Engine.Forget(ctx, key, rp); err != nil {
		return rep, fmt.Errorf("forget %s: %w", key, err)
	}
	p.Log.InfoContext(ctx, "key forgotten", "idempotency_key", key, "prior_status", rep.PriorStatus,
		"operator", r.Operator, "reason", r.Reason, "objects", len(rep.Objects))
	return rep, nil
}

// objectsOf are the keys of K's objects: its input, its approved result and
// one output per attempt (attempt numbers never exceed the record's).
func objectsOf(key string, attempts int) ([]string, error) {
	in, err := ossresult.InputKey(key)
	if err != nil {
		return nil, err
	}
	approved, err := ossresult.ApprovedKey(key)
	if err != nil {
		return nil, err
	}
	out := []string{approved}
	for n := max(attempts, 1); n >= 1; n-- {
		a, err := ossresult.AttemptKey(key, n)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return append(out, in), nil // the input last: while it stands, the sweeper can still re-drive the old life
}
