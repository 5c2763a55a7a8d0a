// Package benchmarks measures the engine against the raw store operations it
// needs, side by side in one run, because shared machines are too noisy for
// absolute figures. Run:
//
//	go test -run '^$' -bench . -benchtime 3000x ./idempotency/benchmarks/
//
// Each benchmark alternates the raw baseline and the engine in small batches
// and reports both ns/op and their ratio ("x-raw").
package benchmarks
