package benchmarks

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"flag"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/mysqlstore"
	"github.com/idemgate/idemgate/idempotency/redisfast"
	"github.com/idemgate/idemgate/internal/dev/bare"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// privateMySQL runs the benchmarks on a MariaDB server of their own, which
// no other client of a shared machine's server slows down (it still shares
// the CPU).
var privateMySQL = flag.Bool("private-mysql", false, "run on a private MariaDB server (testenv.PrivateMariaDB)")

// quiet discards the engines' log lines.
var quiet = idempotency.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

type rig struct {
	store *mysqlstore.Store
	rdb   redis.UniversalClient
	eng   *idempotency.Engine
	// prefix starts every Redis key of the benchmark (testenv.RedisPrefix).
	prefix string
}

func setup(b *testing.B) rig {
	b.Helper()
	dsn := testenv.MySQLDSN(b)
	if *privateMySQL {
		dsn = testenv.PrivateMariaDB(b)
	}
	s, err := mysqlstore.Open(dsn, mysqlstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	prefix := testenv.RedisPrefix(b)
	rdb, err := redisfast.Dial(testenv.RedisURL(b), 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rdb.Close() })
	fast, err := redisfast.New(rdb, redisfast.MaxTTL, redisfast.WithKeyPrefix(prefix))
	if err != nil {
		b.Fatal(err)
	}
	// A generous fast-layer bound: on a saturated shared machine a Redis call
	// can pass the default 50 ms, and the back-off would then send the
	// duplicates to MySQL, measuring another path.
	eng := idempotency.New(s, idempotency.WithFastLayer(fast), idempotency.WithFastTimeout(time.Second), quiet)
	return rig{store: s, rdb: rdb, eng: eng, prefix: prefix}
}

func newKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// interleave runs raw and engine in alternating batches of 50 and reports
// both costs and their ratio.
func interleave(b *testing.B, raw, eng func(i int)) {
	const batch = 50
	var tRaw, tEng time.Duration
	var nRaw, nEng int
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		n := min(batch, b.N-i)
		start := time.Now()
		for j := range n {
			raw(i + j)
		}
		tRaw += time.Since(start)
		nRaw += n
		start = time.Now()
		for j := range n {
			eng(i + j)
		}
		tEng += time.Since(start)
		nEng += n
	}
	b.StopTimer()
	rawNs := float64(tRaw.Nanoseconds()) / float64(nRaw)
	engNs := float64(tEng.Nanoseconds()) / float64(nEng)
	b.ReportMetric(rawNs, "raw-ns/op")
	b.ReportMetric(engNs, "engine-ns/op")
	b.ReportMetric(engNs/rawNs, "x-raw")
	b.ReportMetric(0, "ns/op") // the two figures above are the measurement
}

// BenchmarkClaimComplete: Engine.Claim (Redis claim + MySQL insert) then
// Lease.Complete (MySQL update + Redis publish) against the raw MySQL floor,
// one INSERT into the unique key plus one UPDATE.
func BenchmarkClaimComplete(b *testing.B) {
	r := setup(b)
	db := r.store.DB()
	raw := func(int) {
		k := newKey()
		rawInsertUpdate(b, db, k)
	}
	interleave(b, raw, claimComplete(b, r))
}

// claimComplete is the engine's side of the claim+complete benchmarks: a
// Claim of a new key and its Complete.
func claimComplete(b *testing.B, r rig) func(int) {
	ctx := context.Background()
	return func(int) {
		_, l, err := r.eng.Claim(ctx, idempotency.ClaimRequest{Key: newKey(), Owner: "bench", PayloadHash: "ph"})
		if err != nil || l == nil {
			b.Fatal(err)
		}
		if err := l.Complete(ctx, "ref"); err != nil {
			b.Fatal(err)
		}
	}
}

// rawInsertUpdate is the raw MySQL floor of a claim+complete: one INSERT into
// the unique key, one UPDATE.
func rawInsertUpdate(b *testing.B, db *sql.DB, k string) {
	if err := insertUpdate(context.Background(), db, k); err != nil {
		b.Fatal(err)
	}
}

// insertUpdate is rawInsertUpdate's statements, for goroutines that cannot
// fail the benchmark themselves.
func insertUpdate(ctx context.Context, db *sql.DB, k string) error {
	if _, err := db.ExecContext(ctx, `INSERT INTO idempotency_record (request_id, status, attempt, fence,
 lease_owner, lease_until, payload_hash) VALUES (?, 'RUNNING', 1, 1, 'raw', NOW(3) + INTERVAL 60 SECOND, 'ph')`, k); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, `UPDATE idempotency_record SET status = 'SUCCEEDED', result_ref = 'ref',
 lease_until = NULL, updated_at = NOW(3) WHERE request_id = ? AND fence = 1 AND status = 'RUNNING'`, k)
	return err
}

// setIfAbsent is the raw fast-path floor: one EVALSHA of the smallest claim,
// the load test's too.
var setIfAbsent = bare.SetIfAbsent

// BenchmarkDuplicateRedis: a duplicate of a SUCCEEDED key answered by the
// Redis layer, against one EVALSHA of a set-if-absent script.
func BenchmarkDuplicateRedis(b *testing.B) {
	r := setup(b)
	duplicates(b, r, r.eng, "redis")
}

// BenchmarkDuplicateLocalCache: a duplicate of a SUCCEEDED key answered by
// the instance's own cache (WithLocalCache), against the same EVALSHA floor:
// what the cache saves an instance that sees a key twice.
func BenchmarkDuplicateLocalCache(b *testing.B) {
	r := setup(b)
	eng := idempotency.New(r.store, idempotency.WithLocalCache(1024, time.Minute), quiet)
	duplicates(b, r, eng, "cache")
}

// duplicates finishes a key with eng, then times its duplicates, which
// source must answer, against the set-if-absent EVALSHA.
func duplicates(b *testing.B, r rig, eng *idempotency.Engine, source string) {
	ctx := context.Background()
	key := newKey()
	if _, err := eng.Do(ctx, idempotency.ClaimRequest{Key: key, Owner: "bench", PayloadHash: "ph"},
		func(context.Context, *idempotency.Lease) (string, error) { return "ref", nil }); err != nil {
		b.Fatal(err)
	}
	rawKey := r.prefix + "bench:raw:" + newKey()
	raw := func(int) {
		if err := setIfAbsent.Run(ctx, r.rdb, []string{rawKey}, "x", 300000).Err(); err != nil {
			b.Fatal(err)
		}
	}
	dup := func(int) {
		res, l, err := eng.Claim(ctx, idempotency.ClaimRequest{Key: key, Owner: "dup", PayloadHash: "ph"})
		if err != nil || l != nil || res.Source != source {
			b.Fatalf("duplicate not answered by %s: %+v %v", source, res, err)
		}
	}
	interleave(b, raw, dup)
}

// BenchmarkClaimCompleteAllOps compares the same engine path with every raw
// operation it performs: one EVALSHA to claim, one INSERT, one UPDATE, one
// EVALSHA to publish the terminal state.
func BenchmarkClaimCompleteAllOps(b *testing.B) {
	r := setup(b)
	ctx := context.Background()
	db := r.store.DB()
	raw := func(int) {
		k := newKey()
		if err := setIfAbsent.Run(ctx, r.rdb, []string{r.prefix + "bench:raw:" + k}, "x", 300000).Err(); err != nil {
			b.Fatal(err)
		}
		rawInsertUpdate(b, db, k)
		if err := setIfAbsent.Run(ctx, r.rdb, []string{r.prefix + "bench:raw:" + k}, "y", 300000).Err(); err != nil {
			b.Fatal(err)
		}
	}
	interleave(b, raw, claimComplete(b, r))
}
