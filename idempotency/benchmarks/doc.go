// Package benchmarks measures the engine against the raw store operations it
// needs, side by side in one run, because shared machines are too noisy for
// absolute figures. Run:
//
//	go test -run '^$' -bench 'Claim|Duplicate' -benchtime 3000x ./idempotency/benchmarks/
//
// Each benchmark alternates the raw baseline and the engine in small batches
// and reports both ns/op and their ratio ("x-raw"). BenchmarkRatios
// measures issue #24's goals at concurrency 32 in one run (first deliveries
// with and without Redis against the raw INSERT+UPDATE, duplicates against
// their floors) and prints them; run it with -benchtime 1x. -private-mysql
// runs them on a MariaDB server of their own.
package benchmarks
