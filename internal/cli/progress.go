package cli

import (
	"flag"
	"time"
)

// progressFlag is --progress of the long runs (sweep, purge).
func progressFlag(fs *flag.FlagSet) *time.Duration {
	return durationFlag(fs, "progress", 10*time.Second, "at most one progress line (stderr, with the counts so far) per `duration`; 0: none")
}

// throttle returns a function that passes its argument to fn at most once
// per every (never when every is 0 or less): a progress line per interval,
// however many records or batches go by.
func throttle[T any](every time.Duration, fn func(T)) func(T) {
	if every <= 0 {
		return func(T) {}
	}
	next := time.Now().Add(every)
	return func(v T) {
		if now := time.Now(); !now.Before(next) {
			next = now.Add(every)
			fn(v)
		}
	}
}
