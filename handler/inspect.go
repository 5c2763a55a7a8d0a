package handler

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/ossresult"
)

// ErrUnknownKey: there is no record for the key.
var ErrUnknownKey = errors.New("no record for that key")

// Inspection is what `main inspect` prints. Records and object metadata hold
// no secrets: credentials never enter them.
type Inspection struct {
	Record  driver.Record     `json:"record"`
	Replays []driver.Replay   `json:"replays"`
	Objects map[string]string `json:"objects"` // object key → ref, for those that exist
	// DedupWindowEnds: when a purge may delete the record, after which a
	// duplicate runs again (DedupWindowEnds); "open" while it may not.
	DedupWindowEnds string `json:"dedup_window_ends,omitempty"`
}

// Inspect reads K's record (its finish state and step checkpoints
// included), its replay audit and which of its objects exist.
func (p *Pipeline) Inspect(ctx context.Context, key string, meta Meta) (Inspection, error) {
	rec, err := p.Engine.Get(ctx, key)
	if errors.Is(err, driver.ErrNotFound) {
		return Inspection{}, fmt.Errorf("%s: %w", key, ErrUnknownKey)
	}
	if err != nil {
		return Inspection{}, err
	}
	out := Inspection{Record: rec, Objects: map[string]string{}}
	if p.Retention.Records > 0 {
		out.DedupWindowEnds = DedupWindowEnds(rec, p.Retention.TombstoneAge())
	}
	if m := p.maint(); m != nil {
		if out.Replays, err = m.Replays(ctx, key); err != nil {
			return out, err
		}
	}
	rs, err := p.Results(ctx, meta.Credentials)
	if err != nil {
		return out, err
	}
	objs := []func() (string, error){func() (string, error) { return ossresult.InputKey(key) },
		func() (string, error) { return ossresult.ApprovedKey(key) }}
	for n := 1; n <= rec.Attempt; n++ {
		objs = append(objs, func() (string, error) { return ossresult.AttemptKey(key, n) })
	}
	for _, mk := range objs {
		k, err := mk()
		if err != nil {
			return out, err
		}
		if _, _, err := rs.Get(ctx, k); err == nil {
			out.Objects[k] = rs.Ref(k)
		} else if !errors.Is(err, ossresult.ErrNotFound) {
			return out, err
		}
	}
	return out, nil
}
