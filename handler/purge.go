package handler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
)

// Retention is how long the purge keeps what it deletes (internal/config:
// RETENTION_DAYS, STATS_RETENTION_DAYS).
type Retention struct {
	// Records: a terminal record stays whole this long after its last
	// change; the purge then retires it to its tombstone (the dedup window
	// is the tombstone's age: TombstoneAge).
	Records time.Duration
	Stats   time.Duration // stats minutes
	// Tombstones: a purged record's tombstone stays this long after its
	// last change, as long as the key's objects may live (0:
	// driver.DefaultTombstoneAge; never less than Records).
	Tombstones time.Duration
}

// PurgeOptions bound one purge; zero values take the pipeline's Retention
// and the defaults.
type PurgeOptions struct {
	OlderThan, StatsOlderThan time.Duration
	Limit                     int           // rows of each kind per batch (driver.DefaultPurgeLimit)
	Budget                    time.Duration // wall time (default 90 s, inside the function's 120 s)
	// DryRun counts one batch of what the purge would delete, and deletes
	// nothing (its More says whether more than one batch is due).
	DryRun bool
	// Progress, when set, is called after each batch with the report so
	// far (main purge prints progress lines from it).
	Progress func(PurgeReport)
}

// PurgeReport is the purge's answer (the purge timer's outcome, main purge's
// output): the counts of every batch, and more when the budget ran out
// before the purge did.
type PurgeReport struct {
	driver.PurgeReport
	Batches        int    `json:"batches"`
	DryRun         bool   `json:"dry_run,omitempty"`
	OlderThan      string `json:"older_than"`
	StatsOlderThan string `json:"stats_older_than"`
}

// Purge deletes what outlived the retention, batch after batch (see
// driver.Maintainer.Purge), until nothing more is due or the budget or
// ctx ends. Traffic, the sweeper and another purge may run meanwhile.
func (p *Pipeline) Purge(ctx context.Context, o PurgeOptions) (PurgeReport, error) {
	m := p.maint()
	if m == nil {
		return PurgeReport{}, errNoMaint
	}
	if o.OlderThan <= 0 {
		o.OlderThan = p.Retention.Records
	}
	if o.StatsOlderThan <= 0 {
		o.StatsOlderThan = p.Retention.Stats
	}
	if o.OlderThan <= 0 {
		return PurgeReport{}, idempotency.Final("invalid_request", errors.New("purge: no retention configured"))
	}
	if o.Budget <= 0 {
		o.Budget = 90 * time.Second
	}
	end := time.Now().Add(o.Budget)
	rep := PurgeReport{OlderThan: o.OlderThan.String(), StatsOlderThan: o.StatsOlderThan.String(), DryRun: o.DryRun}
	for {
		b, err := m.Purge(ctx, driver.PurgeRequest{OlderThan: o.OlderThan, StatsOlderThan: o.StatsOlderThan,
			Limit: o.Limit, TombstonesOlderThan: p.Retention.Tombstones, DryRun: o.DryRun})
		rep.Add(b)
		rep.Batches++
		if o.Progress != nil {
			o.Progress(rep)
		}
		if err != nil {
			p.logPurge(ctx, rep, err)
			return rep, fmt.Errorf("purge: %w", err)
		}
		if !b.More || o.DryRun || ctx.Err() != nil || time.Now().After(end) { // a dry batch again would count the same rows
			break
		}
	}
	p.logPurge(ctx, rep, nil)
	return rep, nil
}

func (p *Pipeline) logPurge(ctx context.Context, rep PurgeReport, err error) {
	attrs := []any{"purged_records", rep.Records, "purged_steps", rep.Steps, "purged_replays", rep.Replays,
		"purged_stats", rep.Stats, "purged_tombstones", rep.Tombstones, "more", rep.More, "batches", rep.Batches}
	if err != nil {
		p.Log.WarnContext(ctx, "purge failed", append(attrs, "error", err.Error())...)
		return
	}
	msg := "purge done"
	if rep.DryRun {
		msg = "purge dry run done, nothing deleted"
	}
	p.Log.InfoContext(ctx, msg, attrs...)
}

// purgeTimer answers the daily timer with payload "purge".
func (p *Pipeline) purgeTimer(ctx context.Context) Reply {
	rep, err := p.Purge(ctx, PurgeOptions{Budget: budgetWithin(ctx, 90*time.Second)})
	if err != nil {
		o := failure(Outcome{}, err)
		return reply(o, true, o.ErrorType)
	}
	return reply(rep, false, "")
}

// budgetWithin is d, or less so that the work ends 10 s before ctx's
// deadline (the invocation still has to answer).
func budgetWithin(ctx context.Context, d time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)-10*time.Second)
	}
	return max(d, time.Second)
}

// DedupWindowOpen is DedupWindowEnds of a record no purge may delete yet.
const DedupWindowOpen = "open"

// DedupWindowEnds says when rec's dedup window ends (a duplicate then runs
// again): when its tombstone goes, tombstoneAge (Retention.TombstoneAge)
// after its last change, RFC 3339 in UTC, for a record a purge may retire
// (driver.Purgeable) or a tombstone; DedupWindowOpen while it is neither
// (running, retrying, a finish pending or failed: any change starts the
// count again).
func DedupWindowEnds(rec driver.Record, tombstoneAge time.Duration) string {
	if !rec.Tombstone && !driver.Purgeable(rec) {
		return DedupWindowOpen
	}
	return rec.UpdatedAt.Add(tombstoneAge).UTC().Format(time.RFC3339)
}

// TombstoneAge is how long after its last change a finished record's
// tombstone goes: Tombstones (driver.DefaultTombstoneAge when 0), never less
// than Records — as the store's purge computes it (driver.PurgeRequest.Check).
func (r Retention) TombstoneAge() time.Duration {
	t := r.Tombstones
	if t <= 0 {
		t = driver.DefaultTombstoneAge
	}
	return max(t, r.Records)
}
