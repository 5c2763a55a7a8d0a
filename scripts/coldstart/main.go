// Command coldstart measures the deploy artefact: it builds the
// function as scripts/build.sh does (linux/amd64, CGO off, -trimpath,
// -ldflags='-s -w', zipped), then starts the binary -runs times and times
// each start from exec to the first 200 answer of POST /initialize (polled
// every 200 µs), which is what FC waits for before the first invocation.
// It reads VmRSS from /proc/<pid>/status right after /initialize and again
// after -idle, and prints min/median/max with the binary and zip sizes.
//
//	go run ./scripts/coldstart -runs 20
//
// /initialize pings MySQL (the function's initializer), so the figure
// includes connecting to the database; -embedded starts the binary without
// MYSQL_DSN and REDIS_URL (the embedded store) instead. The binary is in the
// page cache after the first run, as it is on a warm FC host; the first run
// is reported apart. Everything listens on and dials loopback.
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
	"slices"
	"sync/atomic"
	"time"

	"github.com/idemgate/idemgate/internal/dev/proc"
	"github.com/idemgate/idemgate/internal/dev/progress"
)

func main() { os.Exit(run(os.Args[1:])) }

type options struct {
	runs               int
	bin, zip           string
	mysqlDSN, redisURL string
	embedded           bool
	idle, timeout      time.Duration
	jsonOut            string
	keep               bool
	progress           io.Writer // the progress bar over the starts; nil: none
}

// Report is what -json writes.
type Report struct {
	Runs         int       `json:"runs"`
	Mode         string    `json:"mode"`
	BinaryBytes  int64     `json:"binary_bytes"`
	ZipBytes     int64     `json:"zip_bytes"`
	FirstRunMs   float64   `json:"first_run_ms"`
	ListenMs     []float64 `json:"listen_ms"`     // exec → first HTTP answer of any status
	InitializeMs []float64 `json:"initialize_ms"` // exec → /initialize answered 200
	RSSInitBytes []int64   `json:"rss_after_initialize_bytes"`
	RSSIdleBytes []int64   `json:"rss_idle_bytes"`
}

func run(args []string) int {
	var o options
	fs := flag.NewFlagSet("coldstart", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run ./scripts/coldstart [flags]\n\n"+
			"Builds the deploy artefact like scripts/build.sh, then times exec → POST /initialize answered 200\n"+
			"over -runs starts, and reads the RSS after /initialize and after -idle. Prints min/median/max.\n\nflags:\n")
		fs.PrintDefaults()
	}
	fs.IntVar(&o.runs, "runs", 20, "starts to time (after one untimed start that warms the page cache)")
	fs.StringVar(&o.bin, "bin", "", "a built binary (default: OUT_DIR=<tmp> bash scripts/build.sh)")
	fs.StringVar(&o.zip, "zip", "", "its deploy zip, for the size (default: the one build.sh wrote)")
	fs.StringVar(&o.mysqlDSN, "mysql-dsn", "root@tcp(127.0.0.1:3306)/idemgate_load", "MYSQL_DSN of the instance (/initialize pings it); its database is created if missing")
	fs.StringVar(&o.redisURL, "redis-url", "redis://127.0.0.1:6379/14", "REDIS_URL of the instance")
	fs.BoolVar(&o.embedded, "embedded", false, "start without MYSQL_DSN and REDIS_URL (embedded store under a temporary STATE_DIR)")
	fs.DurationVar(&o.idle, "idle", 500*time.Millisecond, "idle time after /initialize before the second RSS reading")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "bound of one start")
	fs.StringVar(&o.jsonOut, "json", "", "write the figures to FILE as JSON")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary build directory")
	progressMode := fs.String("progress", "auto", progress.FlagUsage)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if o.runs < 1 || o.runs > 1000 || o.timeout <= 0 || o.idle < 0 {
		fmt.Fprintln(os.Stderr, "coldstart: -runs 1..1000, -timeout > 0, -idle ≥ 0")
		return 2
	}
	var err error
	if o.progress, err = progress.Writer(*progressMode, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "coldstart:", err)
		return 2
	}
	rep, err := measure(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "coldstart:", err)
		return 1
	}
	print(rep)
	if o.jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(o.jsonOut, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "coldstart:", err)
			return 1
		}
	}
	return 0
}

func measure(ctx context.Context, o options) (*Report, error) {
	tmp, err := os.MkdirTemp("", "idemgate-coldstart-")
	if err != nil {
		return nil, err
	}
	if !o.keep {
		defer os.RemoveAll(tmp)
	}
	if o.bin == "" {
		if err := build(ctx, tmp, &o); err != nil {
			return nil, err
		}
	}
	rep := &Report{Runs: o.runs, Mode: "mysql+redis"}
	if st, err := os.Stat(o.bin); err == nil {
		rep.BinaryBytes = st.Size()
	} else {
		return nil, err
	}
	if o.zip != "" {
		if st, err := os.Stat(o.zip); err == nil {
			rep.ZipBytes = st.Size()
		}
	}
	env := []string{"LLM_MODEL=offline", "STATE_DIR=" + filepath.Join(tmp, "state")}
	if o.embedded {
		rep.Mode = "embedded"
	} else {
		// /initialize checks the database exists and is migrated: the
		// binary's own migrate creates and migrates it.
		if _, err := proc.CLI(ctx, o.bin, []string{"MYSQL_DSN=" + o.mysqlDSN}, "migrate", "--create-database"); err != nil {
			return nil, err
		}
		env = append(env, "MYSQL_DSN="+o.mysqlDSN, "REDIS_URL="+o.redisURL)
	}
	var done atomic.Int64
	bar := progress.New(o.progress)
	bar.Start("starts", o.runs+1, &done)
	defer bar.Stop()
	for i := 0; i <= o.runs; i++ {
		s, err := start(ctx, o.bin, env, o.timeout, o.idle)
		if err != nil {
			return nil, fmt.Errorf("start %d: %w", i, err)
		}
		done.Add(1)
		if i == 0 { // page cache and the database's connection path warmed
			rep.FirstRunMs = s.initialize
			continue
		}
		rep.ListenMs = append(rep.ListenMs, s.listen)
		rep.InitializeMs = append(rep.InitializeMs, s.initialize)
		rep.RSSInitBytes = append(rep.RSSInitBytes, s.rssInit)
		rep.RSSIdleBytes = append(rep.RSSIdleBytes, s.rssIdle)
	}
	return rep, nil
}

// build runs scripts/build.sh into dir and points o at its binary and zip.
func build(ctx context.Context, dir string, o *options) error {
	root, err := proc.RepoRoot()
	if err != nil {
		return fmt.Errorf("%w (or give -bin)", err)
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "build.sh"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "OUT_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("scripts/build.sh: %v\n%s", err, out)
	}
	o.bin = filepath.Join(dir, "target", "main")
	if o.zip == "" {
		o.zip = filepath.Join(dir, "dist", "function.zip")
	}
	return nil
}

type startResult struct {
	listen, initialize float64 // ms since exec
	rssInit, rssIdle   int64
}

// start times one start of bin (exec → listening → /initialize 200, polled
// every 200 µs) and reads its RSS then and after idle. A non-200 answer of
// /initialize ends the measurement at once, with the answer's body.
func start(ctx context.Context, bin string, env []string, timeout, idle time.Duration) (startResult, error) {
	var r startResult
	in, err := proc.Start(ctx, bin, proc.Options{Env: env, Timeout: timeout, Poll: 200 * time.Microsecond,
		RequestID: "coldstart"})
	if err != nil {
		return r, err
	}
	defer in.Stop()
	r.listen, r.initialize = ms(in.Listening.Sub(in.Started)), ms(in.Ready.Sub(in.Started))
	if r.rssInit, err = proc.RSS(in.Pid()); err != nil {
		return r, err
	}
	time.Sleep(idle)
	if r.rssIdle, err = proc.RSS(in.Pid()); err != nil {
		return r, err
	}
	return r, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func stats(xs []float64) (lo, med, hi float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	med = s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[0], med, s[len(s)-1]
}

func mb(xs []int64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x) / (1 << 20)
	}
	return out
}

func print(r *Report) {
	fmt.Printf("cold start of the deploy binary (%s), %d timed starts (plus one untimed: %.1f ms)\n", r.Mode, r.Runs, r.FirstRunMs)
	fmt.Printf("%-40s %10s %10s %10s\n", "", "min", "median", "max")
	row := func(name string, xs []float64, unit string, goal string) {
		lo, med, hi := stats(xs)
		fmt.Printf("%-40s %10.2f %10.2f %10.2f %s%s\n", name, lo, med, hi, unit, goal)
	}
	row("exec → listening (TCP connect succeeds)", r.ListenMs, " ms", "")
	row("exec → /initialize 200 (cold start)", r.InitializeMs, " ms", "   goal: median ≤ 50 ms")
	row("RSS right after /initialize", mb(r.RSSInitBytes), " MB", "")
	row("RSS idle", mb(r.RSSIdleBytes), " MB", "   goal: ≤ 30 MB")
	fmt.Printf("binary %.2f MB (%d bytes)\n", float64(r.BinaryBytes)/(1<<20), r.BinaryBytes)
	if r.ZipBytes > 0 {
		fmt.Printf("zip    %.2f MB (%d bytes)   goal: ≤ 15 MB\n", float64(r.ZipBytes)/(1<<20), r.ZipBytes)
	}
}
