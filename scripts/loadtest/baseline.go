package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/mysqlstore"
	"github.com/idemgate/idemgate/idempotency/redisfast"
	"github.com/idemgate/idemgate/internal/dev/bare"
	"github.com/idemgate/idemgate/internal/dev/rawpipe"
)

// setIfAbsent is the raw fast-path floor: one EVALSHA of the smallest claim.
var setIfAbsent = bare.SetIfAbsent

// Baselines holds the clients of the in-process comparisons. The clients are
// built like the function's (mysqlstore.Open, redisfast.Dial), so pool sizes
// and driver settings match.
type Baselines struct {
	store  *mysqlstore.Store
	rdb    redis.UniversalClient
	eng    *idempotency.Engine
	bare   *http.Server
	Bare   string // base URL of the in-process bare handler
	ln     net.Listener
	prefix string // of every Redis key (OpenBaselines)
}

const scratchTable = rawpipe.ScratchTable

// OpenBaselines connects, migrates (idempotent), creates the scratch table
// and starts the in-process bare handler on loopback. Every Redis key is
// under prefix (Options.RedisKeyPrefix). Without redisURL only the MySQL
// pool is opened (for the verification).
func OpenBaselines(ctx context.Context, dsn, redisURL, prefix string) (*Baselines, error) {
	s, err := mysqlstore.Open(dsn, mysqlstore.Options{})
	if err != nil {
		return nil, err
	}
	b := &Baselines{store: s, prefix: prefix}
	if _, err := s.Migrate(ctx); err != nil {
		b.Close()
		return nil, err
	}
	if _, err := s.DB().ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+scratchTable+" LIKE idempotency_record"); err != nil {
		b.Close()
		return nil, fmt.Errorf("scratch table: %w", err)
	}
	if redisURL == "" { // -redis=false without baselines: the MySQL check only
		return b, nil
	}
	if b.rdb, err = redisfast.Dial(redisURL, 0); err != nil {
		b.Close()
		return nil, err
	}
	if err := b.rdb.Ping(ctx).Err(); err != nil {
		b.Close()
		return nil, fmt.Errorf("redis: %w", err)
	}
	fast, err := redisfast.New(b.rdb, redisfast.MaxTTL, redisfast.WithKeyPrefix(prefix))
	if err != nil {
		b.Close()
		return nil, err
	}
	b.eng = idempotency.New(s, idempotency.WithFastLayer(fast),
		idempotency.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if b.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		b.Close()
		return nil, err
	}
	b.Bare = "http://" + b.ln.Addr().String()
	b.bare = &http.Server{Handler: bare.Handler(b.rdb, prefix), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = b.bare.Serve(b.ln) }()
	return b, nil
}

// Close stops the bare handler and closes the clients.
func (b *Baselines) Close() {
	if b.bare != nil {
		c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = b.bare.Shutdown(c)
		cancel()
	}
	if b.rdb != nil {
		b.rdb.Close()
	}
	if b.store != nil {
		b.store.Close()
	}
}

func randKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// RawEvalsha: one EVALSHA of set-if-absent per op, on keys that mostly exist
// already (the duplicate case).
func (b *Baselines) RawEvalsha(nonce string) func(context.Context, int) error {
	return func(ctx context.Context, i int) error {
		return setIfAbsent.Run(ctx, b.rdb, []string{b.prefix + "loadtest:raw:" + nonce + ":" + strconv.Itoa(i%1000)}, "x", 300000).Err()
	}
}

// RawInsertUpdate: an INSERT into the scratch table's unique key plus the
// fenced UPDATE, the statements of the library benchmark's raw floor.
func (b *Baselines) RawInsertUpdate() func(context.Context, int) error {
	db := b.store.DB()
	return func(ctx context.Context, _ int) error {
		k := randKey()
		if err := rawpipe.Insert(ctx, db, k); err != nil {
			return err
		}
		return rawpipe.Complete(ctx, db, k)
	}
}

// RawAllOps: every raw operation the engine's claim+complete performs, on
// the scratch table and a scratch Redis key — EVALSHA (claim), INSERT,
// UPDATE, EVALSHA (publish) — as the library's BenchmarkClaimCompleteAllOps.
func (b *Baselines) RawAllOps() func(context.Context, int) error {
	insertUpdate := b.RawInsertUpdate()
	return func(ctx context.Context, i int) error {
		k := b.prefix + "loadtest:allops:" + randKey()
		if err := setIfAbsent.Run(ctx, b.rdb, []string{k}, "x", 300000).Err(); err != nil {
			return err
		}
		if err := insertUpdate(ctx, i); err != nil {
			return err
		}
		return setIfAbsent.Run(ctx, b.rdb, []string{k}, "y", 300000).Err()
	}
}

// EngineClaimComplete: the library's Engine.Claim (Redis claim + MySQL
// insert) and Lease.Complete (MySQL update + Redis publish) on a new key.
func (b *Baselines) EngineClaimComplete() func(context.Context, int) error {
	return func(ctx context.Context, _ int) error {
		_, l, err := b.eng.Claim(ctx, idempotency.ClaimRequest{Key: randKey(), Owner: "loadtest", PayloadHash: "ph"})
		if err != nil {
			return err
		}
		if l == nil {
			return errors.New("a new key was not owned")
		}
		return l.Complete(ctx, "ref")
	}
}

// EngineDuplicateRedis: Engine.Claim of a finished key, which the Redis layer
// must answer.
func (b *Baselines) EngineDuplicateRedis(ctx context.Context) (func(context.Context, int) error, error) {
	key := randKey()
	if _, err := b.eng.Do(ctx, idempotency.ClaimRequest{Key: key, Owner: "loadtest", PayloadHash: "ph"},
		func(context.Context, *idempotency.Lease) (string, error) { return "ref", nil }); err != nil {
		return nil, err
	}
	return func(ctx context.Context, _ int) error {
		res, l, err := b.eng.Claim(ctx, idempotency.ClaimRequest{Key: key, Owner: "dup", PayloadHash: "ph"})
		if err != nil {
			return err
		}
		if l != nil || res.Source != "redis" {
			return fmt.Errorf("duplicate not answered by Redis (source %q)", res.Source)
		}
		return nil
	}, nil
}

// DB is the baseline's pool (verification queries).
func (b *Baselines) DB() *sql.DB { return b.store.DB() }
