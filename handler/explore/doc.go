// Package explore is the recovery-path explorer: a deterministic, seeded
// simulation over the real pipeline (handler.Pipeline, the idempotency
// engine, the embedded and MySQL stores, the Redis fast layer, local result
// objects) with a scripted model and notifier.
//
// Each seed builds a small world — two to four business keys, one to three
// FC deliveries each with FC's retries, double submits that differ only in
// notify, explicit keys reused with another payload, sweeper runs and
// replays of dead letters — and runs it under a cooperative scheduler: every
// actor (one FC try, one sweep, one replay) is a process of its own, and at
// every point where it talks to the outside (each store, Redis, object,
// model and notify call, before and after, and the pipeline's named fault
// points) it stops and the seed decides what happens next: another actor
// runs, the clock jumps (leases expire, grace and horizons pass: the stores'
// clock moves by warp, the processes' by idempotency.WithClock, and an FC
// try's context ends at FC's timeout on it; clock_test.go), the call
// fails, the process crashes (kill -9: nothing after it runs) or pauses
// (SIGSTOP: it wakes up later as a stale worker). After the world drains and
// the sweeper has run to a standstill, the invariants of docs/design.md
// ("Recovery guarantees") are checked; some are also checked at the moment
// they could break.
//
// The world's features (FC's retry back-off, late double submits, library
// callers, the purge, object expiry, copies, the go1 runtime, …) are named
// in features_test.go and picked with `-world` (stored state written by an
// earlier version or a hand edit: stored_test.go); TestEnumerate runs every
// order of small scenarios' calls (`-enum`).
//
// Run it with `go test ./handler/explore` (a few seeds per store
// configuration), `-seeds N` for more, `-seed S` to reproduce one seed with
// its trace, `-stores bolt,mysql+redis` to pick configurations, `-stop` to
// stop at the first violation. `go run ./handler/explore/mutate -- -seeds N`
// scores it by mutation (testdata/mutants; docs/design.md §14).
package explore
