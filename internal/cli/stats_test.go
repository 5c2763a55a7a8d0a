package cli

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/idempotency/driver"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestWriteStatsGolden(t *testing.T) {
	m0 := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	row := func(min int, name string, n int64) driver.StatRow {
		return driver.StatRow{Minute: m0.Add(time.Duration(min) * time.Minute), Name: name, Count: n}
	}
	cases := []struct {
		name string
		rows []driver.StatRow
	}{
		{"empty", nil},
		{"a retry storm with a quiet minute", []driver.StatRow{
			row(0, "first", 40), row(0, "repeat_done", 2),
			row(1, "first", 30), row(1, "repeat_done", 25), row(1, "takeover", 5), row(1, "repeat_other", 10),
			row(1, "fast_reject", 20), row(1, "cache_answer", 12), row(1, "store_conflict", 3), row(0, "cache_answer", 2),
			row(3, "first", 1), row(3, "repeat_same", 1)}},
	}
	var b bytes.Buffer
	for _, c := range cases {
		b.WriteString("== " + c.name + "\n")
		writeStats(&b, handler.StatsByMinute(c.rows))
	}
	golden(t, "stats.golden", b.String())
}

func TestBars(t *testing.T) {
	cases := []struct {
		name string
		got  string
		want string
	}{
		{"peak fills the bar", claimsBar(handler.MinuteStats{Claims: 10, First: 10}, 10), strings.Repeat("█", claimsWidth)},
		{"one claim of many still shows", claimsBar(handler.MinuteStats{Claims: 1, RepeatDone: 1}, 1000),
			"░" + strings.Repeat(" ", claimsWidth-1)},
		{"no claims", claimsBar(handler.MinuteStats{}, 5), strings.Repeat(" ", claimsWidth)},
		{"split by fate", claimsBar(handler.MinuteStats{Claims: 4, First: 2, Takeover: 1, RepeatDone: 1}, 4),
			strings.Repeat("█", 20) + strings.Repeat("▓", 10) + strings.Repeat("░", 10)},
		{"rate zero", rateBar(0), "▕" + strings.Repeat(" ", rateWidth) + "▏"},
		{"rate full", rateBar(1), "▕" + strings.Repeat("█", rateWidth) + "▏"},
		{"rate in eighths", rateBar(0.2625), "▕██▋       ▏"},
		{"rate clamped", rateBar(2), "▕" + strings.Repeat("█", rateWidth) + "▏"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.got != c.want {
				t.Fatalf("got %q, want %q", c.got, c.want)
			}
		})
	}
}
