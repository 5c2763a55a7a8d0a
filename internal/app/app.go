// Package app wires the function from its configuration: stores, the engine,
// result objects, the model and the pipeline. main and the tests build the
// same App, so what the tests run is what FC runs.
package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/llm"
	"github.com/idemgate/idemgate/handler/notify"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/mysqlstore"
	"github.com/idemgate/idemgate/idempotency/redisfast"
	"github.com/idemgate/idemgate/internal/config"
	"github.com/idemgate/idemgate/internal/logx"
	"github.com/idemgate/idemgate/internal/statsrec"
	"github.com/idemgate/idemgate/ossresult"
)

// App is the wired function.
type App struct {
	Cfg      config.Config
	Log      *slog.Logger
	Redactor *logx.Redactor
	Engine   *idempotency.Engine
	Pipeline *handler.Pipeline
	MySQL    *mysqlstore.Store // nil with the embedded store
	Embedded *boltstore.Store  // nil with MySQL
	recorder *statsrec.Recorder
	redis    redis.UniversalClient // nil without a fast layer
	closers  []func() error
}

// Secrets returns the secret values of cfg, for the redactor.
func Secrets(cfg config.Config) []string {
	s := []string{cfg.LLMAPIKey, cfg.AccessKeySecret, cfg.SecurityToken, cfg.NotifySigningSecret}
	if cfg.MySQLDSN != "" {
		if c, err := mysql.ParseDSN(cfg.MySQLDSN); err == nil {
			s = append(s, c.Passwd)
		}
	}
	if u, err := url.Parse(cfg.RedisURL); err == nil && u.User != nil {
		p, _ := u.User.Password()
		s = append(s, p)
	}
	return s
}

// Open builds the App. Clients connect lazily; Warm checks them.
func Open(cfg config.Config, log *slog.Logger, red *logx.Redactor) (*App, error) {
	a := &App{Cfg: cfg, Log: log, Redactor: red}
	red.Add(Secrets(cfg)...)
	var store driver.Maintainer
	if cfg.MySQLDSN != "" {
		s, err := mysqlstore.Open(cfg.MySQLDSN, mysqlstore.Options{})
		if err != nil {
			return nil, err
		}
		a.MySQL, store = s, s
		a.closers = append(a.closers, s.Close)
	} else {
		s, err := boltstore.Open(cfg.StateDir, 5*time.Second)
		if err != nil {
			return nil, stateDirError(err)
		}
		a.Embedded, store = s, s
		a.closers = append(a.closers, s.Close)
	}
	rec := statsrec.New(store, 10*time.Second, log)
	if a.MySQL != nil {
		rec.Track(statsrec.StatStoreAbortRetried, a.MySQL.AbortsRetried)
	}
	a.recorder = rec
	a.closers = append(a.closers, rec.Close) // flushed before the store closes
	opts := []idempotency.Option{idempotency.WithLease(cfg.Lease), idempotency.WithMaxAttempts(cfg.MaxAttempts),
		idempotency.WithLogger(log), idempotency.WithObserver(rec.Observe)}
	if cfg.Disabled {
		opts = append(opts, idempotency.WithDisabled())
	}
	if cfg.WaitInFlight > 0 {
		opts = append(opts, idempotency.WithWaitInFlight(cfg.WaitInFlight))
	}
	if cfg.LocalCacheSize > 0 {
		opts = append(opts, idempotency.WithLocalCache(cfg.LocalCacheSize, cfg.LocalCacheTTL))
	}
	if cfg.RedisURL != "" {
		rdb, err := redisfast.Dial(cfg.RedisURL, 0)
		if err != nil {
			a.Close()
			return nil, err
		}
		// go-redis's own lines are JSON like every other (one logger per
		// process); once the client is closed, a dial of it still under way
		// has nothing to say.
		redisfast.SetLogger(log)
		a.closers = append(a.closers, func() error { defer redisfast.SetLogger(nil); return rdb.Close() })
		a.redis = rdb
		fast, err := redisfast.New(rdb, cfg.DedupTTL, redisfast.WithKeyPrefix(cfg.RedisKeyPrefix))
		if err != nil {
			a.Close()
			return nil, err
		}
		opts = append(opts, idempotency.WithFastLayer(fast))
	}
	a.Engine = idempotency.New(store, opts...)
	// Finish marks still batched are written before the store closes.
	a.closers = append(a.closers, func() error { return a.Engine.Flush(context.Background()) })

	results, err := resultsFor(cfg)
	if err != nil {
		a.Close()
		return nil, stateDirError(err)
	}
	model, err := llm.New(llm.Config{BaseURL: cfg.LLMBaseURL, APIKey: cfg.LLMAPIKey, Model: cfg.LLMModel, Timeout: cfg.LLMTimeout})
	if err != nil {
		a.Close()
		return nil, err
	}
	a.Pipeline = Judge(cfg, log)
	a.Pipeline.Engine, a.Pipeline.Results, a.Pipeline.Model = a.Engine, results, model
	a.Pipeline.Retention = handler.Retention{Records: cfg.Retention, Stats: cfg.StatsRetention, Tombstones: cfg.TombstoneAge()}
	return a, nil
}

// Judge is the part of the pipeline that judges an event before any claim
// (task types, key fallback, notify): with no store, result store or model,
// for `main validate`; Open completes it.
func Judge(cfg config.Config, log *slog.Logger) *handler.Pipeline {
	return &handler.Pipeline{Notify: notify.New(notify.Options{Timeout: 10 * time.Second,
		Allow: cfg.NotifyAllowedHosts, SigningSecret: cfg.NotifySigningSecret}),
		Tasks: handler.Builtin(), Log: log, KeyFallback: cfg.KeyFallback == "fingerprint",
		Keys: handler.KeyRules{Key: cfg.KeyJMESPath, Payload: cfg.PayloadJMESPath}}
}

// stateDirError makes a file-system refusal of STATE_DIR (a directory that
// cannot be made, read or written) the configuration error it is, and a
// store file another process holds the store unavailable; anything else (a
// corrupt file) stays as it is.
func stateDirError(err error) error {
	var pe *fs.PathError
	switch {
	case errors.Is(err, boltstore.ErrLocked): // nothing ran: retry once the other process is gone
		return fmt.Errorf("%w: %w", idempotency.ErrStoreUnavailable, err)
	case errors.As(err, &pe):
		return &config.Error{Name: "STATE_DIR", Err: err}
	}
	return err
}

// LocalResultsDir is where result objects go without OSS.
func LocalResultsDir(cfg config.Config) string { return filepath.Join(cfg.StateDir, "results") }

func resultsFor(cfg config.Config) (handler.ResultsFor, error) {
	if !cfg.UseOSS() {
		local, err := ossresult.NewLocal(LocalResultsDir(cfg))
		if err != nil {
			return nil, err
		}
		return func(context.Context, handler.Credentials) (handler.ResultStore, error) { return local, nil }, nil
	}
	oss, err := ossresult.NewOSS(ossresult.OSSConfig{Endpoint: cfg.OSSEndpoint, Bucket: cfg.OSSBucket, Region: cfg.OSSRegion})
	if err != nil {
		return nil, err
	}
	return func(_ context.Context, c handler.Credentials) (handler.ResultStore, error) {
		creds := ossresult.Credentials{AccessKeyID: c.AccessKeyID, AccessKeySecret: c.AccessKeySecret, SecurityToken: c.SecurityToken}
		if creds.AccessKeyID == "" { // local runs and tests: the environment's credentials
			creds = ossresult.Credentials{AccessKeyID: cfg.AccessKeyID, AccessKeySecret: cfg.AccessKeySecret, SecurityToken: cfg.SecurityToken}
		}
		return oss.With(creds)
	}, nil
}

// Warm checks that the durable store answers and is migrated (FC's
// initializer, and every CLI command that uses the store). Redis is
// optional: its absence is logged by the engine when it is first used; a
// Redis too old for the fast layer's scripts is a configuration error.
func (a *App) Warm(ctx context.Context) error {
	if err := a.Ping(ctx); err != nil {
		return err
	}
	if a.redis != nil {
		if err := redisfast.CheckVersion(ctx, a.redis); errors.Is(err, redisfast.ErrTooOld) {
			return fmt.Errorf("REDIS_URL: %w", err)
		} else if err != nil {
			a.Log.WarnContext(ctx, "fast layer not checked", "error", err.Error())
		}
	}
	if a.MySQL == nil {
		return nil
	}
	return a.checkSchema(ctx)
}

// Answered probes the durable store and the fast layer, each bounded by
// ctx, for the start line: "answered", "none" (not configured) or what went
// wrong, and the Redis version that answered. Results and the model are
// used, and so checked, at the first task. migrating: the command is the
// migration itself, so a database that does not exist is said as the
// server said it, not with the advice to run the migration.
func (a *App) Answered(ctx context.Context, migrating bool) (store, fast string) {
	store, fast = "answered", "none"
	ping := a.Ping
	if migrating {
		ping = a.reach
	}
	if err := ping(ctx); err != nil {
		store = a.Redactor.Redact(err.Error())
	}
	if a.redis != nil {
		v, err := redisfast.ServerVersion(ctx, a.redis)
		switch {
		case err != nil:
			fast = a.Redactor.Redact(err.Error())
		default:
			fast = "answered (redis " + v + ")"
		}
	}
	return store, fast
}

// Ping checks that the durable store answers. A database that does not
// exist is schema_missing, with the command that creates it.
func (a *App) Ping(ctx context.Context) error {
	err := a.reach(ctx)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1049 { // ER_BAD_DB_ERROR
		return schemaMissing(err, "main migrate --create-database")
	}
	return err
}

// reach is Ping without the advice: whether the store answers.
func (a *App) reach(ctx context.Context) error {
	if a.MySQL == nil {
		return nil
	}
	if err := a.MySQL.Ping(ctx); err != nil {
		return fmt.Errorf("%w: %w", idempotency.ErrStoreUnavailable, err)
	}
	return nil
}

// PreStop flushes the decision counters and the batched finish marks to the
// store (FC's pre-stop). It keeps every client open: FC calls pre-stop
// before a freeze too, and a thawed instance must serve. Counts that cannot
// be written are kept for the next flush; finish marks are not (the sweeper
// finishes those tasks again, which only publishes again).
func (a *App) PreStop(ctx context.Context) error {
	a.recorder.Flush(ctx)
	return a.Engine.Flush(ctx)
}

// SchemaTables are the tables `main migrate` creates.
var SchemaTables = []string{"idempotency_record", "idempotency_replay", "idempotency_stats"}

func (a *App) checkSchema(ctx context.Context) error {
	rows, err := a.MySQL.DB().QueryContext(ctx, `SELECT table_name FROM information_schema.tables
 WHERE table_schema = DATABASE() AND table_name IN (?, ?, ?)`, SchemaTables[0], SchemaTables[1], SchemaTables[2])
	if err != nil {
		return fmt.Errorf("%w: schema check: %w", idempotency.ErrStoreUnavailable, err)
	}
	defer rows.Close()
	have := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return fmt.Errorf("%w: schema check: %w", idempotency.ErrStoreUnavailable, err)
		}
		have[strings.ToLower(n)] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%w: schema check: %w", idempotency.ErrStoreUnavailable, err)
	}
	var missing []string
	for _, t := range SchemaTables {
		if !have[t] {
			missing = append(missing, t)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	db := ""
	if c, err := mysql.ParseDSN(a.Cfg.MySQLDSN); err == nil {
		db = c.DBName
	}
	return schemaMissing(fmt.Errorf("%w: database %q has no table %s", idempotency.ErrStoreUnavailable, db,
		strings.Join(missing, ", ")), "main migrate")
}

// schemaMissing is RETRYABLE on purpose: nothing ran and nothing was
// recorded, and once an operator runs the migration every redelivery
// succeeds; FINAL would send each event of a half-deployed function to the
// dead-letter queue, to be replayed one by one.
func schemaMissing(err error, fix string) error {
	return idempotency.Retryable(CodeSchemaMissing, fmt.Errorf("%w: run `%s` first", err, fix))
}

// CodeSchemaMissing is the errorType of a store that was never migrated.
const CodeSchemaMissing = "schema_missing"

// Close closes every client, newest first.
func (a *App) Close() error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i]())
	}
	a.closers = nil
	return errors.Join(errs...)
}
