// Package cli is the binary's command line: serving FC (custom runtime or
// go1; `main serve`, or no arguments inside FC) and the operator's
// subcommands, each with -h.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/internal/app"
)

// Exit codes, the same for every command (usage text: exitCodes).
const (
	ExitOK               = 0
	ExitFailed           = 1 // the task or the operation failed
	ExitUsage            = 2 // unknown command, bad flag or argument, bad configuration
	ExitNotFound         = 3 // no record for the key
	ExitStoreUnavailable = 4 // the durable store does not answer or is not migrated
)

// action runs a command once its flags are parsed.
type action func(ctx context.Context, r *run) int

// command is one subcommand: setup declares its flags on fs and returns
// what runs them, so that -h and `main help NAME` can show the flags.
type command struct {
	name, synopsis, summary string
	env                     []string // the variables it uses (envDocs)
	setup                   func(fs *flag.FlagSet) action
}

// run is one command's invocation: where it writes, what it is called and
// how much it logs (--log-level, -q).
type run struct {
	name           string
	stdout, stderr io.Writer
	logLevel       slog.Level
	// getenv is what the configuration is read through (nil: os.Getenv);
	// invoke's defaults the model to the offline one (offlineUnlessChosen).
	getenv func(string) string
	// unusable, when set, answers an error that stops the command before
	// it runs (the function could not be opened, or its store failed its
	// check) with the outcome the function would give (invoke), and returns
	// the exit code; code is the error's own (exitCode).
	unusable func(p *handler.Pipeline, redact func(string) string, err error, code int) int
}

// Run runs the binary with args and returns its exit code.
func Run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if len(args) == 0 {
		if !inFC(os.Getenv) {
			// A bare `main` on a laptop would listen on :9000 without a word.
			fmt.Fprint(stderr, "main: no command; outside FC (no FC_* runtime variable set) `main serve` serves\n\n")
			usage(stderr)
			return ExitUsage
		}
		args = []string{"serve"}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		return help(args[1:], stdout, stderr)
	}
	c := lookup(args[0])
	if c == nil {
		fmt.Fprintf(stderr, "main: unknown command %q (main -h lists the commands)\n", args[0])
		return ExitUsage
	}
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and help are written below, each to its place
	act := c.setup(fs)
	logs := addLogFlags(fs)
	r := &run{name: c.name, stdout: stdout, stderr: stderr}
	switch err := fs.Parse(args[1:]); {
	case errors.Is(err, flag.ErrHelp):
		c.help(stdout, fs)
		return ExitOK
	case err != nil:
		return r.badUsage("%v", err)
	case fs.NArg() > 0:
		return r.badUsage("unexpected argument %q", fs.Arg(0))
	}
	level, err := logs.level()
	if err != nil {
		return r.badUsage("%v", err)
	}
	r.logLevel = level
	return act(ctx, r)
}

// fcRuntimeVars are variables FC sets in a function instance (FC_SERVER_PORT
// is the local stand-ins' port: scripts/local-invoke.sh, internal/dev/proc).
// Deploy-time exports such as FC_GENERATE_PROJECT_NAME are not among them.
var fcRuntimeVars = []string{"FC_CUSTOM_LISTEN_PORT", "FC_SERVER_PORT", "FC_RUNTIME_API", "FC_FUNCTION_NAME",
	"FC_FUNC_CODE_PATH", "FC_INSTANCE_ID", "FC_REGION", "FC_ACCOUNT_ID"}

// inFC reports whether the process runs as an FC function (or its local
// stand-in), where no arguments means serve.
func inFC(getenv func(string) string) bool {
	for _, v := range fcRuntimeVars {
		if getenv(v) != "" {
			return true
		}
	}
	return false
}

func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// help answers `main help [COMMAND | env]`, -h and --help.
func help(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		usage(stdout)
		return ExitOK
	case len(args) == 1 && args[0] == "env":
		envHelp(stdout)
		return ExitOK
	}
	c := lookup(args[0])
	if c == nil || len(args) > 1 {
		fmt.Fprintf(stderr, "main help: unknown command %q (main -h lists them)\n", args[0])
		return ExitUsage
	}
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	c.setup(fs)
	addLogFlags(fs)
	c.help(stdout, fs)
	return ExitOK
}

// usage reports a usage error of the command itself: its own message,
// named once, and where its help is.
func (r *run) badUsage(format string, a ...any) int {
	fmt.Fprintf(r.stderr, "%s: %s (main %s -h for usage)\n", r.name, fmt.Sprintf(format, a...), r.name)
	return ExitUsage
}

// fail reports an operation's error as it is: the operations name
// themselves (migrate, replay K, sweep, stats: …), so the command is not
// said again. redact removes the configuration's secrets.
func (r *run) fail(err error, redact func(string) string) int {
	fmt.Fprintln(r.stderr, redact(err.Error()))
	return exitCode(err)
}

// exitCode maps an operation's error to the documented exit codes.
func exitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, handler.ErrUnknownKey):
		return ExitNotFound
	case errors.Is(err, idempotency.ErrStoreUnavailable):
		return ExitStoreUnavailable
	}
	return ExitFailed
}

// outcomeExit is the exit code of an answered task: a failure is ExitFailed,
// unless the store could not be used (nothing ran: retry later).
func outcomeExit(failed bool, errorType string) int {
	switch {
	case !failed:
		return ExitOK
	case errorType == "store_unavailable" || errorType == app.CodeSchemaMissing:
		return ExitStoreUnavailable
	}
	return ExitFailed
}
