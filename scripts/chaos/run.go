package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/idemgate/idemgate/internal/dev/modelfake"
	"github.com/idemgate/idemgate/internal/dev/proc"
	"github.com/idemgate/idemgate/internal/dev/progress"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/idempotency/redisfast"
	"github.com/idemgate/idemgate/internal/sleep"
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
	// Nodes, when set, are the DSNs (database names ignored) of the nodes of
	// a multi-writer cluster holding MySQLDSN's database (galera.go):
	// instance slot i writes to node i mod len(Nodes), so writes land on
	// every node, and NodeKill ends one of them mid-run.
	Nodes    []string
	NodeKill *NodeKill
	RedisURL string // "": the instances run on MySQL alone
	// RedisKeyPrefix is the instances' REDIS_KEY_PREFIX ("": a prefix of
	// the run's own); the run deletes its planned keys under it at the end.
	RedisKeyPrefix string
	Seed           uint64 // 0: from the clock
	Keep           bool
	WorkDir        string    // "": a temporary directory (removed unless Keep or a violation)
	Log            io.Writer // progress lines; nil: none
	Progress       io.Writer // the progress bar of the deliveries; nil: none
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
	case o.NodeKill != nil && (o.NodeKill.Node < 0 || o.NodeKill.Node >= len(o.Nodes)):
		return errors.New("node kill: not one of the nodes")
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
	NodeKills                                int // database nodes killed (Options.NodeKill)
	Restarts                                 int
	DeadLetters, DeadExhausted, DeadFinal    int // deliveries sent to the failure destination: all, retries spent, FINAL answer
	Unsent                                   int // deliveries not started when the duration cap came
	Abandoned                                int // deliveries still under way when the drain limit came
	DeadKeys                                 []DeadKey
	RunningBeforeSweep, RetryableBeforeSweep int
	Sweeps, SweepRedriven, SweepFinished     int
	Succeeded, FailedFinal, NoRecord         int
	DeadCarried                              int            // unfinished records only a dead letter carries (carriedByDeadLetter)
	FinalCodes                               map[string]int // last_error_code of FAILED_FINAL records
	Violations                               []string
	Unsuccessful                             []string // what happened to each key that did not succeed (printed with -v)
	Timeline                                 []string // chaos actions, in order
	WorkDir, Database                        string   // kept (Keep, or a violation) when not empty
	StreamTime, Elapsed                      time.Duration
}

// Run performs one chaos run: setup, the stream with the chaos beside it, a
// quiet period, the sweeper alone, then the checks. An error means the run
// could not be carried out; invariant violations are in Report.Violations.
func Run(ctx context.Context, o Options) (rep Report, err error) {
	if err := o.check(); err != nil {
		return rep, err
	}
	began := time.Now()
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	rep.Seed, rep.Instances, rep.Keys = o.Seed, o.Instances, o.Keys
	r := &runner{o: o, rnd: newRand(o.Seed)}
	defer r.teardown(&rep) // also on an early return or a panic: no child outlives the run
	if err := r.setup(ctx, &rep); err != nil {
		return rep, err
	}
	if err := r.streamWithChaos(ctx, &rep); err != nil {
		return rep, err
	}
	if err := r.settle(ctx, &rep); err != nil {
		return rep, err
	}
	if err := r.sweepAndCheck(ctx, &rep); err != nil {
		return rep, err
	}
	rep.Elapsed = time.Since(began)
	return rep, nil
}

// runner is one chaos run between setup and teardown.
type runner struct {
	o                Options
	rnd              *lockedRand
	work             string
	tempWork         bool
	stateDir, logDir string
	bin, dsn, dbName string
	dropDB           func()
	model            *modelfake.Fake
	env              []string
	plans            []*keyPlan
	clock            *timeline
	fleet            *fleet
	watch            *watcher
	stopWatch        context.CancelFunc
	watchWG          sync.WaitGroup
	tally            *tally
	db               *sql.DB
	swept            map[string]sweepOutcome
}

func (r *runner) logf(format string, a ...any) {
	if r.o.Log != nil {
		fmt.Fprintf(r.o.Log, "chaos: "+format+"\n", a...)
	}
}

// setup prepares the work directory, the binary, the database, the model
// fake and the plan, then starts the instances and the result watcher.
func (r *runner) setup(ctx context.Context, rep *Report) error {
	o := r.o
	if err := r.prepareWork(); err != nil {
		return err
	}
	if r.bin = o.Bin; r.bin == "" {
		r.logf("building the function")
		var err error
		if r.bin, err = proc.Build(ctx, filepath.Join(r.work, "bin"), false); err != nil {
			return err
		}
	}
	if err := r.prepareDB(ctx); err != nil {
		return err
	}
	var err error
	r.model = startModel(r.rnd, o.ModelErrors)
	r.env = append(r.model.Env(), "MYSQL_DSN="+r.dsn, "STATE_DIR="+r.stateDir, "LLM_TIMEOUT_SECONDS=10",
		fmt.Sprintf("LEASE_SECONDS=%d", o.LeaseSeconds))
	if o.RedisURL != "" {
		if o.RedisKeyPrefix == "" {
			r.o.RedisKeyPrefix = "idemgate-chaos:" + proc.Nonce()[:8] + ":"
		}
		r.env = append(r.env, "REDIS_URL="+o.RedisURL, "REDIS_KEY_PREFIX="+r.o.RedisKeyPrefix)
	}
	if o.MaxAttempts > 0 {
		r.env = append(r.env, fmt.Sprintf("MAX_ATTEMPTS=%d", o.MaxAttempts))
	}
	if _, err := proc.CLI(ctx, r.bin, r.env, "migrate"); err != nil {
		return err
	}
	// The run id is never from the seed: keys must not repeat across runs,
	// or Redis (shared, 300 s TTL) would answer from an earlier run.
	if r.plans, err = makePlan(proc.Nonce()[:8], o, r.rnd); err != nil {
		return err
	}
	countPlan(rep, r.plans)
	r.clock = &timeline{start: time.Now()}
	r.fleet = newFleet(r.bin, r.env, r.logDir, r.rnd, r.clock, r.logf)
	if r.fleet.nodes, err = nodeDSNs(o.Nodes, r.dbName); err != nil {
		return err
	}
	r.fleet.launch(o.Instances, o.Faults)
	if err := r.fleet.waitReady(ctx, o.Instances, 30*time.Second); err != nil {
		return err
	}
	r.watch = &watcher{dir: filepath.Join(r.stateDir, "results", "tasks"), first: map[string]string{}, changed: map[string]string{}}
	var watchCtx context.Context
	watchCtx, r.stopWatch = context.WithCancel(ctx)
	r.watchWG.Go(func() { r.watch.run(watchCtx, 200*time.Millisecond) })
	return nil
}

// prepareWork creates the work directory (a temporary one unless
// o.WorkDir) with its state and logs.
func (r *runner) prepareWork() error {
	if r.work = r.o.WorkDir; r.work == "" {
		var err error
		if r.work, err = os.MkdirTemp("", "idemgate-chaos-"); err != nil {
			return err
		}
		r.tempWork = true
	}
	r.stateDir, r.logDir = filepath.Join(r.work, "state"), filepath.Join(r.work, "logs")
	for _, d := range []string{r.stateDir, r.logDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// prepareDB picks the instances' database: a fresh one when o.MySQLDSN
// names none.
func (r *runner) prepareDB(ctx context.Context) error {
	cfg, err := mysql.ParseDSN(r.o.MySQLDSN)
	if err != nil {
		return errors.New("mysql-dsn: not a go-sql-driver DSN")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 3 * time.Second
	}
	if cfg.DBName != "" {
		r.dsn, r.dbName = cfg.FormatDSN(), cfg.DBName
		return nil
	}
	r.dsn, r.dbName, r.dropDB, err = proc.FreshDatabase(ctx, cfg.FormatDSN(), "idemgate_chaos_")
	return err
}

// countPlan fills the report's delivery counts.
func countPlan(rep *Report, plans []*keyPlan) {
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
}

// streamWithChaos sends the planned deliveries while killing and pausing
// instances, until the duration cap (deliveries under way get drainLimit
// more).
func (r *runner) streamWithChaos(ctx context.Context, rep *Report) error {
	o := r.o
	r.logf("streaming %d deliveries of %d keys to %d instances", rep.Deliveries, o.Keys, o.Instances)
	streamStart := time.Now()
	capCtx, cancelCap := context.WithTimeout(ctx, o.Duration)
	defer cancelCap()
	runCtx, cancelRun := context.WithTimeout(ctx, o.Duration+drainLimit)
	defer cancelRun()
	chaosCtx, stopChaos := context.WithCancel(capCtx)
	var chaosWG sync.WaitGroup
	chaosWG.Go(func() {
		chaos(chaosCtx, r.fleet, o, r.rnd, time.Duration(o.LeaseSeconds)*time.Second)
		r.clock.add("chaos over")
	})
	if o.NodeKill != nil {
		chaosWG.Go(func() { r.killNode(chaosCtx, rep) })
	}
	r.tally = newTally(len(r.plans))
	bar := progress.New(o.Progress)
	bar.Start("deliveries", rep.Deliveries, &r.tally.settled)
	stream(capCtx, runCtx, r.fleet, r.plans, r.rnd, r.clock, r.tally)
	bar.Stop()
	stopChaos()
	chaosWG.Wait() // every paused instance is running again
	rep.StreamTime = time.Since(streamStart)
	return ctx.Err()
}

// settle lets resumed stale workers run into their fences, then stops the
// fleet so that the sweeper is the only actor left, and waits out every
// lease.
func (r *runner) settle(ctx context.Context, rep *Report) error {
	lease := time.Duration(r.o.LeaseSeconds) * time.Second
	r.logf("stream done in %s; quiet period, then stopping the instances", rep.StreamTime.Round(time.Millisecond))
	if !sleep.For(ctx, lease+time.Second) {
		return ctx.Err()
	}
	r.fleet.stop(true)
	if !sleep.For(ctx, lease+500*time.Millisecond) {
		return ctx.Err()
	}
	return nil
}

// sweepAndCheck counts what the stream left, lets the sweeper finish it,
// then reads the final records and applies the invariants.
func (r *runner) sweepAndCheck(ctx context.Context, rep *Report) error {
	var err error
	if r.db, err = openDB(r.dsn); err != nil {
		return err
	}
	before, err := readRecords(ctx, r.db)
	if err != nil {
		return err
	}
	for _, rec := range before {
		switch rec.Status {
		case "RUNNING", "RECEIVED":
			rep.RunningBeforeSweep++
		case "FAILED_RETRYABLE":
			rep.RetryableBeforeSweep++
		}
	}
	if r.swept, err = sweepAll(ctx, r.bin, r.env, rep, r.logf); err != nil {
		return err
	}
	r.stopWatch()
	r.watchWG.Wait()
	r.watch.scan() // the last look, after the sweeper
	recs, err := readRecords(ctx, r.db)
	if err != nil {
		return err
	}
	r.fleet.fill(rep)
	r.tally.fill(rep)
	rep.ModelCalls, rep.ModelErrors = int(r.model.Total()), int(r.model.Failed())
	rep.Timeline = r.clock.entries()
	check(rep, checkInput{plans: r.plans, tally: r.tally, recs: recs, calls: r.model.Snapshot(), swept: r.swept,
		watch: r.watch, resultsDir: filepath.Join(r.stateDir, "results"), crashes: r.fleet.crashList()})
	return nil
}

// teardown releases what setup acquired, newest first; it tolerates a setup
// that stopped half way. The work directory and the database stay when
// asked to (Keep) and, the directory, after a violation.
func (r *runner) teardown(rep *Report) {
	if r.db != nil {
		r.db.Close()
	}
	if r.stopWatch != nil {
		r.stopWatch()
		r.watchWG.Wait()
	}
	if r.fleet != nil {
		r.fleet.stop(false)
	}
	cleanRedis(r.o.RedisURL, r.o.RedisKeyPrefix, r.plans)
	if r.model != nil {
		r.model.Close()
	}
	if r.o.Keep {
		rep.Database = r.dbName
	} else if r.dropDB != nil {
		r.dropDB()
	}
	if r.tempWork {
		if r.o.Keep || len(rep.Violations) > 0 {
			rep.WorkDir = r.work
		} else {
			_ = os.RemoveAll(r.work)
		}
	}
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

// sweepAll runs `sweep --grace 0s` until it re-drives nothing and leaves
// nothing in a retry back-off (at most five times), and returns the last
// sweep outcome per key. A retryable failure the sweep itself made (the
// model's injected 503) is in its back-off at the next sweep, which rightly
// leaves it (handler.SweepReport.Backoff): the loop waits it out (the
// engine's 1 s doubled per attempt, at most a lease) instead of ending
// with the record FAILED_RETRYABLE.
func sweepAll(ctx context.Context, bin string, env []string, rep *Report, logf func(string, ...any)) (map[string]sweepOutcome, error) {
	swept := map[string]sweepOutcome{}
	for rep.Sweeps < 5 {
		out, err := proc.CLI(ctx, bin, env, "sweep", "--grace", "0s")
		if err != nil {
			return swept, err
		}
		var sr struct {
			Redriven int            `json:"redriven"`
			Finished int            `json:"finished"`
			Skipped  int            `json:"skipped"`
			Backoff  int            `json:"backoff"`
			Results  []sweepOutcome `json:"results"`
		}
		if err := json.Unmarshal([]byte(out), &sr); err != nil {
			return swept, fmt.Errorf("sweep answered %q: %w", proc.Tail(out, 500), err)
		}
		rep.Sweeps++
		rep.SweepRedriven += sr.Redriven
		rep.SweepFinished += sr.Finished
		for _, r := range sr.Results {
			swept[r.Key] = r
		}
		logf("sweep %d: redriven %d, finished %d, skipped %d, in back-off %d", rep.Sweeps, sr.Redriven, sr.Finished, sr.Skipped, sr.Backoff)
		if sr.Redriven == 0 && sr.Skipped == 0 && sr.Backoff == 0 {
			break
		}
		if sr.Backoff > 0 {
			select { // 2, 4, 8, 16 s: past attempt n's back-off of 2^(n-1) s
			case <-time.After(time.Second << rep.Sweeps):
			case <-ctx.Done():
				return swept, ctx.Err()
			}
		}
	}
	return swept, nil
}

// cleanRedis drops the run's fast-layer entries (best effort): DB 15 is
// shared with the tests.
func cleanRedis(url, prefix string, plans []*keyPlan) {
	if url == "" || len(plans) == 0 {
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
		names = append(names, prefix+redisfast.Key(p.key))
	}
	_ = c.Del(ctx, names...).Err()
}
