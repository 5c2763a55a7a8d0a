package idempotency

import (
	"context"
	"sync"
	"time"
)

// Defaults of WithFinishBatch.
const (
	defaultFinishWindow = time.Second
	defaultFinishBatch  = 256
)

// WithFinishBatch sets how [Finisher.DoneLater] batches its writes: at most
// window after the first mark, or at max marks, one write records them all
// (default 1 s, 256). A window of 0 writes each mark at once.
func WithFinishBatch(window time.Duration, max int) Option {
	return func(o *options) { o.finishWindow, o.finishMax = window, max }
}

// finishMarks holds the DoneLater marks not written yet.
type finishMarks struct {
	mu       sync.Mutex
	keys     []string
	timer    *time.Timer
	flushing sync.Mutex // one write at a time; Flush waits for the one under way
}

func (m *finishMarks) add(e *Engine, key string) {
	m.mu.Lock()
	m.keys = append(m.keys, key)
	full := len(m.keys) >= e.o.finishMax || e.o.finishWindow <= 0
	if !full && m.timer == nil {
		m.timer = time.AfterFunc(e.o.finishWindow, func() { _ = e.Flush(context.Background()) })
	}
	m.mu.Unlock()
	if full {
		if e.o.finishWindow <= 0 {
			_ = e.Flush(context.Background())
			return
		}
		go func() { _ = e.Flush(context.Background()) }()
	}
}

// Flush writes the finish marks [Finisher.DoneLater] left waiting. FC's
// pre-stop and the end of the process call it; marks it cannot write are
// lost, which costs the sweeper one repeated finish each (see DoneLater).
func (e *Engine) Flush(ctx context.Context) error {
	m := &e.marks
	m.flushing.Lock()
	defer m.flushing.Unlock()
	m.mu.Lock()
	keys := m.keys
	m.keys = nil
	if m.timer != nil {
		m.timer.Stop()
		m.timer = nil
	}
	m.mu.Unlock()
	if len(keys) == 0 {
		return nil
	}
	c, cancel := detached(ctx)
	defer cancel()
	if err := e.store.MarkFinished(c, keys); err != nil {
		e.o.log.WarnContext(ctx, "finish marks lost; the sweeper will finish those tasks again", "marks", len(keys),
			"error", err.Error())
		return storeErr("mark finished", err)
	}
	return nil
}
