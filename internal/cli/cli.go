// Package cli is the binary's command line: serving FC (custom runtime or
// go1) and the operator's subcommands, each with -h.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/customruntime"
	"github.com/idemgate/idemgate/handler/go1"
	"github.com/idemgate/idemgate/internal/app"
	"github.com/idemgate/idemgate/internal/config"
	"github.com/idemgate/idemgate/internal/logx"
)

var commands = []struct {
	name, usage string
	run         func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}{
	{"invoke", "invoke --event FILE [--request-id ID]: run one event in-process and print the outcome JSON", cmdInvoke},
	{"migrate", "migrate: apply the MySQL schema (MYSQL_DSN); idempotent", cmdMigrate},
	{"inspect", "inspect --key K: print the record of K, its steps, replays and objects (no secrets)", cmdInspect},
	{"replay", "replay --key K | --dlq FILE --reason R --operator O: re-drive with the original key (audited)", cmdReplay},
	{"sweep", "sweep [--limit N --budget D]: re-drive stuck tasks once (what the timer trigger runs)", cmdSweep},
	{"stats", "stats [--since D] [--json]: decisions and the duplicate rate per minute", cmdStats},
}

// Run runs the binary with args and returns its exit code.
func Run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if len(args) == 0 {
		return serve(ctx, stderr)
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "unknown command %q\n\nusage: main [command]\n  (no command): serve FC\n", args[0])
	for _, c := range commands {
		fmt.Fprintf(stderr, "  %s\n", c.usage)
	}
	return 2
}

// open loads the configuration and wires the function; logs go to w as JSON.
func open(w io.Writer) (*app.App, error) {
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	red := &logx.Redactor{}
	log := logx.New(w, slog.LevelInfo, red)
	slog.SetDefault(log)
	a, err := app.Open(cfg, log, red)
	if err != nil {
		return nil, err
	}
	// IDEMGATE_FAULT names a pipeline point where the process kills itself
	// (SIGKILL: no deferred cleanup), or panics with "<point>:panic", for the
	// crash drills and the secret-leak test. Unset in production.
	if fault := os.Getenv("IDEMGATE_FAULT"); fault != "" {
		point, action, _ := strings.Cut(fault, ":")
		a.Pipeline.Fault = func(p string) {
			switch {
			case p != point:
			case action == "panic":
				panic("IDEMGATE_FAULT at " + p)
			default:
				log.Warn("IDEMGATE_FAULT: killing the process", "point", p)
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}
	}
	return a, nil
}

func serve(ctx context.Context, stderr io.Writer) int {
	a, err := open(os.Stdout) // FC collects stdout into the function's log store
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	// Pre-stop flushes and keeps the clients: FC may thaw and invoke the
	// instance again. Only the end of the process closes them.
	hooks := handler.Hooks{Init: a.Warm, PreStop: a.PreStop, Shutdown: func(context.Context) error { return a.Close() },
		Secrets: a.Redactor.Add}
	if os.Getenv("FC_RUNTIME_API") != "" {
		go1.Start(a.Pipeline.Handle, hooks)
		return 0
	}
	srv := &customruntime.Server{Handle: a.Pipeline.Handle, Hooks: hooks, Log: a.Log}
	addr := net.JoinHostPort("0.0.0.0", strconv.Itoa(a.Cfg.ListenPort))
	err = srv.ListenAndServe(ctx, addr, func(bound net.Addr) { a.Log.Info("listening", "addr", bound.String()) })
	if err != nil {
		a.Log.Error("server stopped", "error", err.Error())
		return 1
	}
	return 0
}

func cmdInvoke(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("invoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("event", "", "event file (CloudEvent, batch, timer); - for stdin")
	reqID := fs.String("request-id", "", "FC request id to simulate (default: derived from the event, so a rerun is a redelivery)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *file == "" {
		fmt.Fprintln(stderr, "invoke: --event FILE is required")
		return 2
	}
	body, err := loadEvent(*file)
	if err != nil {
		fmt.Fprintln(stderr, "invoke:", err)
		return 1
	}
	return withApp(stderr, func(a *app.App) int {
		if *reqID == "" {
			*reqID = "local-" + strconv.FormatInt(int64(os.Getpid()), 10)
		}
		rep := a.Pipeline.Handle(ctx, body, handler.Meta{RequestID: *reqID, RetryCount: -1})
		printJSON(stdout, rep.Body)
		if rep.Status != 200 {
			return 1
		}
		return 0
	})
}

func cmdMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	return withApp(stderr, func(a *app.App) int {
		if a.MySQL == nil {
			fmt.Fprintln(stderr, "migrate: MYSQL_DSN is not set (the embedded store needs no migration)")
			return 2
		}
		applied, err := a.MySQL.Migrate(ctx)
		if err != nil {
			fmt.Fprintln(stderr, "migrate:", a.Redactor.Redact(err.Error()))
			return 1
		}
		if applied == nil {
			applied = []string{}
		}
		out, _ := json.Marshal(map[string]any{"applied": applied})
		fmt.Fprintln(stdout, string(out))
		return 0
	})
}

func cmdInspect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	key := fs.String("key", "", "business key K (64 hex)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *key == "" {
		fmt.Fprintln(stderr, "inspect: --key K is required")
		return 2
	}
	return withApp(stderr, func(a *app.App) int {
		rep, err := a.Pipeline.Inspect(ctx, *key, handler.Meta{})
		if err != nil {
			fmt.Fprintln(stderr, "inspect:", a.Redactor.Redact(err.Error()))
			if errors.Is(err, handler.ErrUnknownKey) {
				return 3
			}
			return 1
		}
		out, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintln(stdout, a.Redactor.Redact(string(out)))
		return 0
	})
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

// loadEvent reads an event file, or stdin for "-".
func loadEvent(file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(file)
}

func cmdReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	key := fs.String("key", "", "business key K to re-drive from its stored input")
	dlq := fs.String("dlq", "", "dead-letter file: an FC failure-destination message or an EventBridge dead-letter event")
	reason := fs.String("reason", "", "why (required, audited)")
	operator := fs.String("operator", "", "who (required, audited)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if (*key == "") == (*dlq == "") || *reason == "" || *operator == "" {
		fmt.Fprintln(stderr, "replay: give exactly one of --key K or --dlq FILE, and --reason R --operator O (both audited)")
		return 2
	}
	return withApp(stderr, func(a *app.App) int {
		req := handler.ReplayRequest{Reason: *reason, Operator: *operator}
		meta := handler.Meta{RequestID: "replay-" + strconv.FormatInt(time.Now().UnixNano(), 36), RetryCount: -1}
		var outs []handler.Outcome
		if *key != "" {
			o, err := a.Pipeline.ReplayKey(ctx, *key, req, meta)
			if err != nil {
				fmt.Fprintln(stderr, "replay:", a.Redactor.Redact(err.Error()))
				return 1
			}
			outs = append(outs, o)
		} else {
			body, err := loadEvent(*dlq)
			if err != nil {
				fmt.Fprintln(stderr, "replay:", err)
				return 1
			}
			if outs, err = a.Pipeline.ReplayDLQ(ctx, body, req, meta); err != nil {
				fmt.Fprintln(stderr, "replay:", a.Redactor.Redact(err.Error()))
				return 1
			}
		}
		out, _ := json.MarshalIndent(map[string]any{"results": outs}, "", "  ")
		fmt.Fprintln(stdout, string(out))
		for _, o := range outs {
			if o.Failed() {
				return 1
			}
		}
		return 0
	})
}

func cmdSweep(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	fs.SetOutput(stderr)
	limit := fs.Int("limit", 50, "records per run")
	budget := fs.Duration("budget", 40*time.Second, "wall time per run")
	grace := fs.Duration("grace", time.Minute, "leave failed and finished records to FC's own retry this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	return withApp(stderr, func(a *app.App) int {
		rep, err := a.Pipeline.Sweep(ctx, handler.Meta{RequestID: "sweep-cli", RetryCount: -1},
			handler.SweepOptions{Limit: *limit, Budget: *budget, Grace: *grace})
		if err != nil {
			fmt.Fprintln(stderr, "sweep:", a.Redactor.Redact(err.Error()))
			return 1
		}
		out, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintln(stdout, string(out))
		return 0
	})
}

func cmdStats(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("stats", flag.ContinueOnError)
	fs.SetOutput(stderr)
	since := fs.Duration("since", time.Hour, "how far back")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	return withApp(stderr, func(a *app.App) int {
		rows, err := a.Pipeline.Maint.Stats(ctx, time.Now().Add(-*since))
		if err != nil {
			fmt.Fprintln(stderr, "stats:", a.Redactor.Redact(err.Error()))
			return 1
		}
		buckets := handler.StatsByMinute(rows)
		if *asJSON {
			out, _ := json.MarshalIndent(buckets, "", "  ")
			fmt.Fprintln(stdout, string(out))
			return 0
		}
		fmt.Fprintf(stdout, "%-17s %7s %6s %8s %12s %11s %8s %11s %14s %9s\n", "minute (UTC)", "claims", "first",
			"takeover", "repeat_other", "repeat_done", "mismatch", "fast_reject", "store_conflict", "dup_rate")
		for _, b := range buckets {
			fmt.Fprintf(stdout, "%-17s %7d %6d %8d %12d %11d %8d %11d %14d %8.2f%%\n", b.Minute.Format("2006-01-02 15:04"),
				b.Claims, b.First, b.Takeover+b.RepeatSame, b.RepeatOther, b.RepeatDone, b.Mismatch, b.FastRejects,
				b.StoreConflicts, 100*b.DuplicateRate)
		}
		return 0
	})
}

// withApp opens the wired function for a subcommand and closes it after.
func withApp(stderr io.Writer, fn func(a *app.App) int) int {
	a, err := open(stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer a.Close()
	return fn(a)
}
