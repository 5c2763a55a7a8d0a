package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/idemgate/idemgate/docs/schema"
	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/customruntime"
	hevent "github.com/idemgate/idemgate/handler/event"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/internal/app"
	"github.com/idemgate/idemgate/internal/config"
	"github.com/idemgate/idemgate/internal/logx"
)

// commands are the operator's subcommands, in the order the usage lists them.
var commands = []command{
	{"serve", "[--listen ADDR]", "serve FC: the go1 runtime when FC_RUNTIME_API is set, else the custom-runtime HTTP server (what FC runs); outside FC on loopback only",
		join(envPipeline, []string{"FC_CUSTOM_LISTEN_PORT", "FC_SERVER_PORT", "FC_RUNTIME_API"}), setupServe},
	{"invoke", "--event FILE [--request-id ID]", "run one event in-process and print the outcome JSON (the offline model unless LLM_MODEL names one)", envPipeline, setupInvoke},
	{"validate", "--event FILE", "parse and check one event as the function would, without a store or a model: its kind, limits, key, payload hash, fingerprint and docs/schema verdict",
		[]string{"KEY_FALLBACK", "NOTIFY_ALLOWED_HOSTS"}, setupValidate},
	{"migrate", "[--create-database]", "apply the MySQL schema (MYSQL_DSN); idempotent", []string{"MYSQL_DSN"}, setupMigrate},
	{"inspect", "--key K", "print the record of K, its steps, replays, objects and when its dedup window ends (no secrets)",
		join(envStore, envResults, envRetention), setupInspect},
	{"replay", "--key K | --dlq FILE, --reason R --operator O", "re-drive a task with its original key (audited)", envPipeline, setupReplay},
	{"forget", "--key K --reason R --operator O",
		"evict K (its result, steps, Redis entry and objects; audited): its next delivery runs again; refused while it runs or finishes",
		join(envStore, envFast, envResults), setupForget},
	{"sweep", "[--limit N] [--budget D] [--grace D] [--progress D]", "re-drive stuck tasks once (what the timer trigger runs)", envPipeline, setupSweep},
	{"stats", "[--since D] [--json]", "decisions and the duplicate rate per minute", envStore, setupStats},
	{"purge", "[--older-than D] [--limit N] [--budget D] [--progress D] [--dry-run]",
		"retire finished records older than the retention to tombstones (their steps, audit rows and old stats deleted) and delete expired tombstones (what the daily timer runs)",
		join(envStore, envRetention), setupPurge},
	{"version", "", "print the module version and the VCS revision the binary was built from", nil, setupVersion},
}

func setupServe(flags *flag.FlagSet) action {
	listen := flags.String("listen", "", "`host:port` of the HTTP server (default: inside FC every interface, as FC requires, "+
		"elsewhere 127.0.0.1; the port FC_CUSTOM_LISTEN_PORT, else FC_SERVER_PORT, else 9000); the server has no authentication of its own")
	return func(ctx context.Context, r *run) int {
		if *listen != "" {
			if _, _, err := net.SplitHostPort(*listen); err != nil {
				return r.badUsage("--listen %q: want host:port, such as 127.0.0.1:9000 or :9000", *listen)
			}
		}
		return serve(ctx, r, *listen)
	}
}

func setupInvoke(flags *flag.FlagSet) action {
	readEvent := eventFlag(flags)
	reqID := flags.String("request-id", "", "FC request id to simulate (default local-<pid>)")
	return func(ctx context.Context, r *run) int {
		body, code := readEvent(r)
		if body == nil {
			return code
		}
		if *reqID == "" {
			*reqID = "local-" + strconv.Itoa(os.Getpid())
		}
		if err := overBodyLimit(body); err != nil {
			printJSON(r.stdout, handler.ErrorReply(*reqID, err).Body)
			return ExitFailed
		}
		r.getenv = offlineUnlessChosen(os.Getenv)
		meta := handler.Meta{RequestID: *reqID, RetryCount: -1}
		// A store that cannot be used is answered as the function would
		// answer it: the event keyed, each task failed with the store's error.
		r.unusable = func(p *handler.Pipeline, redact func(string) string, err error, code int) int {
			rep := p.Unavailable(ctx, body, meta, err)
			printJSON(r.stdout, []byte(redact(string(rep.Body))))
			if _, c := idempotency.Classify(err); rep.ErrorType == c || rep.ErrorType == "batch_failed" ||
				rep.ErrorType == hevent.TypeInvalidBatch {
				return code
			}
			return outcomeExit(true, rep.ErrorType) // the event refused on its own: no retry helps
		}
		return r.withApp(ctx, checkSchema, func(a *app.App) int {
			rep := a.Pipeline.Handle(ctx, body, meta)
			printJSON(r.stdout, rep.Body)
			return outcomeExit(rep.Status != 200, rep.ErrorType)
		})
	}
}

// eventFlag declares --event FILE; what it returns reads the file, or
// reports the usage error and returns its exit code.
func eventFlag(flags *flag.FlagSet) func(r *run) ([]byte, int) {
	file := flags.String("event", "", "event file (CloudEvent, batch, timer); - for stdin")
	return func(r *run) ([]byte, int) {
		if *file == "" {
			return nil, r.badUsage("--event FILE is required")
		}
		body, err := loadEvent(*file)
		if err != nil {
			return nil, r.badUsage("%v", err)
		}
		if body == nil {
			body = []byte{} // an empty file is the function's to judge
		}
		return body, ExitOK
	}
}

func setupValidate(flags *flag.FlagSet) action {
	readEvent := eventFlag(flags)
	return func(ctx context.Context, r *run) int {
		body, code := readEvent(r)
		if body == nil {
			return code
		}
		cfg, err := config.Load(os.Getenv)
		if err != nil {
			return openFailed(r.stderr, errConfig{err})
		}
		p := app.Judge(cfg, logx.New(r.stderr, slog.LevelWarn, &logx.Redactor{}))
		v := handler.Validation{ErrorType: "body_too_large"}
		if err := overBodyLimit(body); err != nil {
			v.ErrorMessage = err.Error()
		} else {
			v = p.Validate(ctx, body, schema.ValidateData)
		}
		out, _ := json.MarshalIndent(v, "", "  ")
		fmt.Fprintln(r.stdout, string(out))
		return outcomeExit(!v.Valid, v.ErrorType)
	}
}

func setupMigrate(flags *flag.FlagSet) action {
	create := flags.Bool("create-database", false, "create the database MYSQL_DSN names if it does not exist")
	return func(ctx context.Context, r *run) int {
		return r.withApp(ctx, checkNone, func(a *app.App) int {
			if a.MySQL == nil {
				return r.badUsage("MYSQL_DSN is not set (the embedded store needs no migration)")
			}
			created := false
			if *create {
				var err error
				if created, err = createDatabase(ctx, a.Cfg.MySQLDSN); err != nil {
					return r.fail(err, a.Redactor.Redact)
				}
			}
			if err := a.Ping(ctx); err != nil {
				return r.fail(err, a.Redactor.Redact)
			}
			applied, err := a.MySQL.Migrate(ctx)
			if err != nil {
				return r.fail(err, a.Redactor.Redact)
			}
			if applied == nil {
				applied = []string{}
			}
			out, _ := json.Marshal(map[string]any{"created_database": created, "applied": applied})
			fmt.Fprintln(r.stdout, string(out))
			return ExitOK
		})
	}
}

func setupInspect(flags *flag.FlagSet) action {
	key := flags.String("key", "", "business key K (64 hex)")
	return func(ctx context.Context, r *run) int {
		if *key == "" {
			return r.badUsage("--key K is required")
		}
		if err := checkKey(*key); err != nil {
			return r.badUsage("%v", err)
		}
		return r.withApp(ctx, checkSchema, func(a *app.App) int {
			rep, err := a.Pipeline.Inspect(ctx, *key, handler.Meta{})
			if err != nil {
				return r.fail(err, a.Redactor.Redact)
			}
			out, _ := json.MarshalIndent(rep, "", "  ")
			fmt.Fprintln(r.stdout, a.Redactor.Redact(string(out)))
			return ExitOK
		})
	}
}

func setupReplay(flags *flag.FlagSet) action {
	key := flags.String("key", "", "business key K to re-drive from its stored input")
	dlq := flags.String("dlq", "", "dead-letter file: an FC failure-destination message or an EventBridge dead-letter event")
	reason := flags.String("reason", "", "why (required, audited)")
	operator := flags.String("operator", "", "who (required, audited)")
	return func(ctx context.Context, r *run) int {
		if (*key == "") == (*dlq == "") || *reason == "" || *operator == "" {
			return r.badUsage("give exactly one of --key K or --dlq FILE, and --reason R --operator O (both audited)")
		}
		if *key != "" {
			if err := checkKey(*key); err != nil {
				return r.badUsage("%v", err)
			}
		}
		var body []byte
		if *dlq != "" {
			var err error
			if body, err = loadEvent(*dlq); err != nil {
				return r.badUsage("%v", err)
			}
		}
		return r.withApp(ctx, checkSchema, func(a *app.App) int {
			req := handler.ReplayRequest{Reason: *reason, Operator: *operator}
			meta := handler.Meta{RequestID: "replay-" + strconv.FormatInt(time.Now().UnixNano(), 36), RetryCount: -1}
			var outs []handler.Outcome
			var err error
			if *key != "" {
				var o handler.Outcome
				o, err = a.Pipeline.ReplayKey(ctx, *key, req, meta)
				outs = []handler.Outcome{o}
			} else {
				outs, err = a.Pipeline.ReplayDLQ(ctx, body, req, meta)
				if notDeadLetter(err) {
					return r.badUsage("--dlq %s: %s", *dlq, a.Redactor.Redact(err.Error()))
				}
			}
			if err != nil {
				return r.fail(err, a.Redactor.Redact)
			}
			out, _ := json.MarshalIndent(map[string]any{"results": outs}, "", "  ")
			fmt.Fprintln(r.stdout, string(out))
			for _, o := range outs {
				if o.Failed() {
					return outcomeExit(true, o.ErrorType)
				}
			}
			return ExitOK
		})
	}
}

func setupForget(flags *flag.FlagSet) action {
	key := flags.String("key", "", "business key K (64 hex) to evict")
	reason := flags.String("reason", "", "why (required, audited)")
	operator := flags.String("operator", "", "who (required, audited)")
	return func(ctx context.Context, r *run) int {
		if *key == "" || *reason == "" || *operator == "" {
			return r.badUsage("give --key K, --reason R and --operator O (the last two are audited)")
		}
		if err := checkKey(*key); err != nil {
			return r.badUsage("%v", err)
		}
		return r.withApp(ctx, checkSchema, func(a *app.App) int {
			rep, err := a.Pipeline.Forget(ctx, *key, handler.ReplayRequest{Reason: *reason, Operator: *operator}, handler.Meta{})
			if err != nil {
				return r.fail(err, a.Redactor.Redact)
			}
			out, _ := json.MarshalIndent(rep, "", "  ")
			fmt.Fprintln(r.stdout, string(out))
			return ExitOK
		})
	}
}

func setupSweep(flags *flag.FlagSet) action {
	limit := flags.Int("limit", 50, "records per run, at least 1")
	budget := durationFlag(flags, "budget", 40*time.Second, "wall time per run, a `duration` (90s, 36h, 1d)")
	grace := durationFlag(flags, "grace", time.Minute, "leave failed and finished records to FC's own retry for this `duration`")
	every := progressFlag(flags)
	return func(ctx context.Context, r *run) int {
		if *limit < 1 || *budget <= 0 || *grace < 0 {
			return r.badUsage("--limit and --budget must be positive, --grace not negative")
		}
		return r.withApp(ctx, checkSchema, func(a *app.App) int {
			progress := throttle(*every, func(rep handler.SweepReport) {
				a.Log.InfoContext(ctx, "sweep progress", "scanned", rep.Scanned, "taken_up", len(rep.Results),
					"redriven", rep.Redriven, "finished", rep.Finished, "deferred", rep.Deferred, "backoff", rep.Backoff)
			})
			rep, err := a.Pipeline.Sweep(ctx, handler.Meta{RequestID: "sweep-cli", RetryCount: -1},
				handler.SweepOptions{Limit: *limit, Budget: *budget, Grace: *grace, Progress: progress})
			if err != nil {
				return r.fail(err, a.Redactor.Redact)
			}
			out, _ := json.MarshalIndent(rep, "", "  ")
			fmt.Fprintln(r.stdout, string(out))
			return ExitOK
		})
	}
}

func setupStats(flags *flag.FlagSet) action {
	since := durationFlag(flags, "since", time.Hour, "how far back, a `duration` such as 90m, 36h or 1d")
	asJSON := flags.Bool("json", false, "print JSON instead of a table")
	return func(ctx context.Context, r *run) int {
		if *since <= 0 {
			return r.badUsage("--since must be positive")
		}
		return r.withApp(ctx, checkSchema, func(a *app.App) int {
			m, ok := a.Engine.Store().(driver.Maintainer)
			if !ok {
				return r.fail(fmt.Errorf("stats: the store keeps no counters"), a.Redactor.Redact)
			}
			rows, err := m.Stats(ctx, time.Now().Add(-*since))
			if err != nil {
				return r.fail(err, a.Redactor.Redact)
			}
			buckets := handler.StatsByMinute(rows)
			if *asJSON {
				out, _ := json.MarshalIndent(buckets, "", "  ")
				fmt.Fprintln(r.stdout, string(out))
				return ExitOK
			}
			writeStats(r.stdout, buckets)
			return ExitOK
		})
	}
}

// notDeadLetter reports whether ReplayDLQ refused the file as a whole
// (malformed, a timer or another non-task event): bad input, not a failed
// replay. Its members' refusals are outcomes, not errors.
func notDeadLetter(err error) bool {
	var ee *hevent.Error
	class, _ := idempotency.Classify(err)
	return errors.As(err, &ee) || class == idempotency.ClassFinal
}

func printJSON(w io.Writer, body []byte) {
	var v any
	if json.Unmarshal(body, &v) == nil {
		if pretty, err := json.MarshalIndent(v, "", "  "); err == nil {
			body = pretty
		}
	}
	fmt.Fprintln(w, string(body))
}

// overBodyLimit is the custom runtime's body_too_large
// (handler/customruntime/server.go), so that invoke and validate judge
// only a body FC can hand over to the function.
func overBodyLimit(body []byte) error {
	if len(body) <= customruntime.DefaultMaxBody {
		return nil
	}
	return idempotency.Final("body_too_large", fmt.Errorf("event body exceeds %d bytes", customruntime.DefaultMaxBody))
}

// loadEvent reads an event file, or stdin for "-". A missing file is said
// plainly: it is the commonest mistake.
func loadEvent(file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(os.Stdin)
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: file not found", file)
	}
	return b, err
}

func setupPurge(flags *flag.FlagSet) action {
	olderThan := flags.String("older-than", "", "retention of finished records, such as 720h or 30d, at least 8d (default RETENTION_DAYS)")
	limit := flags.Int("limit", driver.DefaultPurgeLimit, "records per batch (one short transaction each)")
	budget := durationFlag(flags, "budget", 10*time.Minute, "wall time, a `duration`; the report says more when it ran out first")
	every := progressFlag(flags)
	dry := flags.Bool("dry-run", false, "count one batch of --limit records (and their steps, audit rows, old stats) that would go; delete nothing")
	return func(ctx context.Context, r *run) int {
		var age time.Duration
		if *olderThan != "" {
			var err error
			if age, err = config.ParseRetention("--older-than", *olderThan); err != nil {
				return r.badUsage("%v", err)
			}
		}
		if *limit < 1 || *budget <= 0 {
			return r.badUsage("--limit and --budget must be positive")
		}
		return r.withApp(ctx, checkSchema, func(a *app.App) int {
			progress := throttle(*every, func(rep handler.PurgeReport) {
				a.Log.InfoContext(ctx, "purge progress", "batches", rep.Batches, "purged_records", rep.Records,
					"purged_steps", rep.Steps, "purged_replays", rep.Replays, "purged_stats", rep.Stats,
					"purged_tombstones", rep.Tombstones)
			})
			rep, err := a.Pipeline.Purge(ctx, handler.PurgeOptions{OlderThan: age, Limit: *limit, Budget: *budget,
				Progress: progress, DryRun: *dry})
			if err != nil {
				return r.fail(err, a.Redactor.Redact)
			}
			out, _ := json.MarshalIndent(rep, "", "  ")
			fmt.Fprintln(r.stdout, string(out))
			return ExitOK
		})
	}
}
