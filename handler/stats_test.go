package handler

import (
	"slices"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
)

// Every decision the engine counts is a claim decision, and duplicates are
// exactly the decisions the outcome marks "duplicate".
func TestClaimDecisionsCoverTheEngine(t *testing.T) {
	counted := idempotency.New(nil).Stats().Decisions
	if len(counted) != len(ClaimDecisions) {
		t.Fatalf("the engine counts %d decisions, ClaimDecisions lists %d", len(counted), len(ClaimDecisions))
	}
	for d := range counted {
		if !slices.Contains(ClaimDecisions, d) {
			t.Errorf("the engine counts %s, which ClaimDecisions lacks", d)
		}
		if slices.Contains(DuplicateDecisions(), d) != d.Duplicate() {
			t.Errorf("%s: DuplicateDecisions disagrees with Decision.Duplicate", d)
		}
	}
	if slices.Contains(DuplicateDecisions(), idempotency.DecisionFirst) || len(DuplicateDecisions()) != len(ClaimDecisions)-1 {
		t.Errorf("duplicates %v: want every claim decision but FIRST", DuplicateDecisions())
	}
}

func TestStatsByMinute(t *testing.T) {
	m0 := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	m1 := m0.Add(time.Minute)
	row := func(m time.Time, name string, n int64) driver.StatRow {
		return driver.StatRow{Minute: m, Name: name, Count: n}
	}
	cases := []struct {
		name string
		rows []driver.StatRow
		want []MinuteStats
	}{
		{"no rows", nil, []MinuteStats{}},
		{"firsts only", []driver.StatRow{row(m0, "first", 4)},
			[]MinuteStats{{Minute: m0, Claims: 4, First: 4}}},
		{"every decision counts once; only FIRST is not a duplicate", []driver.StatRow{
			row(m0, "first", 4), row(m0, "repeat_same", 1), row(m0, "takeover", 2), row(m0, "repeat_other", 3),
			row(m0, "repeat_done", 5), row(m0, "payload_mismatch", 1), row(m0, "fast_reject", 5), row(m0, "cache_answer", 1),
			row(m0, "store_conflict", 3)},
			[]MinuteStats{{Minute: m0, Claims: 16, First: 4, RepeatSame: 1, Takeover: 2, RepeatOther: 3, RepeatDone: 5,
				Mismatch: 1, FastRejects: 5, CacheAnswers: 1, StoreConflicts: 3, Duplicates: 12, DuplicateRate: 0.75}}},
		{"minutes apart, oldest first; rows of one minute add up", []driver.StatRow{
			row(m1, "first", 1), row(m0, "repeat_done", 1), row(m0, "first", 1), row(m0, "repeat_done", 2)},
			[]MinuteStats{{Minute: m0, Claims: 4, First: 1, RepeatDone: 3, Duplicates: 3, DuplicateRate: 0.75},
				{Minute: m1, Claims: 1, First: 1}}},
		{"rejection counters alone are no claims", []driver.StatRow{row(m0, "fast_reject", 2), row(m0, "unknown", 9)},
			[]MinuteStats{{Minute: m0, FastRejects: 2}}},
		{"the store's retried aborts are no claims", []driver.StatRow{row(m0, "store_abort_retried", 3)},
			[]MinuteStats{{Minute: m0, StoreAbortsRetried: 3}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := StatsByMinute(c.rows)
			if !slices.Equal(got, c.want) {
				t.Fatalf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestOldestAgeSeconds(t *testing.T) {
	now := time.Now()
	cases := []struct {
		name  string
		cands []driver.Record
		min   int64
		max   int64
	}{
		{"none", nil, 0, 0},
		{"the oldest wins", []driver.Record{{CreatedAt: now.Add(-time.Minute)}, {CreatedAt: now.Add(-20 * time.Minute)},
			{CreatedAt: now.Add(-2 * time.Minute)}}, 1200, 1205},
		{"a record without a creation time is skipped", []driver.Record{{}, {CreatedAt: now.Add(-30 * time.Second)}}, 30, 35},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := oldestAgeSeconds(c.cands); got < c.min || got > c.max {
				t.Fatalf("age %d s, want %d..%d", got, c.min, c.max)
			}
		})
	}
}
