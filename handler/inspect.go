package handler

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/keys"
)

// ErrUnknownKey: inspect found no record for the key.
var ErrUnknownKey = errors.New("no record for that key")

// Inspection is what `main inspect` prints: the record and its steps' records.
// Records hold no secrets (credentials never enter them).
type Inspection struct {
	Record idempotency.Record            `json:"record"`
	Steps  map[string]idempotency.Record `json:"steps"`
}

// Inspect reads K's record and the per-operation records of its task type's
// steps and of the pipeline's publish and notify.
func Inspect(ctx context.Context, e *idempotency.Engine, tasks *Registry, key string) (Inspection, error) {
	rec, err := e.Get(ctx, key)
	if errors.Is(err, idempotency.ErrNotFound) {
		return Inspection{}, fmt.Errorf("%s: %w", key, ErrUnknownKey)
	}
	if err != nil {
		return Inspection{}, err
	}
	out := Inspection{Record: rec, Steps: map[string]idempotency.Record{}}
	var names []string
	if tt, ok := tasks.Get(rec.TaskType); ok {
		for _, s := range tt.Steps {
			names = append(names, s.Name)
		}
	}
	for _, op := range append(names, stepPublish, stepNotify) {
		r, err := e.Get(ctx, keys.OpKey(key, op))
		if errors.Is(err, idempotency.ErrNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		out.Steps[op] = r
	}
	return out, nil
}
