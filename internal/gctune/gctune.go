// Package gctune sets the garbage collector for a process serving inside an
// FC instance, from the instance's memory (serve, and the load test's raw
// function, which must be judged on the same settings).
package gctune

import (
	"math"
	"runtime/debug"
	"strconv"
)

// gcPercent is the GOGC an FC instance serves with: the live heap is a few MB,
// so GOGC=100 collects every few MB allocated, about every hundred duplicates,
// and the collections cost a duplicate ≈ 33 µs of CPU where GOGC=400 costs ≈ 2
// (GODEBUG=gctrace=1 over 15 000 duplicates, BENCHMARKS.md, "What remains,
// profiled"). Higher gained nothing more: a larger heap runs out of cache.
const gcPercent = 400

// gcLimitShare is the share of the instance's memory that the heap is held
// under (GOMEMLIMIT): a soft limit, so that a high GOGC collects sooner
// rather than run the instance out of memory; the rest is the stacks, the
// runtime's own and the binary.
const gcLimitShare = 0.8

// Settings is what serve sets in place of Go's defaults: a memory limit
// from FC's FC_FUNCTION_MEMORY_SIZE (the instance's memory, MB) unless
// GOMEMLIMIT is set, and gcPercent unless GOGC is set, only where a limit is
// known (FC's, or the user's). The user's own GOGC and GOMEMLIMIT, which Go
// reads at start, always win. Zero values: leave the runtime as it is.
func Settings(getenv func(string) string) (percent int, limit int64) {
	userLimit := getenv("GOMEMLIMIT") != ""
	if mb, err := strconv.ParseInt(getenv("FC_FUNCTION_MEMORY_SIZE"), 10, 64); err == nil && mb > 0 && mb < 1<<40 && !userLimit {
		limit = int64(math.Floor(float64(mb<<20) * gcLimitShare))
	}
	if getenv("GOGC") == "" && (limit > 0 || userLimit) {
		percent = gcPercent
	}
	return percent, limit
}

// Tune applies Settings to the runtime.
func Tune(getenv func(string) string) (percent int, limit int64) {
	percent, limit = Settings(getenv)
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	if percent > 0 {
		debug.SetGCPercent(percent)
	}
	return percent, limit
}
