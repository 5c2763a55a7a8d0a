// Command chaos is the chaos run: it starts several instances of
// the function (custom runtime, real MariaDB and Redis, an in-process
// OpenAI-compatible model fake), streams a duplicate-heavy mix of deliveries
// at them while SIGKILLing and SIGSTOPping instances, simulates FC's async
// retries and dead-letter queue, lets the sweeper finish what was left, and
// then checks per key that the function took effect at most once:
//
//  1. every key ends SUCCEEDED or FAILED_FINAL (nothing RUNNING,
//     FAILED_RETRYABLE or RECEIVED);
//  2. a SUCCEEDED key has exactly one approved/result.md and it equals the
//     text of the output object its result_ref names; other keys have none;
//  3. model calls per key ≤ the attempts recorded for it;
//  4. one effective result: the approved content never changed during the
//     run, and every SUCCEEDED answer named the record's result_ref.
//
// It prints a summary (with dead letters and whether the sweeper completed
// them) and exits 1 on any violation, 2 when the run could not be set up.
//
//	go run ./scripts/chaos -instances 4 -keys 100
//
// From Go (no flags), Options.Nodes spreads the instances over the nodes
// of a multi-writer cluster and Options.NodeKill kills one node mid-run:
// TestChaosGalera, on a private three-node MariaDB Galera cluster.
//
// Unix only (SIGSTOP/SIGCONT); everything listens on and dials loopback.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/idemgate/idemgate/internal/dev/progress"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	d := DefaultOptions()
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run ./scripts/chaos [flags]\n\n"+
			"Runs several instances under a duplicate-heavy stream while killing and pausing them, then\n"+
			"prints per-key invariants: effective results, model calls vs attempts, tasks left RUNNING,\n"+
			"dead letters. Exit status 1 on any violation, 2 when the run could not be set up.\n\nflags:\n")
		fs.PrintDefaults()
	}
	o := d
	fs.IntVar(&o.Instances, "instances", d.Instances, "function instances to run")
	fs.IntVar(&o.Keys, "keys", d.Keys, "business keys (distinct tasks)")
	fs.IntVar(&o.Deliveries, "deliveries", d.Deliveries, "average deliveries per key (same event, same or new FC request id, double submits, bursts)")
	fs.DurationVar(&o.Duration, "duration", d.Duration, "cap on the stream: deliveries start within its first 60%; at the cap chaos and new deliveries stop, deliveries under way still get FC's retries (for at most 2 more minutes)")
	fs.DurationVar(&o.KillEvery, "kill-every", d.KillEvery, "mean interval between kill -9 of a random instance (0: none)")
	fs.DurationVar(&o.PauseEvery, "pause-every", d.PauseEvery, "mean interval between SIGSTOPs of a random instance for longer than the lease (0: none)")
	fs.IntVar(&o.Faults, "faults", d.Faults, "instance starts armed with IDEMGATE_FAULT=after_output (each dies at its first completed output)")
	fs.IntVar(&o.LeaseSeconds, "lease", d.LeaseSeconds, "LEASE_SECONDS of the instances")
	fs.IntVar(&o.MaxAttempts, "max-attempts", d.MaxAttempts, "MAX_ATTEMPTS of the instances (0: the function's default)")
	fs.Float64Var(&o.ModelErrors, "model-errors", d.ModelErrors, "fraction of model calls the fake answers 503 or 429 (retryable)")
	fs.StringVar(&o.Bin, "bin", d.Bin, "the function binary (default: go build -o <tmp>/main . at the repo root)")
	fs.StringVar(&o.MySQLDSN, "mysql-dsn", d.MySQLDSN, "MariaDB/MySQL DSN; without a database name a fresh one is created (and dropped unless -keep)")
	fs.StringVar(&o.RedisURL, "redis-url", d.RedisURL, "REDIS_URL of the instances (empty: MySQL alone)")
	fs.Uint64Var(&o.Seed, "seed", d.Seed, "random seed of the plan and the chaos (0: from the clock); timing still varies")
	fs.BoolVar(&o.Keep, "keep", d.Keep, "keep the database and the work directory (objects, instance logs)")
	verbose := fs.Bool("v", false, "print progress lines and the chaos timeline")
	progressMode := fs.String("progress", "auto", progress.FlagUsage)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "chaos: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *verbose {
		o.Log = os.Stderr
	}
	var err error
	if o.Progress, err = progress.Writer(*progressMode, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 2
	}
	// Ctrl-C ends the run early; Run still kills every child it started.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	rep, err := Run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 2
	}
	rep.Print(os.Stdout, *verbose)
	fmt.Printf("elapsed %s\n", time.Since(start).Round(100*time.Millisecond))
	if len(rep.Violations) > 0 {
		return 1
	}
	return 0
}
