// Command loadtest is the load test. It replays a stream of
// EventBridge CloudEvents (summarize tasks of tenant acme, unique content per
// business action) against running custom-runtime instances of the function,
// with a chosen share of duplicates — redeliveries (same event, new FC request
// id), double submits (new event id, same data) and concurrent bursts (the
// same event to several instances at once) — and reports:
//
//   - events/s and p50/p90/p99 latency per class of answer: "first" (decision
//     FIRST or TAKEOVER: the delivery that executed) and "duplicate";
//   - the duplicate tiers apart, in two more phases of pure duplicates of keys
//     already finished: "dup-redis" (instances with REDIS_URL: the Lua script
//     answers) and "dup-mysql" (instances without REDIS_URL: MySQL answers).
//     The outcome JSON does not say which tier answered, and nothing is added
//     to the function's contract for it; the function's own per-minute
//     counters (idempotency_stats, flushed when the spawned instances stop)
//     cross-check the split afterwards;
//   - the effective duplicate rate (executions that were not the first of
//     their business action: per key, answers with duplicate=false beyond
//     one; MySQL records with attempt > 1; attempt output objects per key),
//     which must be 0.00 %, and the model calls saved;
//   - first deliveries apart (fresh actions only), to the instances with Redis
//     and without, with and without notify, interleaved with the raw pipeline:
//     the external work a task cannot avoid (an INSERT into a unique key, one
//     model call, three create-once V4-signed PUTs, the UPDATE to SUCCEEDED,
//     one notify POST) done without idempotency logic, both inside the load
//     generator (raw-pipeline) and as the raw function (raw-function:
//     scripts/loadtest/rawfn, as many processes as instances with Redis,
//     spawned, invoked and measured as they are; every task checked to have
//     done the whole floor);
//   - MySQL statements per executed task, from SHOW GLOBAL STATUS deltas
//     around each slice of each phase (sqlstat.go says how other clients of
//     the server are kept out of the figures);
//   - baselines at the same concurrency in the same run: one raw EVALSHA of a
//     set-if-absent script, a raw INSERT into a unique key plus an UPDATE (on
//     a scratch table), a bare net/http handler doing one EVALSHA hit by the
//     same HTTP client code, and the engine's claim+complete and Redis
//     duplicate in-process — with the ratios side by side.
//
// Run from the repository root with MariaDB and Redis up:
//
//	go run ./scripts/loadtest -spawn 2 -n 2000 -c 16 -repeat 3
//	go run ./scripts/loadtest -spawn 4 -rate 4200 -window 30s -c 400 -dup-n 0 -first-n 0 -base-n 0
//	go run ./scripts/loadtest -targets http://127.0.0.1:9000,http://127.0.0.1:9001 -n 500
//
// -spawn N builds the function (CGO off, -trimpath, -s -w, as scripts/build.sh
// does), migrates the database and starts N instances (plus N without
// REDIS_URL for the dup-mysql and first-delivery phases) whose results go to
// a fake OSS that checks V4 signatures, whose model is a fake
// chat-completions endpoint and whose notify receiver is allowed on loopback,
// all three inside the load generator (fakes.go). -rate offers the main
// phase's deliveries open loop (the seed's shape: 4 200/s for 30 s). Everything
// listens on and dials loopback; every loop is bounded in count and by
// -max-duration. -perf-dir DIR profiles the instances with Redis and the raw
// function with perf record during their phases' measured slices (perf.go);
// the binaries it builds then keep their symbols.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idemgate/idemgate/internal/dev/progress"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	d := DefaultOptions()
	o := d
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run ./scripts/loadtest [flags]\n\n"+
			"Replays EventBridge CloudEvents with injected duplicates against custom-runtime instances of the\n"+
			"function and prints throughput, latency per decision class, the effective duplicate rate (must be\n"+
			"0.00 %%), model calls saved, MySQL statements per task, and baselines (raw EVALSHA, raw INSERT+UPDATE,\n"+
			"bare HTTP handler, the raw pipeline of a first delivery) with their ratios. Exit status 1 if an\n"+
			"effective duplicate or a non-200 answer was seen, 2 on setup errors.\n\nflags:\n")
		fs.PrintDefaults()
	}
	targets := fs.String("targets", "", "comma-separated base URLs of running instances (with REDIS_URL unless -redis=false)")
	mysqlTargets := fs.String("mysql-targets", "", "comma-separated base URLs of running instances without REDIS_URL, for the dup-mysql phase (unused with -redis=false)")
	fs.IntVar(&o.Spawn, "spawn", d.Spawn, "build and start N instances (and N more without REDIS_URL for the dup-mysql phase)")
	fs.StringVar(&o.Bin, "bin", d.Bin, "the function binary for -spawn (default: built from the repository root)")
	fs.StringVar(&o.BareBin, "bare-bin", d.BareBin, "the bare-handler server of the baseline, run as -spawn's instances are (default: built from scripts/loadtest/bareserver)")
	fs.StringVar(&o.RawBin, "raw-bin", d.RawBin, "the raw function's server (the raw pipeline behind the custom-runtime protocol), run as -spawn's instances are, as many as with Redis, for the raw-function phases (default: built from scripts/loadtest/rawfn)")
	fs.StringVar(&o.MySQLDSN, "mysql-dsn", d.MySQLDSN, "MYSQL_DSN of spawned instances, the baselines and the MySQL check (with -targets: give the instances' database); created if missing. Its server's SHOW GLOBAL STATUS gives the statements per task")
	fs.BoolVar(&o.PrivateMySQL, "private-mysql", false, "start a MariaDB server of the run's own (mariadb-install-db and mariadbd, in the work directory) and use -mysql-dsn's database name there: the statements per task are GLOBAL counters, which every other client of a shared server moves; needs -spawn")
	fs.StringVar(&o.RedisURL, "redis-url", d.RedisURL, "REDIS_URL of spawned instances and the baselines")
	fs.StringVar(&o.RedisKeyPrefix, "redis-key-prefix", d.RedisKeyPrefix, "REDIS_KEY_PREFIX of spawned instances; also starts the baselines' and bare handler's keys")
	fs.BoolVar(&o.Redis, "redis", d.Redis, "the instances use Redis; false: spawned instances get no REDIS_URL (MySQL answers every duplicate)")
	fs.IntVar(&o.N, "n", d.N, "deliveries in the main phase")
	fs.IntVar(&o.C, "c", d.C, "concurrency: requests in flight (a burst takes one slot per copy)")
	fs.Float64Var(&o.DupRate, "dup-rate", d.DupRate, "share of the main phase's deliveries that are duplicates, in %")
	mix := fs.String("mix", d.Mix.String(), "weights of the duplicate kinds: redeliver (same event, new FC request id), double (new event id, same data), burst (concurrent copies)")
	fs.IntVar(&o.BurstMax, "burst-max", d.BurstMax, "largest burst (original + copies in flight at once); capped by -c")
	fs.IntVar(&o.DupN, "dup-n", d.DupN, "requests in each pure-duplicate phase (dup-redis, dup-mysql) and each bare-handler phase compared with them; 0: skip; -1: 5 × -n (at thousands a second, fewer would make each interleaved slice a few ms)")
	fs.IntVar(&o.FirstN, "first-n", d.FirstN, "tasks in each first-delivery phase (first deliveries only, with and without Redis, with and without notify) and each raw-pipeline phase compared with them; 0: skip; -1: same as -n; needs -spawn")
	fs.Float64Var(&o.Rate, "rate", d.Rate, "offer the main phase's deliveries at this many per second (open loop, at most -c in flight) for -window; 0: closed loop, -n deliveries at -c")
	fs.DurationVar(&o.Window, "window", d.Window, "with -rate: how long deliveries are offered (-n becomes rate × window); deliveries not sent by then are reported as backlog")
	fs.IntVar(&o.BaseN, "base-n", d.BaseN, "operations of each baseline; 0: skip the baselines; -1: same as -n")
	fs.IntVar(&o.Slices, "slices", d.Slices, "interleave the compared phases in this many alternating slices (A B, B A, …) so that drift hits them alike")
	fs.IntVar(&o.Repeat, "repeat", d.Repeat, "repeat the whole measurement R times (min/median/max summary at the end)")
	fs.DurationVar(&o.Timeout, "timeout", d.Timeout, "per-request timeout")
	fs.DurationVar(&o.MaxDuration, "max-duration", d.MaxDuration, "cap on the whole run")
	fs.StringVar(&o.CSV, "csv", "", "write one row per request to FILE")
	fs.StringVar(&o.PNG, "png", "", "write a latency histogram per class to FILE (PNG)")
	fs.StringVar(&o.JSON, "json", "", "write the summary (every run's figures) to FILE as JSON")
	fs.Uint64Var(&o.Seed, "seed", 0, "random seed of the plan (0: from the clock)")
	instanceWrap := fs.String("instance-exec", "", "run each spawned instance through this command, which must exec it in the same process (space-separated, e.g. 'ip netns exec NS taskset -c 1'; scripts/netrig sets it)")
	fs.StringVar(&o.InstanceHost, "instance-host", "", "the address spawned instances are reached at (default 127.0.0.1; with -instance-exec: their namespace's address)")
	fs.StringVar(&o.FakesHost, "fakes-host", "", "the address the fake OSS, model and notify receiver listen on (default loopback; scripts/netrig: the load generator's namespace address)")
	fs.StringVar(&o.Floors, "floors", FloorsAll, "the baselines: all (bare handler processes, Redis and MySQL floors), or mysql (raw INSERT+UPDATE and the engine's claim+complete only: no bare handler, which listens on loopback)")
	fs.BoolVar(&o.NoQuiet, "notify-only", false, "run only the first-delivery and raw-pipeline phases with notify (not their no-notify twins)")
	observe := fs.String("observe", "", "more processes whose CPU each phase is charged, per request, beside the instances and this program: NAME=PID[+PID…],… (scripts/netrig: the servers and its delay proxies)")
	fs.StringVar(&o.PerfDir, "perf-dir", "", "profile the instances with Redis in the first-delivery and dup-redis phases, and the raw function in its phase, with perf record (cpu-clock, call graphs; only during those phases' measured slices) into DIR/<phase>/: perf.data, self.txt (perf report --no-children) and by-function.txt (the 40 symbols with the most CPU, callees included); the binaries built here keep their symbols. Needs -spawn and perf")
	fs.BoolVar(&o.Keep, "keep", false, "keep the work directory of spawned instances (logs, result objects)")
	progressMode := fs.String("progress", "auto", progress.FlagUsage)
	var err error
	if err = fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "loadtest: unexpected arguments %q\n", fs.Args())
		return 2
	}
	o.InstanceWrap = strings.Fields(*instanceWrap)
	if o.Observe, err = parseObserve(*observe); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest: -observe:", err)
		return 2
	}
	o.Targets = splitList(*targets)
	o.MySQLTargets = splitList(*mysqlTargets)
	if o.Mix, err = ParseMix(*mix); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest: -mix:", err)
		return 2
	}
	if o.Progress, err = progress.Writer(*progressMode, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		return 2
	}
	o.Log = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, err := Run(ctx, o, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		return 2
	}
	if !sum.OK() {
		return 1
	}
	return 0
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimRight(strings.TrimSpace(p), "/"); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Options configure a load test. Start from DefaultOptions.
type Options struct {
	Targets      []string // running instances (with Redis unless !Redis)
	MySQLTargets []string // running instances without REDIS_URL (dup-mysql phase)
	Spawn        int      // > 0: build and start this many instances (and as many without Redis)
	Bin          string
	BareBin      string // the bareserver binary; "": built from the repository
	RawBin       string // the raw function's binary (scripts/loadtest/rawfn); "": built from the repository
	MySQLDSN     string
	PrivateMySQL bool // start a MariaDB of the run's own; MySQLDSN names the database
	RedisURL     string
	// RedisKeyPrefix starts every Redis key of the run: the instances'
	// (REDIS_KEY_PREFIX), the bare handler's and the baselines'.
	RedisKeyPrefix string
	Redis          bool
	N, C           int
	DupRate        float64 // percent
	Mix            Mix
	BurstMax       int
	DupN, BaseN    int           // -1: 5×N, N
	FirstN         int           // -1: N
	Rate           float64       // > 0: main phase offered at this rate (deliveries/s)
	Window         time.Duration // with Rate: how long it is offered
	Repeat         int
	Slices         int
	Timeout        time.Duration
	MaxDuration    time.Duration
	CSV, PNG       string
	JSON           string
	Seed           uint64
	Keep           bool
	// InstanceWrap and InstanceHost place the spawned instances (proc.Options
	// Wrap and Host); FakesHost is where the fakes listen ("": loopback).
	InstanceWrap []string
	InstanceHost string
	FakesHost    string
	Floors       string           // FloorsAll or FloorsMySQL
	NoQuiet      bool             // -notify-only
	Observe      map[string][]int // more processes charged per phase (-observe)
	WorkDir      string           // "": a temporary directory
	PerfDir      string           // -perf-dir: perf profiles of the profiled phases (perf.go)
	// Progress receives the progress bar (nil: none); Log receives setup
	// lines (nil: none).
	Progress, Log io.Writer
}

// DefaultOptions are the flags' defaults.
func DefaultOptions() Options {
	return Options{MySQLDSN: "root@tcp(127.0.0.1:3306)/idemgate_load", RedisURL: "redis://127.0.0.1:6379/14",
		Redis: true, N: 2000, C: 16, DupRate: 11.7, Mix: Mix{Redeliver: 40, Double: 30, Burst: 30}, BurstMax: 4,
		DupN: -1, BaseN: -1, FirstN: -1, Floors: FloorsAll, Window: 30 * time.Second, Repeat: 1, Slices: 10, Timeout: 30 * time.Second, MaxDuration: 20 * time.Minute}
}

func (o *Options) check() error {
	switch {
	case o.Spawn < 0 || o.Spawn > 32:
		return errors.New("-spawn: want 0 to 32")
	case o.Spawn == 0 && len(o.Targets) == 0:
		return errors.New("give -targets URL,… or -spawn N")
	case o.Spawn > 0 && (len(o.Targets) > 0 || len(o.MySQLTargets) > 0):
		return errors.New("-spawn and -targets/-mysql-targets exclude each other")
	case o.PrivateMySQL && o.Spawn == 0:
		return errors.New("-private-mysql needs -spawn: instances given by -targets use their own server")
	case o.N < 1 || o.N > 1_000_000:
		return errors.New("-n: want 1 to 1000000")
	case o.C < 1 || o.C > 1024:
		return errors.New("-c: want 1 to 1024")
	case o.DupRate < 0 || o.DupRate >= 100:
		return errors.New("-dup-rate: want 0 ≤ rate < 100 (percent)")
	case o.BurstMax < 2 || o.BurstMax > 64:
		return errors.New("-burst-max: want 2 to 64")
	case o.DupN < -1 || o.DupN > 1_000_000 || o.BaseN < -1 || o.BaseN > 1_000_000 || o.FirstN < -1 || o.FirstN > 1_000_000:
		return errors.New("-dup-n, -base-n, -first-n: want -1 to 1000000")
	case o.Rate < 0 || o.Rate > 100_000 || (o.Rate > 0 && (o.Window <= 0 || o.Window > time.Hour)):
		return errors.New("-rate: want 0 to 100000 per second, with -window from 1ns to 1h")
	case o.Slices < 1 || o.Slices > 1000:
		return errors.New("-slices: want 1 to 1000")
	case o.Repeat < 1 || o.Repeat > 100:
		return errors.New("-repeat: want 1 to 100")
	case o.Timeout <= 0 || o.MaxDuration <= 0:
		return errors.New("-timeout, -max-duration: want > 0")
	case o.Floors != FloorsAll && o.Floors != FloorsMySQL:
		return fmt.Errorf("-floors: want %s or %s", FloorsAll, FloorsMySQL)
	case len(o.InstanceWrap) > 0 && o.Spawn == 0:
		return errors.New("-instance-exec needs -spawn")
	case o.PerfDir != "" && o.Spawn == 0:
		return errors.New("-perf-dir needs -spawn: it profiles the processes the load test starts")
	}
	if o.PerfDir != "" {
		if _, err := exec.LookPath("perf"); err != nil {
			return ErrNoPerf
		}
	}
	if o.Rate > 0 {
		o.N = max(1, int(o.Rate*o.Window.Seconds()+0.5))
	}
	if o.DupN == -1 {
		o.DupN = 5 * o.N
	}
	switch {
	case o.FirstN == -1 && o.Spawn > 0:
		o.FirstN = o.N
	case o.FirstN == -1: // -targets: the instances' OSS, model and notify are not the fakes the floor uses
		o.FirstN = 0
	case o.FirstN > 0 && o.Spawn == 0:
		return errors.New("-first-n needs -spawn: the instances must use the load test's fake OSS, model and notify receiver")
	}
	if o.BaseN == -1 {
		o.BaseN = o.N
	}
	return nil
}

// The baselines of -floors.
const (
	FloorsAll   = "all"
	FloorsMySQL = "mysql"
)

// bare says whether the bare handler's processes run (they listen on
// loopback, which a rig's other namespaces cannot reach).
func (o *Options) bare() bool { return o.Floors != FloorsMySQL }

// parseObserve reads -observe: NAME=PID[+PID…],…
func parseObserve(s string) (map[string][]int, error) {
	m := map[string][]int{}
	for _, item := range splitList(s) {
		name, pids, ok := strings.Cut(item, "=")
		if !ok || name == "" || pids == "" {
			return nil, fmt.Errorf("%q: want NAME=PID[+PID…]", item)
		}
		if _, dup := m[name]; dup || name == procFunction || name == procGenerator {
			return nil, fmt.Errorf("%q: the name is taken", name)
		}
		for _, p := range strings.Split(pids, "+") {
			pid, err := strconv.Atoi(p)
			if err != nil || pid <= 0 {
				return nil, fmt.Errorf("%q: %q is not a process id", item, p)
			}
			m[name] = append(m[name], pid)
		}
	}
	return m, nil
}
