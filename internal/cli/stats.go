package cli

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/idemgate/idemgate/handler"
)

// Widths of the stats chart's bars.
const (
	claimsWidth = 40
	rateWidth   = 10
)

// Bar glyphs of the stats chart, by what became of the claims.
const (
	glyphFirst  = '█' // FIRST: a new key, run
	glyphRerun  = '▓' // REPEAT_SAME, TAKEOVER: a claimed key, run again
	glyphAnswer = '░' // REPEAT_OTHER, REPEAT_DONE, PAYLOAD_MISMATCH: answered without running
)

// writeStats prints `main stats`: a chart of the claims per minute (every
// minute from the first to the last with counters, so that gaps show) and
// the duplicate rate, a total, then the table of the numbers.
func writeStats(w io.Writer, mins []handler.MinuteStats) {
	if len(mins) == 0 {
		fmt.Fprintln(w, "no claims counted in that window (instances flush every 10 s and at pre-stop)")
		return
	}
	var peak, claims, dups int64
	for _, m := range mins {
		peak, claims, dups = max(peak, m.Claims), claims+m.Claims, dups+m.Duplicates
	}
	fmt.Fprintf(w, "claims per minute (UTC): %c first  %c run again (repeat_same, takeover)  %c answered from the record\n",
		glyphFirst, glyphRerun, glyphAnswer)
	fmt.Fprintf(w, "%-5s  %-*s  %6s  %s\n", "", claimsWidth, fmt.Sprintf("0 … %d", peak), "claims", "duplicate rate")
	byMinute := map[time.Time]handler.MinuteStats{}
	for _, m := range mins {
		byMinute[m.Minute] = m
	}
	for t := mins[0].Minute; !t.After(mins[len(mins)-1].Minute); t = t.Add(time.Minute) {
		m := byMinute[t]
		fmt.Fprintf(w, "%s │%s│ %6d  %s %5.1f%%\n", t.UTC().Format("15:04"), claimsBar(m, peak), m.Claims,
			rateBar(m.DuplicateRate), 100*m.DuplicateRate)
	}
	rate := 0.0
	if claims > 0 {
		rate = float64(dups) / float64(claims)
	}
	fmt.Fprintf(w, "total: %d claims, %d duplicates (%.1f%%)\n\n", claims, dups, 100*rate)
	writeTable(w, mins)
}

// claimsBar is m's claims scaled to peak, split by what became of them.
func claimsBar(m handler.MinuteStats, peak int64) string {
	if peak == 0 {
		return strings.Repeat(" ", claimsWidth)
	}
	cells := func(n int64) int { return int(math.Round(float64(n) * claimsWidth / float64(peak))) }
	rerun := m.RepeatSame + m.Takeover
	first, again := cells(m.First), cells(m.First+rerun)
	total := cells(m.Claims)
	if m.Claims > 0 && total == 0 {
		total = 1 // a minute with claims never looks empty
	}
	again, first = min(again, total), min(first, total)
	return strings.Repeat(string(glyphFirst), first) + strings.Repeat(string(glyphRerun), again-first) +
		strings.Repeat(string(glyphAnswer), total-again) + strings.Repeat(" ", claimsWidth-total)
}

// rateBar draws a rate in [0, 1] in eighths of a cell.
func rateBar(rate float64) string {
	eighths := int(math.Round(math.Max(0, math.Min(1, rate)) * rateWidth * 8))
	partial := []string{"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"}
	bar := strings.Repeat("█", eighths/8) + partial[eighths%8]
	return "▕" + bar + strings.Repeat(" ", rateWidth-len([]rune(bar))) + "▏"
}

// writeTable prints the numbers behind the chart; redis, cache and store
// say which tier answered the duplicates (fast_rejects, cache_answers,
// store_conflicts of --json).
func writeTable(w io.Writer, mins []handler.MinuteStats) {
	fmt.Fprintf(w, "%-16s %7s %6s %11s %8s %12s %11s %8s %10s %9s %5s %5s %5s\n", "minute (UTC)", "claims", "first", "repeat_same",
		"takeover", "repeat_other", "repeat_done", "mismatch", "duplicates", "dup_rate", "redis", "cache", "store")
	for _, b := range mins {
		fmt.Fprintf(w, "%-16s %7d %6d %11d %8d %12d %11d %8d %10d %8.2f%% %5d %5d %5d\n", b.Minute.UTC().Format("2006-01-02 15:04"),
			b.Claims, b.First, b.RepeatSame, b.Takeover, b.RepeatOther, b.RepeatDone, b.Mismatch, b.Duplicates,
			100*b.DuplicateRate, b.FastRejects, b.CacheAnswers, b.StoreConflicts)
	}
}
