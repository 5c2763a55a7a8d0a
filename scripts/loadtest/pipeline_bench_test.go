package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/event"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/keys"
	"github.com/idemgate/idemgate/internal/app"
	"github.com/idemgate/idemgate/internal/config"
	"github.com/idemgate/idemgate/internal/dev/proc"
	"github.com/idemgate/idemgate/internal/dev/testenv"
	"github.com/idemgate/idemgate/internal/logx"
)

// The benchmarks below take the function's duplicate path apart in-process
// (no HTTP, logs formatted but discarded), to show where its CPU goes:
//
//	go test -run '^$' -bench Duplicate -benchmem -cpuprofile /tmp/dup.pprof ./scripts/loadtest/
//	go tool pprof -top -cum /tmp/dup.pprof | head -40

func sampleEvent() []byte {
	return cloudEvent("bench-event-1", map[string]any{"tenant_id": "acme", "task_type": "summarize",
		"operation": "summarize", "request_id": "req-bench-1",
		"input": map[string]any{"content": "[bench] " + filler, "language": "en", "max_words": 60}})
}

// BenchmarkPipelineDuplicateRedis: Pipeline.Handle of a finished key, answered
// by the Redis layer — the function's whole duplicate path minus net/http.
func BenchmarkPipelineDuplicateRedis(b *testing.B) {
	a, body := finishedKey(b, io.Discard)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep := a.Pipeline.Handle(ctx, body, handler.Meta{RequestID: "dup", RetryCount: -1})
		if rep.Status != 200 {
			b.Fatalf("duplicate: %d %s", rep.Status, rep.Body)
		}
	}
}

// finishedKey opens the function's app on MySQL and Redis (logs to w) and
// runs one event to completion; duplicates of body are then answered by Redis.
func finishedKey(b *testing.B, w io.Writer) (*app.App, []byte) {
	a := openApp(b, map[string]string{"MYSQL_DSN": testenv.FreshMySQLDSN(b), "REDIS_URL": testenv.RedisURL(b),
		"REDIS_KEY_PREFIX": testenv.RedisPrefix(b),
		"LLM_MODEL":        "offline", "STATE_DIR": b.TempDir()}, w)
	ctx := context.Background()
	body := cloudEvent("bench-"+proc.Nonce(), map[string]any{"tenant_id": "acme", "task_type": "summarize",
		"operation": "summarize", "input": map[string]any{"content": "[bench " + proc.Nonce() + "] " + filler}})
	if rep := a.Pipeline.Handle(ctx, body, handler.Meta{RequestID: "first", RetryCount: -1}); rep.Status != 200 {
		b.Fatalf("first: %d %s", rep.Status, rep.Body)
	}
	return a, body
}

// openApp opens the function's app on env (logs to w) and migrates its
// database; it is closed when b ends.
func openApp(b *testing.B, env map[string]string, w io.Writer) *app.App {
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		b.Fatal(err)
	}
	red := &logx.Redactor{}
	a, err := app.Open(cfg, logx.New(w, slog.LevelInfo, red), red)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	if _, err := a.MySQL.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	return a
}

// BenchmarkDuplicateEventParse: event.Parse of one EventBridge event (strict
// JSON check, CloudEvents envelope, task data).
func BenchmarkDuplicateEventParse(b *testing.B) {
	body := sampleEvent()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := event.Parse(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDuplicateKeys: the business key and the fingerprint (JCS + sha256).
func BenchmarkDuplicateKeys(b *testing.B) {
	inv, err := event.Parse(sampleEvent())
	if err != nil {
		b.Fatal(err)
	}
	t := inv.Tasks[0]
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := keys.Derive(keys.Fields{TenantID: t.TenantID, TaskType: t.TaskType, Operation: t.Operation,
			Input: t.Input, InputVersion: t.InputVersion, IdempotencyKey: t.IdempotencyKey}); err != nil {
			b.Fatal(err)
		}
		if _, err := keys.Fingerprint(t.Data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaimCompleteParts splits the engine's claim+complete against the
// raw INSERT+UPDATE floor (scratch table), one of each per iteration in turn:
// the engine on MySQL alone (its MySQL part: insert-if-absent + fenced
// update) and the engine with the Redis layer (adds the claim EVALSHA before
// and the publish EVALSHA after). Only the engine's public API is used.
func BenchmarkClaimCompleteParts(b *testing.B) {
	ctx := context.Background()
	bl, err := OpenBaselines(ctx, testenv.FreshMySQLDSN(b), testenv.RedisURL(b), testenv.RedisPrefix(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(bl.Close)
	quiet := idempotency.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	mysqlOnly := idempotency.New(bl.store, quiet)
	raw := bl.RawInsertUpdate()
	withRedis := bl.EngineClaimComplete()
	onMySQL := func() error {
		_, l, err := mysqlOnly.Claim(ctx, idempotency.ClaimRequest{Key: randKey(), Owner: "parts", PayloadHash: "ph"})
		if err != nil {
			return err
		}
		return l.Complete(ctx, "ref")
	}
	var tRaw, tMySQL, tFull time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		if err := raw(ctx, i); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := onMySQL(); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := withRedis(ctx, i); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		tRaw, tMySQL, tFull = tRaw+t1.Sub(t), tMySQL+t2.Sub(t1), tFull+t3.Sub(t2)
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
	b.ReportMetric(per(tRaw), "raw-ns/op")
	b.ReportMetric(per(tMySQL), "engine-mysql-ns/op")
	b.ReportMetric(per(tFull), "engine-redis+mysql-ns/op")
	b.ReportMetric(per(tMySQL)/per(tRaw), "mysql-x-raw")
	b.ReportMetric(per(tFull)/per(tRaw), "x-raw")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkPipelineFirst: Pipeline.Handle of fresh actions that ask for a
// notify POST, on MySQL and Redis, against the load test's fakes (V4-signed
// OSS, model, notify receiver) — the function's whole first delivery minus
// net/http, for a profile of where its CPU goes:
//
//	go test -run '^$' -bench PipelineFirst -benchtime 2000x -cpuprofile /tmp/first.pprof ./scripts/loadtest/
func BenchmarkPipelineFirst(b *testing.B) {
	f, err := startFakes("")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(f.close)
	env := map[string]string{"MYSQL_DSN": testenv.FreshMySQLDSN(b), "REDIS_URL": testenv.RedisURL(b),
		"REDIS_KEY_PREFIX": testenv.RedisPrefix(b)}
	for _, kv := range f.env() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	a := openApp(b, env, io.Discard)
	ctx := context.Background()
	actions := newActions(proc.Nonce(), b.N, f.notifyURL)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep := a.Pipeline.Handle(ctx, actions[i].Body, handler.Meta{RequestID: actions[i].EventID, RetryCount: -1})
		if rep.Status != 200 {
			b.Fatalf("first: %d %s", rep.Status, rep.Body)
		}
	}
}
