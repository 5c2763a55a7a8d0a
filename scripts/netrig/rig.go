package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idemgate/idemgate/internal/dev/netrig"
	"github.com/idemgate/idemgate/internal/dev/proc"
)

// Options are the rig's flags.
type Options struct {
	Delays    []time.Duration // one-way, to Redis and to MariaDB
	Mode      string          // netrig.ModeAuto, ModeNetem, ModeProxy
	C         []int
	Runs      int
	Spawn     int
	N         int // main-phase deliveries (their finished keys feed the duplicates)
	DupN      int
	FirstN    int
	BaseN     int
	Slices    int
	Pin       string
	JSON, MD  string
	Verbose   bool
	Logs      string        // keep each load test's output in this directory
	Profile   string        // perf profiles of the function's and the raw function's phases, per configuration, in this directory
	GenProcs  int           // GOMAXPROCS of the load generator (0: Go's default for its CPUs)
	MaxPerRun time.Duration // -max-duration of each load-test invocation
}

func defaultOptions() Options {
	return Options{Delays: []time.Duration{150 * time.Microsecond, 500 * time.Microsecond}, Mode: netrig.ModeAuto,
		C: []int{32, 400}, Runs: 3, Spawn: 2, N: 600, DupN: 3000, FirstN: 1200, BaseN: 1200, Slices: 10, Pin: "auto",
		MaxPerRun: 30 * time.Minute, GenProcs: 2}
}

// shortOptions are -short's: CI's one configuration, one run, a few hundred
// deliveries a phase (about a minute of load).
func shortOptions() Options {
	o := defaultOptions()
	o.Delays, o.C, o.Runs, o.Spawn, o.N, o.DupN, o.FirstN, o.BaseN, o.Slices =
		[]time.Duration{150 * time.Microsecond}, []int{32}, 1, 1, 200, 1000, 400, 400, 4
	o.MaxPerRun = 4 * time.Minute
	return o
}

func parse(args []string, stderr io.Writer) (Options, error) {
	short := false
	for _, a := range args {
		if a == "-short" || a == "--short" || a == "-short=true" {
			short = true
		}
	}
	o := defaultOptions()
	if short {
		o = shortOptions()
	}
	fs := flag.NewFlagSet("netrig", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: go run ./scripts/netrig [flags]   (as root)\n\n"+
			"Runs the load test with MariaDB, Redis, the function's instances and the load generator in network\n"+
			"namespaces of their own, a one-way delay on the links to Redis and MariaDB and the servers pinned\n"+
			"apart from the caller, and prints each phase's throughput, p50/p99 and CPU per delivery of each\n"+
			"process, and issue 41's goals (min / median / max over -runs, met or not). Exit status 2 on a setup\n"+
			"error (named), 1 on a wrong answer or an effective duplicate, 3 when something was left behind.\n\nflags:\n")
		fs.PrintDefaults()
	}
	fs.Bool("short", false, "CI's short form: c = 32, 150 µs, 1 run of a few hundred deliveries a phase (other flags still apply)")
	delays := fs.String("delay", joinDurations(o.Delays), "one-way delay(s) on the links to Redis and to MariaDB, comma-separated; 0: servers reached directly, no delay")
	fs.StringVar(&o.Mode, "delay-mode", o.Mode, "how the delay is made: netem (tc qdisc; fails naming the missing qdisc where the kernel has none), proxy (the rig's delaying TCP proxy in the server's namespace; its CPU is reported apart), auto (netem if the kernel has it, else proxy; says which)")
	cs := fs.String("c", joinInts(o.C), "concurrency (requests in flight), comma-separated")
	fs.IntVar(&o.Runs, "runs", o.Runs, "runs per configuration (the load test's -repeat: every run interleaves its phases)")
	fs.IntVar(&o.Spawn, "spawn", o.Spawn, "function instances with Redis (and as many without)")
	fs.IntVar(&o.N, "n", o.N, "deliveries of the main phase (mixed duplicates; it finishes the keys the duplicate phases send again)")
	fs.IntVar(&o.DupN, "dup-n", o.DupN, "requests of each pure-duplicate phase")
	fs.IntVar(&o.FirstN, "first-n", o.FirstN, "tasks of each first-delivery and raw-pipeline phase")
	fs.IntVar(&o.BaseN, "base-n", o.BaseN, "operations of the raw INSERT + UPDATE floor and the engine's claim+complete")
	fs.IntVar(&o.Slices, "slices", o.Slices, "interleaved slices per phase")
	fs.StringVar(&o.Pin, "pin", o.Pin, "CPUs: auto (servers apart from the caller where the machine allows), none, or ROLE=CPUS,… with roles gen, fn, redis, mysql (':' separates CPUs in a list)")
	fs.StringVar(&o.JSON, "json", "", "write every configuration's figures to FILE as JSON")
	fs.StringVar(&o.MD, "md", "", "write the goals table to FILE as Markdown")
	fs.BoolVar(&o.Verbose, "v", false, "stream the load test's output")
	fs.IntVar(&o.GenProcs, "gen-procs", o.GenProcs, "GOMAXPROCS of the load generator, which runs the fakes (and the in-generator raw pipeline, reported but not judged) itself: pinned to one CPU Go gives it 1, and on a machine busy with other work the fakes would then answer the instances late; 0: Go's default")
	fs.StringVar(&o.Logs, "logs", "", "keep each configuration's load-test output in DIR (loadtest-c32-150µs.log …)")
	fs.StringVar(&o.Profile, "profile", "", "record the function instances' CPU (first deliveries with Redis, Redis duplicates) and the raw function's with perf record (cpu-clock, call graphs) during those phases' measured slices, into DIR/<configuration>/<phase>/: perf.data, self.txt (perf report --no-children) and by-function.txt (the 40 symbols with the most CPU, callees included); the binaries keep their symbols (the same code). Needs perf")
	fs.DurationVar(&o.MaxPerRun, "max-duration", o.MaxPerRun, "cap on each configuration's load test")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, d := range []struct{ flag, dir string }{{"-logs", o.Logs}, {"-profile", o.Profile}} {
		if d.dir != "" {
			if err := os.MkdirAll(d.dir, 0o755); err != nil {
				return o, fmt.Errorf("%s: %w", d.flag, err)
			}
		}
	}
	var err error
	if o.Delays, err = parseDurations(*delays); err != nil {
		return o, fmt.Errorf("-delay: %w", err)
	}
	if o.C, err = parseInts(*cs); err != nil {
		return o, fmt.Errorf("-c: %w", err)
	}
	switch {
	case o.Runs < 1 || o.Runs > 20:
		return o, errors.New("-runs: want 1 to 20")
	case o.Spawn < 1 || o.Spawn > 8:
		return o, errors.New("-spawn: want 1 to 8")
	case o.N < 1 || o.DupN < 1 || o.FirstN < 1 || o.BaseN < 1 || o.Slices < 1:
		return o, errors.New("-n, -dup-n, -first-n, -base-n, -slices: want ≥ 1")
	}
	for _, c := range o.C {
		if c < 1 || c > 1024 {
			return o, errors.New("-c: want 1 to 1024")
		}
	}
	return o, nil
}

// rig is one run of the command between setup and teardown.
type rig struct {
	o       Options
	out     io.Writer
	work    string
	net     *netrig.Net
	pin     netrig.Pin
	redis   *proc.Redis
	mysql   *proc.MariaDB
	proxies []*netrig.Process
	started []int    // every server process's id, for the final check
	wrong   []string // the configurations whose load test saw a wrong answer
	self    string
	fnBin   string
	ltBin   string
	rawBin  string
}

func (r *rig) say(format string, args ...any) { fmt.Fprintf(r.out, format+"\n", args...) }

// run is the command: 0 done, 1 a wrong answer, 2 a setup error, 3 left
// something behind.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "netrig:", err)
		return 2
	}
	if o.Profile != "" {
		if _, err := netrig.LookPath("perf"); err != nil {
			fmt.Fprintln(stderr, "netrig: -profile: perf not found on PATH (the linux-perf / linux-tools package); no run without the profiles asked for")
			return 2
		}
	}
	if err := netrig.Preflight(o.Mode, maxDuration(o.Delays), netrig.LookPath, netrig.Euid()); err != nil {
		fmt.Fprintln(stderr, "netrig:", err)
		return 2
	}
	r := &rig{o: o, out: stdout}
	results, runErr := r.run(ctx)
	if runErr == nil {
		r.report(results)
		if len(r.wrong) > 0 {
			runErr = &wrongAnswer{strings.Join(r.wrong, "\n")}
		}
	}
	left := r.teardown()
	switch {
	case len(left) > 0:
		fmt.Fprintf(stderr, "netrig: LEFT BEHIND: %s\n", strings.Join(left, "; "))
		if runErr != nil {
			fmt.Fprintln(stderr, "netrig:", runErr)
		}
		return 3
	case runErr != nil:
		fmt.Fprintln(stderr, "netrig:", runErr)
		var wrong *wrongAnswer
		if errors.As(runErr, &wrong) {
			return 1
		}
		return 2
	}
	return 0
}

func (r *rig) run(ctx context.Context) ([]*Config, error) {
	o := r.o
	if stale, err := netrig.RemoveStale(); len(stale) > 0 {
		r.say("removed the namespaces of rigs whose owner no longer runs: %s", strings.Join(stale, " "))
		if err != nil {
			return nil, err
		}
	}
	removeStaleWork(r.say)
	var err error
	// The owner's pid in the name: a rig killed with SIGKILL leaves its work
	// directory, which the next run removes (removeStaleWork).
	if r.work, err = os.MkdirTemp("", fmt.Sprintf("%s%d-", workPrefix, os.Getpid())); err != nil {
		return nil, err
	}
	if r.self, err = os.Executable(); err != nil {
		return nil, err
	}
	if r.pin, err = netrig.ParsePins(o.Pin, runtime.NumCPU()); err != nil {
		return nil, err
	}
	if o.Pin == "auto" {
		if _, ok := netrig.PlanPins(runtime.NumCPU()); !ok {
			r.say("one CPU: nothing pinned (the servers and the caller share it)")
		}
	}
	r.say("building the function and the load test …")
	// With -profile the function and the raw function keep their symbol
	// tables (the same machine code; perf names functions by them).
	build := func(pkg, bin string) (string, error) { return proc.BuildPackage(ctx, pkg, bin, true) }
	if o.Profile != "" {
		build = func(pkg, bin string) (string, error) { return proc.BuildProfiled(ctx, pkg, bin) }
	}
	if r.fnBin, err = build(".", filepath.Join(r.work, "main")); err != nil {
		return nil, err
	}
	if r.ltBin, err = proc.BuildPackage(ctx, "./scripts/loadtest", filepath.Join(r.work, "loadtest"), false); err != nil {
		return nil, err
	}
	// The raw function is built as the function is (scripts/build.sh's flags).
	if r.rawBin, err = build("./scripts/loadtest/rawfn", filepath.Join(r.work, "rawfn")); err != nil {
		return nil, err
	}
	if r.net, err = netrig.Create(ctx, os.Getpid()); err != nil {
		return nil, fmt.Errorf("namespaces: %w", err)
	}
	r.say("namespaces %s: gen %s, fn %s, redis %s, mysql %s (%s.0/24, inside them only); CPUs %s of %d",
		strings.Join(namespaces(r.net), " "), r.net.Addr[netrig.RoleGen], r.net.Addr[netrig.RoleFunction],
		r.net.Addr[netrig.RoleRedis], r.net.Addr[netrig.RoleMySQL], netrig.Subnet, r.pin, runtime.NumCPU())
	if r.redis, err = r.net.StartRedis(ctx, filepath.Join(r.work, "redis"), r.pin[netrig.RoleRedis]); err != nil {
		return nil, err
	}
	r.started = append(r.started, r.redis.Pid())
	if r.mysql, err = r.net.StartMariaDB(ctx, filepath.Join(r.work, "mariadb"), r.pin[netrig.RoleMySQL], maxConnections(o)); err != nil {
		return nil, err
	}
	r.started = append(r.started, r.mysql.Pid())
	var configs []*Config
	for _, d := range o.Delays {
		mode, err := r.net.ResolveMode(ctx, o.Mode, d, func(s string) { r.say("%s", s) })
		if err != nil {
			return configs, err
		}
		for _, c := range o.C {
			cfg := &Config{C: c, Delay: d, Mode: mode}
			// Fresh proxies per configuration: their stats are its own.
			if err := r.setDelay(ctx, mode, d); err != nil {
				return configs, err
			}
			err := r.measure(ctx, cfg)
			cfg.Proxies = r.stopProxies()
			if err != nil {
				return configs, err
			}
			configs = append(configs, cfg)
			r.printConfig(cfg)
		}
		if mode == netrig.ModeNetem { // the next delay starts from none
			for _, role := range []string{netrig.RoleRedis, netrig.RoleMySQL} {
				if err := r.net.Netem(ctx, role, 0); err != nil {
					return configs, err
				}
			}
		}
	}
	return configs, nil
}

// setDelay applies mode: netem on both servers' links, or a proxy in front
// of each (replacing the last delay's), or neither.
func (r *rig) setDelay(ctx context.Context, mode string, d time.Duration) error {
	r.stopProxies()
	switch mode {
	case netrig.ModeNetem:
		for _, role := range []string{netrig.RoleRedis, netrig.RoleMySQL} {
			if err := r.net.Netem(ctx, role, d); err != nil {
				return err
			}
		}
	case netrig.ModeProxy:
		for _, s := range []struct {
			role           string
			listen, target int
		}{{netrig.RoleRedis, netrig.RedisProxyPort, netrig.RedisPort}, {netrig.RoleMySQL, netrig.MySQLProxyPort, netrig.MySQLPort}} {
			p, err := r.net.StartProxy(ctx, r.self, s.role, s.listen, s.target, d, r.pin[s.role], r.work)
			if err != nil {
				return err
			}
			r.proxies = append(r.proxies, p)
			r.started = append(r.started, p.Pid())
		}
	}
	return nil
}

// stopProxies stops the running proxies and reads the stats each wrote at
// its exit.
func (r *rig) stopProxies() map[string]netrig.Stats {
	if len(r.proxies) == 0 {
		return nil
	}
	stats := map[string]netrig.Stats{}
	for _, p := range r.proxies {
		p.Stop(5 * time.Second)
		var s netrig.Stats
		if b, err := os.ReadFile(filepath.Join(r.work, p.Name+".json")); err == nil && json.Unmarshal(b, &s) == nil {
			stats[p.Name] = s
		}
	}
	r.proxies = nil
	return stats
}

// measure runs the load test in the generator's namespace for one
// configuration and reads its figures.
func (r *rig) measure(ctx context.Context, cfg *Config) error {
	o := r.o
	redisPort, mysqlPort := netrig.RedisPort, netrig.MySQLPort
	if cfg.Mode == netrig.ModeProxy {
		redisPort, mysqlPort = netrig.RedisProxyPort, netrig.MySQLProxyPort
	}
	observe := fmt.Sprintf("redis=%d,mariadb=%d", r.redis.Pid(), r.mysql.Pid())
	for _, p := range r.proxies {
		observe += fmt.Sprintf(",%s=%d", p.Name, p.Pid())
	}
	name := fmt.Sprintf("c%d-%s", cfg.C, cfg.Delay)
	jsonPath, logPath := filepath.Join(r.work, name+".json"), filepath.Join(r.work, name+".log")
	args := append(r.net.Exec(netrig.RoleGen, r.pin[netrig.RoleGen]), r.ltBin,
		"-spawn", strconv.Itoa(o.Spawn), "-bin", r.fnBin, "-raw-bin", r.rawBin,
		"-n", strconv.Itoa(o.N), "-c", strconv.Itoa(cfg.C), "-dup-n", strconv.Itoa(o.DupN),
		"-first-n", strconv.Itoa(o.FirstN), "-base-n", strconv.Itoa(o.BaseN), "-repeat", strconv.Itoa(o.Runs),
		"-slices", strconv.Itoa(o.Slices), "-max-duration", o.MaxPerRun.String(),
		"-mysql-dsn", fmt.Sprintf("root@tcp(%s:%d)/idemgate_rig", r.net.Addr[netrig.RoleMySQL], mysqlPort),
		"-redis-url", fmt.Sprintf("redis://%s:%d/0", r.net.Addr[netrig.RoleRedis], redisPort), "-redis-key-prefix", "rig:",
		"-instance-exec", strings.Join(r.net.Exec(netrig.RoleFunction, r.pin[netrig.RoleFunction]), " "),
		"-instance-host", r.net.Addr[netrig.RoleFunction], "-fakes-host", r.net.Addr[netrig.RoleGen],
		"-floors", "mysql", "-notify-only", "-observe", observe, "-json", jsonPath, "-progress", "off")
	if o.Profile != "" {
		args = append(args, "-perf-dir", filepath.Join(o.Profile, name))
	}
	r.say("\n== c = %d, one-way delay %s (%s): %d run(s) of %d first deliveries, %d duplicates a phase …",
		cfg.C, cfg.Delay, cfg.Mode, o.Runs, o.FirstN, o.DupN)
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	var w io.Writer = log
	if o.Verbose {
		w = io.MultiWriter(log, r.out)
	}
	cmd.Stdout, cmd.Stderr = w, w
	// Its temporary files (its work directory, the instances' logs) go
	// under the rig's, which teardown removes whatever happens to it.
	cmd.Env = append(os.Environ(), "TMPDIR="+r.work)
	if o.GenProcs > 0 {
		cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(o.GenProcs))
	}
	// Interrupted, it stops its instances and removes its files itself
	// (SIGTERM); killed after 10 s if not.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	runErr := cmd.Run()
	b, _ := os.ReadFile(logPath)
	if o.Logs != "" {
		_ = os.WriteFile(filepath.Join(o.Logs, "loadtest-"+name+".log"), b, 0o644)
	}
	var exit *exec.ExitError
	switch {
	case runErr == nil:
	case errors.As(runErr, &exit) && exit.ExitCode() == 1:
		// Its figures stand; the configuration carries its problems, and
		// the rig's exit status says so at the end.
		r.wrong = append(r.wrong, fmt.Sprintf("c = %d, delay %s: the load test saw a wrong answer or an effective duplicate:\n%s",
			cfg.C, cfg.Delay, proc.Tail(string(b), 1500)))
	default:
		return fmt.Errorf("load test (c = %d, delay %s): %w\n%s", cfg.C, cfg.Delay, runErr, proc.Tail(string(b), 4000))
	}
	js, err := os.ReadFile(jsonPath)
	if err != nil {
		return err
	}
	if o.Profile != "" {
		r.say("profiles: %s/{first-delivery,dup-redis,raw-function}/ (perf.data, self.txt, by-function.txt)", filepath.Join(o.Profile, name))
	}
	return cfg.read(js)
}

// mysqlPool is the connection pool of every client of the private MariaDB
// the load test starts (the function's instances, the raw function's, the
// generator's baselines): mysqlstore.Open's default MaxOpenConns
// (idempotency/mysqlstore/store.go).
const mysqlPool = 16

// maxConnections is the private MariaDB's max_connections: every pool at
// its limit (the instances with Redis, without, and the raw function's:
// 3 × -spawn, and the generator's, plus its statement probe and the rig's
// own client), twice — a client whose read timed out opens a new
// connection while the server still holds the old one's thread — and the
// largest concurrency besides. MariaDB's default, 151, was too few at
// c = 400 with 500 µs ("Too many connections"), which failed the run.
func maxConnections(o Options) int {
	pools := (3*o.Spawn+1)*mysqlPool + 2
	return 2*pools + slices.Max(o.C)
}

// wrongAnswer: the load test found a non-200 answer or an effective
// duplicate (its exit status 1).
type wrongAnswer struct{ msg string }

func (e *wrongAnswer) Error() string { return e.msg }

// teardown stops every server, removes the namespaces and the work
// directory, and returns what is still there (nothing, normally).
func (r *rig) teardown() []string {
	// Each stop is bounded (SIGKILL after waitGrace): a server hung in its
	// shutdown, or stopped, cannot hang the cleanup.
	r.stopProxies()
	r.redis.Stop(waitGrace)
	r.mysql.StopWithin(waitGrace)
	var left []string
	if r.net != nil {
		if err := r.net.Close(); err != nil {
			left = append(left, err.Error())
		}
		left = append(left, netrig.Leftovers(r.net.Owner)...)
	}
	for _, pid := range r.started {
		if alive(pid) {
			left = append(left, fmt.Sprintf("process %d", pid))
		}
	}
	if r.work != "" {
		if err := os.RemoveAll(r.work); err != nil {
			left = append(left, "work directory "+r.work+": "+err.Error())
		} else if _, err := os.Stat(r.work); err == nil {
			left = append(left, "work directory "+r.work)
		}
	}
	if len(left) == 0 && r.net != nil {
		r.say("\ncleanup: checked, nothing left (no namespace %s%d-*, no process of the rig, no work directory; the private Redis and MariaDB and their data are gone)",
			netrig.Prefix, r.net.Owner)
	}
	return left
}

func namespaces(n *netrig.Net) []string {
	var out []string
	for _, role := range netrig.Roles {
		out = append(out, n.NS[role])
	}
	return out
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// A reaped process is gone; a zombie (state Z) has exited.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func maxDuration(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

func parseDurations(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "0" {
			out = append(out, 0)
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < 0 || d > time.Second {
			return nil, fmt.Errorf("%q: want a duration from 0 to 1s (150us, 0.5ms, 0)", f)
		}
		out = append(out, d)
	}
	return out, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q: not a number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func joinDurations(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		s = append(s, d.String())
	}
	return strings.Join(s, ",")
}

func joinInts(ns []int) string {
	var s []string
	for _, n := range ns {
		s = append(s, strconv.Itoa(n))
	}
	return strings.Join(s, ",")
}

// writeJSON writes v to path.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// workPrefix starts the rig's work directories in the temporary directory:
// <workPrefix><owner pid>-<random>.
const workPrefix = "idemgate-netrig-"

// removeStaleWork removes the work directories of rigs whose owner no
// longer runs (their servers, inside the owner's namespaces, were ended by
// netrig.RemoveStale).
func removeStaleWork(say func(string, ...any)) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), workPrefix+"*-*"))
	for _, d := range dirs {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), workPrefix), "-")
		if p, err := strconv.Atoi(pid); err == nil && p > 0 && p != os.Getpid() && !alive(p) {
			if os.RemoveAll(d) == nil {
				say("removed the work directory of a rig that no longer runs: %s", d)
			}
		}
	}
}
