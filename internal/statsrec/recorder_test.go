package statsrec

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
)

type sink struct {
	mu   sync.Mutex
	fail bool
	got  map[string]int64
}

func (s *sink) AddStats(_ context.Context, rows []driver.StatRow) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errors.New("database went away")
	}
	for _, r := range rows {
		s.got[r.Name] += r.Count
	}
	return nil
}

// Every decision is counted under its name; the rejections a duplicate got
// are counted again by the layer that answered; a failed flush keeps them.
func TestObserveAndFlush(t *testing.T) {
	s := &sink{got: map[string]int64{}, fail: true}
	r := New(s, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer r.Close()
	var aborts atomic.Int64
	aborts.Store(5) // before the recorder tracked it: not counted
	r.Track(StatStoreAbortRetried, aborts.Load)
	aborts.Add(2)
	for _, o := range []struct {
		d  driver.Decision
		by idempotency.Tier
	}{
		{driver.DecisionFirst, idempotency.TierStore},
		{driver.DecisionRepeatDone, idempotency.TierFast},
		{driver.DecisionRepeatDone, idempotency.TierStore},
		{driver.DecisionRepeatOther, idempotency.TierFast},
		{driver.DecisionRepeatDone, idempotency.TierCache},
		{driver.DecisionTakeover, idempotency.TierStore},
	} {
		r.Observe(o.d, o.by)
	}
	r.Flush(context.Background()) // fails: nothing lost
	aborts.Add(1)
	s.mu.Lock()
	s.fail = false
	s.mu.Unlock()
	r.Flush(context.Background())
	want := map[string]int64{"first": 1, "repeat_done": 3, "repeat_other": 1, "takeover": 1,
		StatFastReject: 2, StatCacheAnswer: 1, StatStoreConflict: 1, StatStoreAbortRetried: 3}
	for name, n := range want {
		if s.got[name] != n {
			t.Errorf("%s = %d, want %d (all: %v)", name, s.got[name], n, s.got)
		}
	}
	if len(s.got) != len(want) {
		t.Errorf("counted %v, want %v", s.got, want)
	}
}
