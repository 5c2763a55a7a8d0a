package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/customruntime"
	"github.com/idemgate/idemgate/handler/go1"
	"github.com/idemgate/idemgate/handler/httpapi"
	"github.com/idemgate/idemgate/handler/llm"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/internal/app"
	"github.com/idemgate/idemgate/internal/config"
	"github.com/idemgate/idemgate/internal/gctune"
	"github.com/idemgate/idemgate/internal/logx"
)

// probeTimeout bounds the start line's probe of the store and the fast
// layer; /initialize and the commands' own check wait longer.
const probeTimeout = 2 * time.Second

// errConfig marks a configuration error: bad usage, exit 2.
type errConfig struct{ err error }

func (e errConfig) Error() string { return "configuration: " + e.err.Error() }
func (e errConfig) Unwrap() error { return e.err }

// open loads the configuration through getenv and wires the function for
// command (a subcommand's name, or "serve"); logs go to w as JSON, starting
// with the line that names the live backends.
func open(w io.Writer, command string, level slog.Level, getenv func(string) string) (*app.App, error) {
	cfg, err := config.Load(getenv)
	if err != nil {
		return nil, errConfig{err}
	}
	red := &logx.Redactor{}
	log := logx.New(w, level, red)
	slog.SetDefault(log)
	a, err := app.Open(cfg, log, red)
	if err != nil {
		log.Info("backends", append([]any{"command", command}, backends(cfg)...)...)
		if ce := (*config.Error)(nil); errors.As(err, &ce) {
			return nil, errConfig{err}
		}
		return nil, err
	}
	// The start line says what answered, not only what is configured
	// (bounded: a store that does not answer is reported, not waited for).
	pctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	store, fast := a.Answered(pctx, command == "migrate")
	cancel()
	log.Info("backends", append(append([]any{"command", command}, backends(cfg)...),
		"store_answered", store, "fast_answered", fast)...)
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

// openFailed reports an error of open: a bad configuration, whether the
// configuration or a client refused it, is bad usage.
func openFailed(w io.Writer, err error) int {
	fmt.Fprintln(w, err)
	if _, ok := err.(errConfig); ok {
		return ExitUsage
	}
	if _, code := idempotency.Classify(err); code == llm.CodeInvalidConfig {
		return ExitUsage
	}
	return exitCode(err)
}

// listenAddr is where the custom-runtime server listens: listen when given,
// else every interface inside FC (FC reaches the server from outside the
// instance: 0.0.0.0 on the configured port) and loopback elsewhere, for
// the server has no authentication of its own and a laptop's is not FC's
// network.
func listenAddr(listen string, port int, getenv func(string) string) string {
	switch {
	case listen != "":
		return listen
	case inFC(getenv):
		return net.JoinHostPort("0.0.0.0", strconv.Itoa(port))
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

func serve(ctx context.Context, r *run, listen string) int {
	percent, limit := gctune.Tune(os.Getenv)
	a, err := open(r.stdout, "serve", r.logLevel, os.Getenv) // FC collects stdout into the function's log store
	if err != nil {
		return openFailed(r.stderr, err)
	}
	if percent > 0 || limit > 0 {
		a.Log.Info("gc tuned", "gogc", percent, "memory_limit_mib", limit>>20) // 0: left as Go or the user set it
	}
	// Pre-stop flushes and keeps the clients: FC may thaw and invoke the
	// instance again. Only the end of the process closes them.
	hooks := handler.Hooks{Init: a.Warm, PreStop: a.PreStop, Shutdown: func(context.Context) error { return a.Close() },
		Secrets: a.Redactor.Hold}
	if os.Getenv("FC_RUNTIME_API") != "" {
		go1.Start(a.Pipeline.Handle, hooks)
		return ExitOK
	}
	api := &httpapi.API{Pipeline: a.Pipeline, Log: a.Log} // the HTTP trigger's routes (docs/api.md)
	srv := &customruntime.Server{Handle: a.Pipeline.Handle, Hooks: hooks, Log: a.Log, API: api.Serve}
	addr := listenAddr(listen, a.Cfg.ListenPort, os.Getenv)
	err = srv.ListenAndServe(ctx, addr, func(bound net.Addr) { a.Log.Info("listening", "addr", bound.String()) })
	if err != nil {
		a.Log.Error("server stopped", "error", err.Error())
		return ExitFailed
	}
	return ExitOK
}

// storeCheck is what a command needs of the durable store before it runs.
type storeCheck int

const (
	checkNone   storeCheck = iota // the command checks for itself (migrate)
	checkSchema                   // answers and is migrated (app.Warm)
)

// withApp opens the wired function for the command r names, checks the
// store as asked and runs fn; the function is closed after (flushing the
// decision counters to the store). A command that answers with an outcome
// (invoke) sets r.unusable, which answers a function that could not be
// opened or whose store failed its check.
func (r *run) withApp(ctx context.Context, check storeCheck, fn func(a *app.App) int) int {
	getenv := r.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	a, err := open(r.stderr, r.name, r.logLevel, getenv)
	if err != nil {
		code := openFailed(r.stderr, err)
		if r.unusable != nil && code != ExitUsage {
			cfg, _ := config.Load(getenv) // it loaded: the error came after
			red := &logx.Redactor{}
			red.Add(app.Secrets(cfg)...)
			return r.unusable(app.Judge(cfg, logx.New(io.Discard, slog.LevelError, red)), red.Redact, err, code)
		}
		return code
	}
	defer a.Close()
	r.sayModel(a.Cfg)
	if check != checkNone {
		wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := a.Warm(wctx)
		cancel()
		if err != nil {
			code := r.fail(err, a.Redactor.Redact)
			if r.unusable != nil {
				return r.unusable(a.Pipeline, a.Redactor.Redact, err, code)
			}
			return code
		}
	}
	return fn(a)
}
