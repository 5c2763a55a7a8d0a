// Command main is the idemgate function: with no arguments it serves FC (the
// go1 runtime when FC_RUNTIME_API is set, else the custom-runtime HTTP
// protocol); with a subcommand it is the operator's tool. Wiring only: the
// work lives in handler/, idempotency/ and ossresult/.
package main

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
	"syscall"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/customruntime"
	"github.com/idemgate/idemgate/handler/go1"
	"github.com/idemgate/idemgate/internal/app"
	"github.com/idemgate/idemgate/internal/config"
	"github.com/idemgate/idemgate/internal/logx"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

var commands = []struct {
	name, usage string
	run         func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}{
	{"invoke", "invoke --event FILE [--request-id ID]: run one event in-process and print the outcome JSON", cmdInvoke},
	{"migrate", "migrate: apply the MySQL schema (MYSQL_DSN); idempotent", cmdMigrate},
	{"inspect", "inspect --key K: print the record of K and of its steps (no secrets)", cmdInspect},
}

func run(args []string, stdout, stderr io.Writer) int {
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
	return app.Open(cfg, log, red)
}

func serve(ctx context.Context, stderr io.Writer) int {
	a, err := open(os.Stdout) // FC collects stdout into the function's log store
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if os.Getenv("FC_RUNTIME_API") != "" {
		go1.Start(a.Pipeline.Handle, a.Warm, func(context.Context) error { return a.Close() }, a.Redactor.Add)
		return 0
	}
	srv := &customruntime.Server{Handle: a.Pipeline.Handle, Init: a.Warm,
		Stop: func(context.Context) error { return a.Close() }, Log: a.Log, Secrets: a.Redactor.Add}
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
	var body []byte
	var err error
	if *file == "-" {
		body, err = io.ReadAll(os.Stdin)
	} else {
		body, err = os.ReadFile(*file)
	}
	if err != nil {
		fmt.Fprintln(stderr, "invoke:", err)
		return 1
	}
	a, err := open(stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer a.Close()
	if *reqID == "" {
		*reqID = "local-" + strconv.FormatInt(int64(os.Getpid()), 10)
	}
	rep := a.Pipeline.Handle(ctx, body, handler.Meta{RequestID: *reqID, RetryCount: -1})
	printJSON(stdout, rep.Body)
	if rep.Status != 200 {
		return 1
	}
	return 0
}

func cmdMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	a, err := open(stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer a.Close()
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
	a, err := open(stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer a.Close()
	rep, err := handler.Inspect(ctx, a.Engine, a.Pipeline.Tasks, *key)
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
