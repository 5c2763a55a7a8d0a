package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/idemgate/idemgate/internal/devbuild"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/idempotency/keys"
	"github.com/idemgate/idemgate/idempotency/redisfast"
)

// Options configure one run. Start from DefaultOptions.
type Options struct {
	Instances    int
	Keys         int
	Deliveries   int           // average deliveries per key
	Duration     time.Duration // cap on the stream: chaos and new deliveries stop then
	KillEvery    time.Duration // ≤ 0: no kills
	PauseEvery   time.Duration // ≤ 0: no pauses
	Faults       int           // instance starts armed with IDEMGATE_FAULT=after_output
	LeaseSeconds int
	MaxAttempts  int     // 0: the function's default
	ModelErrors  float64 // fraction of model calls answered 503 or 429
	Bin          string  // "": built from the repo root
	// MySQLDSN: without a database name a fresh database is created on that
	// server (dropped at the end unless Keep); with one, it is used as is and
	// should be empty (a record of another key is reported).
	MySQLDSN string
	RedisURL string // "": the instances run on MySQL alone
	Seed     uint64 // 0: from the clock
	Keep     bool
	WorkDir  string    // "": a temporary directory (removed unless Keep or a violation)
	Log      io.Writer // progress lines; nil: none
}

// DefaultOptions are the flags' defaults.
func DefaultOptions() Options {
	return Options{Instances: 3, Keys: 40, Deliveries: 4, Duration: time.Minute, KillEvery: 4 * time.Second,
		PauseEvery: 5 * time.Second, Faults: 2, LeaseSeconds: 2, ModelErrors: 0.07, MySQLDSN: "root@tcp(127.0.0.1:3306)/",
		RedisURL: "redis://127.0.0.1:6379/15"}
}

func (o Options) check() error {
	switch {
	case o.Instances < 1 || o.Instances > 32:
		return errors.New("instances: want 1 to 32")
	case o.Keys < 1 || o.Keys > 5000:
		return errors.New("keys: want 1 to 5000")
	case o.Deliveries < 1 || o.Deliveries > 50:
		return errors.New("deliveries: want 1 to 50")
	case o.Duration < 2*time.Second || o.Duration > time.Hour:
		return errors.New("duration: want 2s to 1h")
	case o.LeaseSeconds < 1 || o.LeaseSeconds > 60:
		return errors.New("lease: want 1 to 60 seconds")
	case o.Faults < 0 || o.MaxAttempts < 0:
		return errors.New("faults, max-attempts: want ≥ 0")
	case o.ModelErrors < 0 || o.ModelErrors > 1:
		return errors.New("model-errors: want 0 to 1")
	}
	return nil
}

// DeadKey is a key none of whose deliveries succeeded: FC would have put
// every one of them in its failure destination.
type DeadKey struct {
	Key           string
	Status        string // the record's final status, NO_RECORD when none was written
	Attempt       int
	LastErrorCode string
	BySweeper     bool // the sweeper completed it after the deliveries gave up
}

// Report is what a run found.
type Report struct {
	Seed                                     uint64
	Instances, Keys, Deliveries              int
	Kinds                                    map[string]int // deliveries by kind
	Bursts                                   int            // deliveries started together with another of their key
	Tries, FCRetries                         int            // HTTP invocations, and those that were FC retries
	Answered, Duplicates, InProgress         int            // 200 answers; of them duplicates, and "in progress" answers
	Executions                               int            // answered invocations that claimed the key and ran it
	Failures                                 map[string]int // failed tries by errorType ("connection" when no answer came)
	ModelCalls, ModelErrors                  int            // calls the model fake received; those it answered 429/503
	Attempts                                 int            // sum of the records' attempt
	Kills, Pauses, FaultStarts, FaultDeaths  int
	Restarts                                 int
	DeadLetters, DeadExhausted, DeadFinal    int // deliveries sent to the failure destination: all, retries spent, FINAL answer
	Unsent                                   int // deliveries not started when the duration cap came
	Abandoned                                int // deliveries still under way when the drain limit came
	DeadKeys                                 []DeadKey
	RunningBeforeSweep, RetryableBeforeSweep int
	Sweeps, SweepRedriven, SweepFinished     int
	Succeeded, FailedFinal, NoRecord         int
	FinalCodes                               map[string]int // last_error_code of FAILED_FINAL records
	Violations                               []string
	Unsuccessful                             []string // what happened to each key that did not succeed (printed with -v)
	Timeline                                 []string // chaos actions, in order
	WorkDir, Database                        string   // kept (Keep, or a violation) when not empty
	StreamTime, Elapsed                      time.Duration
}

// Run performs one chaos run. An error means the run could not be carried
// out; invariant violations are in Report.Violations.
func Run(ctx context.Context, o Options) (rep Report, err error) {
	if err := o.check(); err != nil {
		return rep, err
	}
	began := time.Now()
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	rep.Seed, rep.Instances, rep.Keys = o.Seed, o.Instances, o.Keys
	logf := func(format string, a ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "chaos: "+format+"\n", a...)
		}
	}
	rnd := newRand(o.Seed)
	// The run id is never from the seed: keys must not repeat across runs,
	// or Redis (shared, 300 s TTL) would answer from an earlier run.
	runID := randomHex(4)

	work := o.WorkDir
	if work == "" {
		if work, err = os.MkdirTemp("", "idemgate-chaos-"); err != nil {
			return rep, err
		}
		defer func() {
			if o.Keep || len(rep.Violations) > 0 {
				rep.WorkDir = work
				return
			}
			_ = os.RemoveAll(work)
		}()
	}
	stateDir, logDir := filepath.Join(work, "state"), filepath.Join(work, "logs")
	for _, d := range []string{stateDir, logDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return rep, err
		}
	}

	bin := o.Bin
	if bin == "" {
		logf("building the function")
		if bin, err = devbuild.Build(ctx, filepath.Join(work, "bin"), false); err != nil {
			return rep, err
		}
	}
	dsn, dbName, dropDB, err := prepareDB(ctx, o.MySQLDSN)
	if err != nil {
		return rep, err
	}
	defer func() {
		if o.Keep {
			rep.Database = dbName
			return
		}
		dropDB()
	}()

	model, err := startModel(rnd, o.ModelErrors)
	if err != nil {
		return rep, err
	}
	defer model.close()

	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"MYSQL_DSN=" + dsn, "STATE_DIR=" + stateDir, "LLM_BASE_URL=" + model.url + "/v1",
		"LLM_API_KEY=" + modelAPIKey, "LLM_MODEL=qwen-plus", "LLM_TIMEOUT_SECONDS=10",
		fmt.Sprintf("LEASE_SECONDS=%d", o.LeaseSeconds)}
	if o.RedisURL != "" {
		env = append(env, "REDIS_URL="+o.RedisURL)
	}
	if o.MaxAttempts > 0 {
		env = append(env, fmt.Sprintf("MAX_ATTEMPTS=%d", o.MaxAttempts))
	}
	if out, err := runCLI(ctx, bin, env, "migrate"); err != nil {
		return rep, fmt.Errorf("migrate: %w\n%s", err, out)
	}

	plans, err := makePlan(runID, o, rnd)
	if err != nil {
		return rep, err
	}
	defer cleanRedis(o.RedisURL, plans)
	rep.Kinds = map[string]int{}
	for _, p := range plans {
		rep.Deliveries += len(p.deliveries)
		for _, d := range p.deliveries {
			rep.Kinds[d.kind]++
			if d.burst {
				rep.Bursts++
			}
		}
	}

	clock := &timeline{start: time.Now()}
	f := newFleet(bin, env, logDir, rnd, clock, logf)
	defer f.stop(false) // also on an early return or a panic: no child outlives the run
	f.launch(o.Instances, o.Faults)
	if err := f.waitReady(ctx, o.Instances, 30*time.Second); err != nil {
		return rep, err
	}

	watch := &watcher{dir: filepath.Join(stateDir, "results", "tasks"), first: map[string]string{}, changed: map[string]string{}}
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watchWG sync.WaitGroup
	watchWG.Go(func() { watch.run(watchCtx, 200*time.Millisecond) })
	defer func() { stopWatch(); watchWG.Wait() }()

	// The stream, with the chaos beside it.
	logf("streaming %d deliveries of %d keys to %d instances", rep.Deliveries, o.Keys, o.Instances)
	streamStart := time.Now()
	capCtx, cancelCap := context.WithTimeout(ctx, o.Duration)
	runCtx, cancelRun := context.WithTimeout(ctx, o.Duration+drainLimit)
	chaosCtx, stopChaos := context.WithCancel(capCtx)
	var chaosWG sync.WaitGroup
	chaosWG.Go(func() {
		chaos(chaosCtx, f, o, rnd, time.Duration(o.LeaseSeconds)*time.Second)
		clock.add("chaos over")
	})
	t := stream(capCtx, runCtx, f, plans, rnd, clock)
	stopChaos()
	chaosWG.Wait() // every paused instance is running again
	cancelRun()
	cancelCap()
	rep.StreamTime = time.Since(streamStart)
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}

	// Let resumed stale workers run into their fences, then stop the fleet
	// so that the sweeper is the only actor left.
	lease := time.Duration(o.LeaseSeconds) * time.Second
	logf("stream done in %s; quiet period, then stopping the instances", rep.StreamTime.Round(time.Millisecond))
	if !sleep(ctx, lease+time.Second) {
		return rep, ctx.Err()
	}
	f.stop(true)
	if !sleep(ctx, lease+500*time.Millisecond) { // every lease has run out
		return rep, ctx.Err()
	}

	db, err := openDB(dsn)
	if err != nil {
		return rep, err
	}
	defer db.Close()
	before, err := readRecords(ctx, db)
	if err != nil {
		return rep, err
	}
	for _, r := range before {
		switch r.Status {
		case "RUNNING", "RECEIVED":
			rep.RunningBeforeSweep++
		case "FAILED_RETRYABLE":
			rep.RetryableBeforeSweep++
		}
	}

	swept, err := sweepAll(ctx, bin, env, &rep, logf)
	if err != nil {
		return rep, err
	}
	stopWatch()
	watchWG.Wait()
	watch.scan() // the last look, after the sweeper

	recs, err := readRecords(ctx, db)
	if err != nil {
		return rep, err
	}
	f.fill(&rep)
	t.fill(&rep)
	rep.ModelCalls, rep.ModelErrors = int(model.total.Load()), int(model.failed.Load())
	rep.Timeline = clock.entries()
	check(&rep, checkInput{plans: plans, tally: t, recs: recs, calls: model.snapshot(), swept: swept,
		watch: watch, resultsDir: filepath.Join(stateDir, "results"), crashes: f.crashList()})
	rep.Elapsed = time.Since(began)
	return rep, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}

// lockedRand is one seeded source shared by the goroutines.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newRand(seed uint64) *lockedRand {
	return &lockedRand{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (l *lockedRand) IntN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

func (l *lockedRand) Float64() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64()
}

// Between returns a duration uniformly in [lo, hi).
func (l *lockedRand) Between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return lo + time.Duration(l.r.Int64N(int64(hi-lo)))
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// timeline records chaos actions with their offset from the start.
type timeline struct {
	start time.Time
	mu    sync.Mutex
	lines []string
}

func (t *timeline) since() string { return fmt.Sprintf("t+%6.2fs", time.Since(t.start).Seconds()) }

func (t *timeline) add(format string, a ...any) {
	line := t.since() + " " + fmt.Sprintf(format, a...)
	t.mu.Lock()
	t.lines = append(t.lines, line)
	t.mu.Unlock()
}

func (t *timeline) entries() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.lines...)
}

// runCLI runs a subcommand of the function and returns its stdout.
func runCLI(ctx context.Context, bin string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.SysProcAttr = sysProcAttr()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, tail(stderr.String(), 2000))
	}
	return stdout.String(), nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// prepareDB returns the DSN the instances use: a fresh database when dsn
// names none.
func prepareDB(ctx context.Context, dsn string) (string, string, func(), error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", "", nil, errors.New("mysql-dsn: not a go-sql-driver DSN")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 3 * time.Second
	}
	if cfg.DBName != "" {
		return cfg.FormatDSN(), cfg.DBName, func() {}, nil
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return "", "", nil, err
	}
	name := "idemgate_chaos_" + randomHex(6)
	if _, err := db.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		db.Close()
		return "", "", nil, fmt.Errorf("MariaDB at %s: create database: %w", cfg.Addr, err)
	}
	drop := func() {
		// The run's context may be over (Ctrl-C): drop anyway.
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = db.ExecContext(c, "DROP DATABASE IF EXISTS `"+name+"`")
		db.Close()
	}
	cfg.DBName = name
	return cfg.FormatDSN(), name, drop, nil
}

func openDB(dsn string) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg.ParseTime = true
	return sql.Open("mysql", cfg.FormatDSN())
}

// record is the part of a task record the checks read.
type record struct {
	Key, Status, LeaseOwner, ResultRef, LastErrorCode, LastError string
	Attempt                                                      int
	Fence                                                        int64
	LeaseUntil                                                   sql.NullTime
}

// readRecords reads every task record (parent_key = ”), straight from the
// table: the checks must not trust the function's own code.
func readRecords(ctx context.Context, db *sql.DB) (map[string]record, error) {
	rows, err := db.QueryContext(ctx, `SELECT request_id, status, attempt, fence, lease_owner, lease_until, result_ref,
 last_error_code, last_error FROM idempotency_record WHERE parent_key = ''`)
	if err != nil {
		return nil, fmt.Errorf("read records: %w", err)
	}
	defer rows.Close()
	out := map[string]record{}
	for rows.Next() {
		var r record
		if err := rows.Scan(&r.Key, &r.Status, &r.Attempt, &r.Fence, &r.LeaseOwner, &r.LeaseUntil, &r.ResultRef,
			&r.LastErrorCode, &r.LastError); err != nil {
			return nil, fmt.Errorf("read records: %w", err)
		}
		out[r.Key] = r
	}
	return out, rows.Err()
}

// sweepOutcome is the part of an outcome the report uses.
type sweepOutcome struct {
	Key       string `json:"idempotency_key"`
	Status    string `json:"status"`
	Decision  string `json:"decision"`
	ErrorType string `json:"errorType"`
}

// sweepAll runs `sweep --grace 0s` until it re-drives nothing (at most five
// times) and returns the last sweep outcome per key.
func sweepAll(ctx context.Context, bin string, env []string, rep *Report, logf func(string, ...any)) (map[string]sweepOutcome, error) {
	swept := map[string]sweepOutcome{}
	for rep.Sweeps < 5 {
		out, err := runCLI(ctx, bin, env, "sweep", "--grace", "0s")
		if err != nil {
			return swept, err
		}
		var sr struct {
			Redriven int            `json:"redriven"`
			Finished int            `json:"finished"`
			Skipped  int            `json:"skipped"`
			Results  []sweepOutcome `json:"results"`
		}
		if err := json.Unmarshal([]byte(out), &sr); err != nil {
			return swept, fmt.Errorf("sweep answered %q: %w", tail(out, 500), err)
		}
		rep.Sweeps++
		rep.SweepRedriven += sr.Redriven
		rep.SweepFinished += sr.Finished
		for _, r := range sr.Results {
			swept[r.Key] = r
		}
		logf("sweep %d: redriven %d, finished %d, skipped %d", rep.Sweeps, sr.Redriven, sr.Finished, sr.Skipped)
		if sr.Redriven == 0 && sr.Skipped == 0 {
			break
		}
	}
	return swept, nil
}

// cleanRedis drops the run's fast-layer entries (best effort): DB 15 is
// shared with the tests.
func cleanRedis(url string, plans []*keyPlan) {
	if url == "" {
		return
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return
	}
	c := redis.NewClient(opt)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var names []string
	for _, p := range plans {
		names = append(names, redisfast.Key(p.key), redisfast.Key(keys.OpKey(p.key, "generate")),
			redisfast.Key(keys.OpKey(p.key, "publish")))
	}
	_ = c.Del(ctx, names...).Err()
}
