// Package statsrec counts claim decisions per minute in memory and adds them
// to the store in batches, for `main stats` and the duplicate-rate query.
package statsrec

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
)

// Recorder keeps per-minute claim counters in memory and adds them to a sink
// in batches, so that `main stats` can show decisions and the duplicate rate
// across instances without one extra write per invocation.
type Recorder struct {
	sink   driver.StatsSink
	log    *slog.Logger
	mu     sync.Mutex
	cur    map[statKey]int64
	tracks []*track
	stop   chan struct{}
	done   chan struct{}
}

type statKey struct {
	minute time.Time
	name   string
}

// Counter names besides the decisions (lower-cased).
const (
	StatFastReject    = "fast_reject"    // a duplicate the fast layer answered
	StatCacheAnswer   = "cache_answer"   // a duplicate the instance's local cache answered
	StatStoreConflict = "store_conflict" // a duplicate the durable store answered
	// StatStoreAbortRetried: writes the durable store ran again after the
	// database aborted them (mysqlstore.Store.AbortsRetried: deadlocks, lock
	// waits, Galera certification conflicts).
	StatStoreAbortRetried = "store_abort_retried"
)

// New starts a recorder that flushes every interval until Close.
func New(sink driver.StatsSink, every time.Duration, log *slog.Logger) *Recorder {
	r := &Recorder{sink: sink, log: log, cur: map[statKey]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	go r.loop(every)
	return r
}

// track is a running total read at every flush.
type track struct {
	name  string
	total func() int64
	last  int64
}

// Track counts, under name, how far total (a running count that only
// grows, read at every flush) moved since the flush before.
func (r *Recorder) Track(name string, total func() int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tracks = append(r.tracks, &track{name: name, total: total, last: total()})
}

// Observe counts one claim decision and, for a duplicate's, the tier that
// answered it.
func (r *Recorder) Observe(d driver.Decision, by idempotency.Tier) {
	m := time.Now().UTC().Truncate(time.Minute)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cur[statKey{m, strings.ToLower(string(d))}]++
	if d == driver.DecisionRepeatOther || d == driver.DecisionRepeatDone || d == driver.DecisionPayloadMismatch {
		name := StatStoreConflict
		switch by {
		case idempotency.TierFast:
			name = StatFastReject
		case idempotency.TierCache:
			name = StatCacheAnswer
		}
		r.cur[statKey{m, name}]++
	}
}

func (r *Recorder) loop(every time.Duration) {
	defer close(r.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			r.Flush(context.Background())
			return
		case <-t.C:
			r.Flush(context.Background())
		}
	}
}

// Flush adds what was counted to the sink; on failure the counts are kept
// for the next flush. That is right for a failure that wrote nothing (a
// node refusing queries, five aborts, a connection refused), and doubles
// the batch once when the write did land but its answer was lost (a
// connection dropped after COMMIT, the timeout expiring there): accepted,
// for these are counters for a chart, rare to double, where dropping the
// batch on every unclear error would lose counts on each outage instead.
// The logs give the exact figures (docs/operations.md, Stats).
func (r *Recorder) Flush(ctx context.Context) {
	r.mu.Lock()
	m := time.Now().UTC().Truncate(time.Minute)
	for _, t := range r.tracks {
		if now := t.total(); now > t.last {
			r.cur[statKey{m, t.name}] += now - t.last
			t.last = now
		}
	}
	batch := r.cur
	r.cur = map[statKey]int64{}
	r.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	rows := make([]driver.StatRow, 0, len(batch))
	for k, n := range batch {
		rows = append(rows, driver.StatRow{Minute: k.minute, Name: k.name, Count: n})
	}
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := r.sink.AddStats(c, rows); err != nil {
		r.log.WarnContext(ctx, "stats flush failed; keeping the counts", "error", err.Error())
		r.mu.Lock()
		for k, n := range batch {
			r.cur[k] += n
		}
		r.mu.Unlock()
	}
}

// Close flushes and stops.
func (r *Recorder) Close() error {
	close(r.stop)
	<-r.done
	return nil
}
