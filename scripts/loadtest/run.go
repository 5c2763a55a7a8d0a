package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgate/idemgate/internal/dev/proc"
	"github.com/idemgate/idemgate/internal/dev/progress"
)

// Phase names.
const (
	PhaseMain       = "main"
	PhaseDupRedis   = "dup-redis"
	PhaseDupMySQL   = "dup-mysql"
	PhaseBare       = "bare-handler"
	PhaseBareInProc = "bare-inproc"
	PhaseRawEvalsha = "raw-evalsha"
	PhaseRawInsert  = "raw-insert+update"
	PhaseRawAllOps  = "raw-all-ops"
	PhaseLibClaim   = "lib-claim+complete"
	PhaseLibDup     = "lib-dup-redis"
)

// redisFloorFactor multiplies -base-n for the in-process Redis floors
// (raw-evalsha, lib-dup-redis).
const redisFloorFactor = 10

// Figure is one named number of a run.
type Figure struct {
	Name  string  `json:"name"`
	Unit  string  `json:"unit"`
	Value float64 `json:"value"`
	Goal  string  `json:"goal,omitempty"`
}

// RunReport is one repetition.
type RunReport struct {
	Run     int              `json:"run"`
	Nonce   string           `json:"nonce"`
	Plan    map[Kind]int     `json:"deliveries_by_kind"`
	Phases  []PhaseSummary   `json:"-"`
	Verify  Verification     `json:"verification"`
	Figures []Figure         `json:"figures"`
	LoadRSS map[string]int64 `json:"rss_max_under_load_bytes,omitempty"`
	// CPU is the spawned instances' CPU time (user+system) per request of a
	// phase; each phase reaches its own set of instances.
	CPU map[string]time.Duration `json:"cpu_per_request_ns,omitempty"`
	// ProcCPU is, with -observe, each phase's CPU time per request of each
	// process group (the phase's instances as "function", this program as
	// "load-generator", and -observe's), in µs.
	ProcCPU map[string]map[string]float64 `json:"cpu_per_request_us_by_process,omitempty"`
	// SQL are the MySQL counters per task of the phases that reach MySQL.
	SQL         []SQLFigures `json:"mysql,omitempty"`
	Offer       *Offer       `json:"offer,omitempty"`
	phaseByName map[string]PhaseSummary
}

// StatsCheck compares the function's own counters (idempotency_stats) with
// what the load test saw.
type StatsCheck struct {
	Function map[string]int64 `json:"function"`
	Client   map[string]int64 `json:"client"`
	// FastFailures counts the instances' "fast layer unavailable" log lines:
	// each opens a 1 s window in which that instance skips Redis.
	FastFailures int `json:"fast_layer_failures_logged"`
}

// Summary is the whole run.
type Summary struct {
	Targets      []string         `json:"targets"`
	MySQLTargets []string         `json:"mysql_targets,omitempty"`
	N, C         int              `json:"-"`
	Runs         []RunReport      `json:"runs"`
	Aggregate    []Aggregate      `json:"aggregate"`
	IdleRSS      map[string]int64 `json:"rss_idle_bytes,omitempty"`
	Stats        *StatsCheck      `json:"stats_check,omitempty"`
	Problems     []string         `json:"problems,omitempty"`
	Notes        []string         `json:"notes,omitempty"`
}

// Aggregate is a figure over the runs.
type Aggregate struct {
	Name             string    `json:"name"`
	Unit             string    `json:"unit"`
	Goal             string    `json:"goal,omitempty"`
	Min, Median, Max float64   `json:"-"`
	Values           []float64 `json:"values"`
}

// OK reports whether every run verified.
func (s *Summary) OK() bool { return len(s.Problems) == 0 }

// Run runs the load test and prints its report to out: setup (database,
// baselines, instances), an unreported warm-up, o.Repeat measured runs, then
// the function's own counters read after its instances stopped, and the
// summary.
func Run(ctx context.Context, o Options, out io.Writer) (*Summary, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.MaxDuration)
	defer cancel()
	r := &runner{o: o, ctx: ctx, out: out, sum: &Summary{N: o.N, C: o.C}, decisions: map[string]int64{},
		sentPure: map[string]int64{}, hist: map[string][]float64{}}
	defer r.teardown()
	if err := r.setup(); err != nil {
		return nil, err
	}
	r.printHeader()
	if err := r.warmUp(); err != nil {
		return nil, err
	}
	if err := r.startProfiler(); err != nil {
		return nil, err
	}
	for run := 1; run <= o.Repeat && ctx.Err() == nil; run++ {
		rr, err := r.measure(run)
		if err != nil {
			return nil, err
		}
		r.sum.Runs = append(r.sum.Runs, rr)
	}
	// The reports are written while the instances, whose binaries perf
	// names the functions of, still run.
	if err := r.prof.finish(ctx); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		r.sum.Problems = append(r.sum.Problems, "stopped early: "+ctx.Err().Error())
	}
	r.checkStats()
	return r.sum, r.report()
}

// runner is one load test between setup and teardown.
type runner struct {
	o        Options
	ctx      context.Context
	out      io.Writer
	rng      *mrand.Rand
	work     string
	removeWD bool // work is a temporary directory of ours
	bl       *Baselines
	fl       *fleet
	fk       *fakes        // OSS, model and notify receiver (spawned instances only)
	raw      *rawPipeline  // the first delivery's floor (nil: not measured)
	prof     *profiler     // -perf-dir's perf sessions (nil: none)
	probe    *sqlProbe     // MySQL counters around each slice (nil: not read)
	mdb      *proc.MariaDB // -private-mysql's server
	client   *http.Client
	prog     *progress.Bar
	dupPhase string // PhaseDupRedis, or PhaseDupMySQL when the targets have no Redis
	csvFile  *os.File
	csvw     *csv.Writer
	sum      *Summary

	statsBefore         map[string]int64
	decisions, sentPure map[string]int64 // answers seen: per decision; pure duplicates per phase

	hist      map[string][]float64 // class label → latencies in ms, for the PNG
	histOrder []string
}

func (r *runner) logf(format string, args ...any) {
	if r.o.Log != nil {
		fmt.Fprintf(r.o.Log, format+"\n", args...)
	}
}

// setup creates the database and the work directory, opens the baselines'
// clients, reads the counters before the run, and starts the instances.
func (r *runner) setup() error {
	o := r.o
	seed := o.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	r.rng = mrand.New(mrand.NewPCG(seed, 0x1d3a))
	if r.work = o.WorkDir; r.work == "" {
		d, err := os.MkdirTemp("", "idemgate-loadtest-")
		if err != nil {
			return err
		}
		r.work, r.removeWD = d, !o.Keep
	}
	if err := r.startMariaDB(); err != nil {
		return err
	}
	o = r.o
	if err := proc.EnsureDatabase(r.ctx, o.MySQLDSN); err != nil {
		return err
	}
	redisURL := o.RedisURL
	if !o.Redis && o.BaseN == 0 {
		redisURL = ""
	}
	var err error
	if r.bl, err = OpenBaselines(r.ctx, o.MySQLDSN, redisURL, o.RedisKeyPrefix); err != nil {
		return fmt.Errorf("baselines: %w", err)
	}
	if r.statsBefore, err = readStats(r.ctx, r.bl.DB()); err != nil {
		return err
	}
	if r.probe, err = openProbe(r.ctx, o.MySQLDSN); err != nil {
		return err
	}
	if o.Spawn > 0 {
		if r.fk, err = startFakes(o.FakesHost); err != nil {
			return err
		}
		if o.FirstN > 0 {
			if r.raw, err = newRawPipeline(r.bl.DB(), r.fk); err != nil {
				return fmt.Errorf("raw pipeline: %w", err)
			}
		}
	}
	if err := r.startFleet(); err != nil {
		return err
	}
	r.client = newClient(o.C+o.BurstMax, o.Timeout)
	r.prog = progress.New(o.Progress)
	if o.CSV != "" {
		if r.csvFile, err = os.Create(o.CSV); err != nil {
			return err
		}
		r.csvw = csv.NewWriter(r.csvFile)
		_ = r.csvw.Write([]string{"run", "phase", "seq", "action", "kind", "target", "fc_request_id", "start_ms",
			"latency_us", "http_status", "class", "idempotency_key", "status", "decision", "duplicate", "attempt", "error"})
	}
	return nil
}

// startMariaDB starts the private server of -private-mysql in the work
// directory and points -mysql-dsn's database there.
func (r *runner) startMariaDB() error {
	if !r.o.PrivateMySQL {
		return nil
	}
	cfg, err := mysql.ParseDSN(r.o.MySQLDSN)
	if err != nil {
		return errors.New("-mysql-dsn: not a go-sql-driver DSN")
	}
	dir := filepath.Join(r.work, "mariadb")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if r.mdb, err = proc.StartMariaDBWith(r.ctx, dir, proc.MariaDBOptions{Placement: proc.Placement{
		Args: []string{proc.LoadRedoLog}}}); err != nil {
		return err
	}
	r.o.MySQLDSN = r.mdb.DSN(cfg.DBName)
	r.logf("private MariaDB at %s (log %s)", r.mdb.Addr, r.mdb.LogPath)
	return nil
}

// startFleet spawns the function's instances, the raw function's and the
// bare handler's (or takes -targets). The bare handler's and the raw
// function's servers are built first, so that a missing build fails before
// anything runs.
func (r *runner) startFleet() error {
	o := r.o
	r.fl = &fleet{targets: o.Targets, mysqlTargets: o.MySQLTargets}
	bareBin := o.BareBin
	if o.BaseN > 0 && o.bare() && bareBin == "" {
		var err error
		if bareBin, err = proc.BuildPackage(r.ctx, "./scripts/loadtest/bareserver", filepath.Join(r.work, "bareserver"), true); err != nil {
			return fmt.Errorf("bare handler: %w (or give -bare-bin, or -base-n 0 to skip the baselines)", err)
		}
	}
	rawBin := o.RawBin
	if o.Spawn > 0 && o.FirstN > 0 && rawBin == "" {
		var err error
		if rawBin, err = buildProfilable(r.ctx, o, "./scripts/loadtest/rawfn", filepath.Join(r.work, "rawfn")); err != nil {
			return fmt.Errorf("raw function: %w (or give -raw-bin, or -first-n 0 to skip the first deliveries)", err)
		}
	}
	if o.Spawn > 0 {
		if err := r.fl.spawnFunction(r.ctx, o, r.work, r.fk.env(), r.logf); err != nil {
			return err
		}
		r.sum.IdleRSS = r.fl.idleRSS()
		if o.FirstN > 0 {
			if err := r.fl.spawnRaw(r.ctx, rawBin, o, r.work); err != nil {
				return err
			}
		}
	}
	if !o.Redis {
		r.fl.mysqlTargets = nil // the targets answer from MySQL: their pure duplicates are the dup-mysql phase
	}
	r.sum.Targets, r.sum.MySQLTargets = r.fl.targets, r.fl.mysqlTargets
	if o.BaseN > 0 && o.bare() {
		if err := r.fl.spawnBare(r.ctx, bareBin, o.RedisURL, o.RedisKeyPrefix, r.work); err != nil {
			return err
		}
	}
	r.dupPhase = PhaseDupRedis
	if !o.Redis {
		r.dupPhase = PhaseDupMySQL
	}
	return nil
}

// teardown releases what setup acquired, newest first; it tolerates a
// setup that stopped half way.
func (r *runner) teardown() {
	if r.csvw != nil {
		r.csvw.Flush()
		r.csvFile.Close()
	}
	if r.client != nil {
		r.client.CloseIdleConnections()
	}
	_ = r.prof.stop() // before the processes it records end
	if r.fl != nil {
		r.fl.stop()
	}
	if r.fk != nil {
		r.fk.close()
	}
	r.probe.Close()
	if r.bl != nil {
		r.bl.Close()
	}
	r.mdb.Stop()
	if r.removeWD {
		os.RemoveAll(r.work)
	}
}

// checkStats stops the spawned instances (they flush their counters on
// SIGTERM) and compares the function's counters with the answers seen. The
// client's idle connections are closed first: net/http's Shutdown waits up
// to 5 s for a connection that was opened but never carried a request,
// longer than Stop waits before it kills (and loses the counters).
func (r *runner) checkStats() {
	if r.o.Spawn == 0 {
		return
	}
	r.client.CloseIdleConnections()
	r.fl.stopFunction()
	after, err := readStats(context.WithoutCancel(r.ctx), r.bl.DB())
	if err != nil {
		return
	}
	sc := &StatsCheck{Function: map[string]int64{}, Client: r.decisions}
	for k, v := range after {
		if d := v - r.statsBefore[k]; d != 0 {
			sc.Function[k] = d
		}
	}
	for k, v := range r.sentPure {
		sc.Client["pure_duplicates_to_"+k] = v
	}
	for _, p := range r.fl.logPaths {
		if b, err := os.ReadFile(p); err == nil {
			sc.FastFailures += bytes.Count(b, []byte(`fast layer unavailable`))
		}
	}
	r.sum.Stats = sc
}

func readStats(ctx context.Context, db *sql.DB) (map[string]int64, error) {
	rows, err := db.QueryContext(ctx, `SELECT name, SUM(count) FROM idempotency_stats GROUP BY name`)
	if err != nil {
		return nil, fmt.Errorf("read idempotency_stats: %w", err)
	}
	defer rows.Close()
	m := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, err
		}
		m[name] = n
	}
	return m, rows.Err()
}
