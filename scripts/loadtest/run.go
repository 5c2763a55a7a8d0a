package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idemgate/idemgate/internal/devbuild"
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
	CPU         map[string]time.Duration `json:"cpu_per_request_ns,omitempty"`
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

// Run runs the load test and prints its report to out.
func Run(ctx context.Context, o Options, out io.Writer) (*Summary, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.MaxDuration)
	defer cancel()
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	seed := o.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	rng := mrand.New(mrand.NewPCG(seed, 0x1d3a))
	if err := EnsureDatabase(ctx, o.MySQLDSN); err != nil {
		return nil, err
	}
	work := o.WorkDir
	if work == "" {
		d, err := os.MkdirTemp("", "idemgate-loadtest-")
		if err != nil {
			return nil, err
		}
		work = d
		if !o.Keep {
			defer os.RemoveAll(d)
		}
	}
	sum := &Summary{N: o.N, C: o.C}

	redisURL := o.RedisURL
	needRedis := o.Redis || o.BaseN > 0
	if !needRedis {
		redisURL = ""
	}
	bl, err := OpenBaselines(ctx, o.MySQLDSN, redisURL)
	if err != nil {
		return nil, fmt.Errorf("baselines: %w", err)
	}
	defer bl.Close()
	statsBefore, err := readStats(ctx, bl.DB())
	if err != nil {
		return nil, err
	}

	// The bare handler's server is built (or checked) before anything is
	// started, so that a missing build fails fast.
	bareBin := o.BareBin
	if o.BaseN > 0 && bareBin == "" {
		if bareBin, err = devbuild.BuildPackage(ctx, "./scripts/loadtest/bareserver", filepath.Join(work, "bareserver"), true); err != nil {
			return nil, fmt.Errorf("bare handler: %w (or give -bare-bin, or -base-n 0 to skip the baselines)", err)
		}
	}

	// Instances.
	var insts []*Instance
	var logPaths []string
	stopAll := func() {
		for _, in := range insts {
			in.Stop()
			logPaths = append(logPaths, in.LogPath)
		}
		insts = nil
	}
	defer stopAll()
	targets, mysqlTargets := o.Targets, o.MySQLTargets
	stateDir := ""
	var loadPIDs, mysqlPIDs []int
	pidOf := map[int]string{}
	if o.Spawn > 0 {
		bin := o.Bin
		if bin == "" {
			logf("building the function (CGO_ENABLED=0 -trimpath -ldflags='-s -w') …")
			if bin, err = devbuild.Build(ctx, work, true); err != nil {
				return nil, err
			}
		}
		if err := Migrate(ctx, bin, o.MySQLDSN, work); err != nil {
			return nil, err
		}
		stateDir = filepath.Join(work, "state")
		env := []string{"MYSQL_DSN=" + o.MySQLDSN, "LLM_MODEL=offline", "STATE_DIR=" + stateDir}
		type instanceSet struct {
			name  string
			redis bool
		}
		sets := []instanceSet{{"redis", o.Redis}}
		if o.Redis && o.DupN > 0 {
			sets = append(sets, instanceSet{"mysql-only", false})
		}
		for _, set := range sets {
			for i := range o.Spawn {
				e := slices.Clone(env)
				if set.redis {
					e = append(e, "REDIS_URL="+o.RedisURL)
				}
				in, err := Spawn(ctx, bin, filepath.Join(work, fmt.Sprintf("instance-%s-%d.log", set.name, i)), e)
				if err != nil {
					return nil, err
				}
				insts = append(insts, in)
				label := fmt.Sprintf("%s#%d (pid %d)", set.name, i, in.Cmd.Process.Pid)
				pidOf[in.Cmd.Process.Pid] = label
				if set.name == "redis" {
					targets = append(targets, in.Base)
					loadPIDs = append(loadPIDs, in.Cmd.Process.Pid)
				} else {
					mysqlTargets = append(mysqlTargets, in.Base)
					mysqlPIDs = append(mysqlPIDs, in.Cmd.Process.Pid)
				}
			}
		}
		sum.IdleRSS = map[string]int64{}
		for _, in := range insts {
			if n, err := devbuild.RSS(in.Cmd.Process.Pid); err == nil {
				sum.IdleRSS[pidOf[in.Cmd.Process.Pid]] = n
			}
		}
		logf("spawned %d instances (%s), results under %s", len(insts), strings.Join(append(append([]string{}, targets...), mysqlTargets...), " "), stateDir)
	}
	if !o.Redis {
		mysqlTargets = nil // the targets answer from MySQL: their pure duplicates are the dup-mysql phase
	}
	sum.Targets, sum.MySQLTargets = targets, mysqlTargets

	// The bare handler runs as the function does: as many processes as
	// there are targets, built with the same flags, hit round robin.
	var bareTargets []string
	var barePIDs []int
	if o.BaseN > 0 {
		var bares []*Instance
		defer func() {
			for _, in := range bares {
				in.Stop()
			}
		}()
		for i := range max(1, len(targets)) {
			in, err := Spawn(ctx, bareBin, filepath.Join(work, fmt.Sprintf("bareserver-%d.log", i)), []string{"REDIS_URL=" + o.RedisURL})
			if err != nil {
				return nil, fmt.Errorf("bareserver: %w", err)
			}
			bares = append(bares, in)
			bareTargets = append(bareTargets, in.Base)
			barePIDs = append(barePIDs, in.Cmd.Process.Pid)
		}
	}
	dupPhase := PhaseDupRedis
	if !o.Redis {
		dupPhase = PhaseDupMySQL
	}

	client := newClient(o.C+o.BurstMax, o.Timeout)
	defer client.CloseIdleConnections()
	prog := NewProgress(o.Progress)
	decisions := map[string]int64{}
	sentPure := map[string]int64{}
	tally := func(ph PhaseResult) {
		for i := range ph.Results {
			r := &ph.Results[i]
			if r.HTTPStatus == 200 && r.Decision != "" {
				decisions[strings.ToLower(r.Decision)]++
				if r.Kind == KindPureDup && r.Duplicate {
					sentPure[ph.Name]++
				}
			}
		}
	}

	httpJob := func(run int, name string, units []Unit, tg []string) Job {
		return Job{Name: name, N: len(units), Run: func(lo, hi int, done *atomic.Int64) PhaseResult {
			return execute(ctx, client, run, name, units[lo:hi], tg, o.C, done)
		}}
	}
	opJob := func(run int, name string, n int, op func(context.Context, int) error) Job {
		return Job{Name: name, N: n, Run: func(lo, hi int, done *atomic.Int64) PhaseResult {
			return timeOps(ctx, run, name, lo, hi, o.C, done, op)
		}}
	}
	// dupJobs are the pure-duplicate phases and the bare handler, which
	// run interleaved; floorJobs the in-process floors, interleaved by
	// group (raw EVALSHA with the engine's Redis duplicate; raw
	// INSERT+UPDATE and all raw ops with the engine's claim+complete).
	dupJobs := func(run int, actions []Action, done []int, nDup, nBase int) []Job {
		var jobs []Job
		if nDup > 0 {
			jobs = append(jobs, httpJob(run, dupPhase, PureDuplicates(actions, done, nDup), targets))
			if len(mysqlTargets) > 0 {
				jobs = append(jobs, httpJob(run, PhaseDupMySQL, PureDuplicates(actions, done, nDup), mysqlTargets))
			}
		}
		if nBase > 0 {
			// The bare handlers are compared with the duplicate phases:
			// as many requests as they have.
			n := nBase
			if nDup > 0 {
				n = nDup
			}
			jobs = append(jobs, httpJob(run, PhaseBare, PureDuplicates(actions, done, n), bareTargets),
				httpJob(run, PhaseBareInProc, PureDuplicates(actions, done, n), []string{bl.Bare}))
		}
		return jobs
	}
	floorJobs := func(run int, n int, nonce string) ([][]Job, error) {
		libDup, err := bl.EngineDuplicateRedis(ctx)
		if err != nil {
			return nil, fmt.Errorf("lib-dup-redis: %w", err)
		}
		// The Redis floors take ~30 µs an operation: n of them would be a
		// few ms per slice, shorter than one GC cycle or scheduler hiccup,
		// so they run redisFloorFactor times as many.
		nr := n * redisFloorFactor
		return [][]Job{
			{opJob(run, PhaseRawEvalsha, nr, bl.RawEvalsha(nonce)), opJob(run, PhaseLibDup, nr, libDup)},
			{opJob(run, PhaseRawInsert, n, bl.RawInsertUpdate()), opJob(run, PhaseRawAllOps, n, bl.RawAllOps()),
				opJob(run, PhaseLibClaim, n, bl.EngineClaimComplete())},
		}, nil
	}
	isFunction := func(name string) bool { return name == PhaseMain || name == PhaseDupRedis || name == PhaseDupMySQL }

	// Warm-up (not reported): connections, pools, the scripts' SHA in Redis.
	{
		warm := NewPlan(rng, "warm"+nonce(), 4*o.C, o.C, 0, o.Mix, o.BurstMax)
		ph := interleave([]Job{httpJob(0, PhaseMain, warm.Units, targets)}, 1, prog, "warm-up")[0]
		tally(ph)
		done := finishedActions(ph, len(warm.Actions))
		for _, ph := range interleave(dupJobs(0, warm.Actions, done, min(o.DupN, 4*o.C), min(o.BaseN, 4*o.C)), 2, prog, "warm-up") {
			if isFunction(ph.Name) {
				tally(ph)
			}
		}
		if o.BaseN > 0 {
			groups, err := floorJobs(0, min(o.BaseN, 4*o.C), "warm")
			if err != nil {
				return nil, err
			}
			for _, g := range groups {
				interleave(g, 2, prog, "warm-up")
			}
		}
	}

	var csvw *csv.Writer
	if o.CSV != "" {
		f, err := os.Create(o.CSV)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		csvw = csv.NewWriter(f)
		defer csvw.Flush()
		_ = csvw.Write([]string{"run", "phase", "seq", "action", "kind", "target", "fc_request_id", "start_ms",
			"latency_us", "http_status", "class", "idempotency_key", "status", "decision", "duplicate", "attempt", "error"})
	}
	hist := map[string][]float64{} // class label → latencies in ms, for the PNG
	var histOrder []string
	addHist := func(label string, ph PhaseResult, class string) {
		if _, ok := hist[label]; !ok {
			histOrder = append(histOrder, label)
		}
		for i := range ph.Results {
			if class == "" || ph.Results[i].Class() == class {
				hist[label] = append(hist[label], ms(ph.Results[i].Latency))
			}
		}
	}

	fmt.Fprintf(out, "idemgate load test: %d deliveries per run, %.1f %% duplicates (mix %s, bursts ≤ %d), c=%d, %d run(s)\n",
		o.N, o.DupRate, o.Mix, min(o.BurstMax, o.C), o.C, o.Repeat)
	fmt.Fprintf(out, "targets (Redis %v): %s\n", o.Redis, strings.Join(targets, " "))
	if len(mysqlTargets) > 0 {
		fmt.Fprintf(out, "MySQL-only targets (dup-mysql phase): %s\n", strings.Join(mysqlTargets, " "))
	}

	for run := 1; run <= o.Repeat && ctx.Err() == nil; run++ {
		rr := RunReport{Run: run, Nonce: nonce(), phaseByName: map[string]PhaseSummary{}}
		plan := NewPlan(rng, rr.Nonce, o.N, o.C, o.DupRate, o.Mix, o.BurstMax)
		rr.Plan = plan.Counts
		var phases []PhaseResult
		add := func(ph PhaseResult) {
			phases = append(phases, ph)
			s := summarizePhase(ph)
			rr.Phases = append(rr.Phases, s)
			rr.phaseByName[ph.Name] = s
		}
		var sampler RSSSampler
		if len(loadPIDs) > 0 {
			sampler.Start(loadPIDs)
		}
		cpu0 := CPUTime(loadPIDs)
		mainPh := interleave([]Job{httpJob(run, PhaseMain, plan.Units, targets)}, 1, prog, PhaseMain)[0]
		cpu1 := CPUTime(loadPIDs)
		rr.CPU = map[string]time.Duration{}
		if len(loadPIDs) > 0 && len(mainPh.Results) > 0 {
			rr.CPU[PhaseMain] = (cpu1 - cpu0) / time.Duration(len(mainPh.Results))
		}
		if len(loadPIDs) > 0 {
			rr.LoadRSS = map[string]int64{}
			for pid, n := range sampler.Stop() {
				rr.LoadRSS[pidOf[pid]] = n
			}
		}
		tally(mainPh)
		add(mainPh)
		addHist("main: first", mainPh, "first")
		addHist("main: duplicate", mainPh, "duplicate")
		done := finishedActions(mainPh, len(plan.Actions))
		cpuR0, cpuM0, cpuB0 := CPUTime(loadPIDs), CPUTime(mysqlPIDs), CPUTime(barePIDs)
		dupPhases := interleave(dupJobs(run, plan.Actions, done, o.DupN, o.BaseN), o.Slices, prog, "duplicates")
		cpuR1, cpuM1, cpuB1 := CPUTime(loadPIDs), CPUTime(mysqlPIDs), CPUTime(barePIDs)
		for _, ph := range dupPhases {
			if isFunction(ph.Name) {
				tally(ph)
			}
			if n := time.Duration(len(ph.Results)); n > 0 {
				switch {
				case ph.Name == dupPhase && len(loadPIDs) > 0:
					rr.CPU[ph.Name] = (cpuR1 - cpuR0) / n
				case ph.Name == PhaseDupMySQL && len(mysqlPIDs) > 0:
					rr.CPU[ph.Name] = (cpuM1 - cpuM0) / n
				case ph.Name == PhaseBare && len(barePIDs) > 0:
					rr.CPU[ph.Name] = (cpuB1 - cpuB0) / n
				}
			}
			add(ph)
			addHist(ph.Name, ph, "")
		}
		if o.BaseN > 0 {
			groups, err := floorJobs(run, o.BaseN, rr.Nonce)
			if err != nil {
				return nil, err
			}
			for i, g := range groups {
				for _, ph := range interleave(g, o.Slices, prog, []string{"redis floor", "mysql floor"}[i]) {
					add(ph)
					addHist(ph.Name, ph, "")
				}
			}
		}
		rr.Verify, err = Verify(ctx, plan, mainPh, bl.DB(), stateDir)
		if err != nil {
			return nil, err
		}
		if !rr.Verify.OK() {
			sum.Problems = append(sum.Problems, fmt.Sprintf("run %d: at-most-once verification failed: %+v", run, rr.Verify))
		}
		// A function phase must answer every request 200 (main is judged by
		// Verify). A baseline's errors (e.g. the engine's duplicate answered
		// by MySQL after a Redis call over the 50 ms fast timeout) are
		// reported with the figures but do not fail the run.
		for i, ph := range rr.Phases {
			e := ph.Classes["error"]
			switch {
			case e.N == 0 || ph.Name == PhaseMain:
			case isFunction(ph.Name):
				sum.Problems = append(sum.Problems, fmt.Sprintf("run %d: %d errors in %s: %s", run, e.N, ph.Name, firstErr(phases[i])))
			default:
				sum.Notes = append(sum.Notes, fmt.Sprintf("run %d: %d of %d baseline operations failed in %s: %s", run, e.N, ph.N, ph.Name, firstErr(phases[i])))
			}
		}
		rr.Figures = figures(rr, o)
		if csvw != nil {
			for _, ph := range phases {
				writeCSV(csvw, ph)
			}
			csvw.Flush()
		}
		printRun(out, rr, o)
		sum.Runs = append(sum.Runs, rr)
	}
	if ctx.Err() != nil {
		sum.Problems = append(sum.Problems, "stopped early: "+ctx.Err().Error())
	}

	// Stop the spawned instances: they flush their counters on SIGTERM.
	// The client's idle connections are closed first: net/http's Shutdown
	// waits up to 5 s for a connection that was opened but never carried a
	// request, longer than Stop waits before it kills (and loses the counters).
	if o.Spawn > 0 {
		client.CloseIdleConnections()
		stopAll()
		after, err := readStats(context.WithoutCancel(ctx), bl.DB())
		if err == nil {
			sc := &StatsCheck{Function: map[string]int64{}, Client: decisions}
			for k, v := range after {
				if d := v - statsBefore[k]; d != 0 {
					sc.Function[k] = d
				}
			}
			for k, v := range sentPure {
				sc.Client["pure_duplicates_to_"+k] = v
			}
			for _, p := range logPaths {
				if b, err := os.ReadFile(p); err == nil {
					sc.FastFailures += bytes.Count(b, []byte(`fast layer unavailable`))
				}
			}
			sum.Stats = sc
		}
	}
	sum.Aggregate = aggregate(sum.Runs)
	printSummary(out, sum, o)
	if o.PNG != "" {
		if err := WriteHistogramPNG(o.PNG, histOrder, hist); err != nil {
			return sum, fmt.Errorf("png: %w", err)
		}
		fmt.Fprintf(out, "histogram: %s\n", o.PNG)
	}
	if o.CSV != "" {
		fmt.Fprintf(out, "per-request CSV: %s\n", o.CSV)
	}
	if o.JSON != "" {
		b, _ := json.MarshalIndent(sum, "", "  ")
		if err := os.WriteFile(o.JSON, b, 0o644); err != nil {
			return sum, err
		}
	}
	return sum, nil
}

// firstErr is the first error of a phase, for the report.
func firstErr(ph PhaseResult) string {
	for i := range ph.Results {
		if r := &ph.Results[i]; r.Class() == "error" {
			if r.Err != "" {
				return r.Err
			}
			return fmt.Sprintf("HTTP %d", r.HTTPStatus)
		}
	}
	return ""
}

func nonce() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// finishedActions lists the actions some answer of which was SUCCEEDED.
func finishedActions(ph PhaseResult, n int) []int {
	ok := make([]bool, n)
	for i := range ph.Results {
		if r := &ph.Results[i]; r.Status == "SUCCEEDED" && r.Action >= 0 && r.Action < n {
			ok[r.Action] = true
		}
	}
	var out []int
	for a, y := range ok {
		if y {
			out = append(out, a)
		}
	}
	return out
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

func writeCSV(w *csv.Writer, ph PhaseResult) {
	for i := range ph.Results {
		r := &ph.Results[i]
		_ = w.Write([]string{strconv.Itoa(r.Run), r.Phase, strconv.Itoa(r.Seq), strconv.Itoa(r.Action), string(r.Kind),
			r.Target, r.FCRequestID, strconv.FormatFloat(ms(r.Start), 'f', 3, 64),
			strconv.FormatInt(r.Latency.Microseconds(), 10), strconv.Itoa(r.HTTPStatus), r.Class(), r.Key, r.Status,
			r.Decision, strconv.FormatBool(r.Duplicate), strconv.Itoa(r.Attempt), r.Err})
	}
}

// figures are the numbers of one run that the summary aggregates.
func figures(rr RunReport, o Options) []Figure {
	var fs []Figure
	f := func(name, unit string, v float64, goal string) {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			fs = append(fs, Figure{Name: name, Unit: unit, Value: v, Goal: goal})
		}
	}
	p := rr.phaseByName
	if m, ok := p[PhaseMain]; ok {
		f("main: events/s", "1/s", m.Rate, "")
		for _, c := range []string{"first", "duplicate"} {
			if l := m.Classes[c]; l.N > 0 {
				f("main "+c+": p50", "ms", ms(l.P50), "")
				f("main "+c+": p90", "ms", ms(l.P90), "")
				f("main "+c+": p99", "ms", ms(l.P99), "")
			}
		}
	}
	for _, name := range []string{PhaseDupRedis, PhaseDupMySQL, PhaseBare, PhaseBareInProc} {
		if s, ok := p[name]; ok {
			f(name+": events/s", "1/s", s.Rate, "")
			f(name+": p50", "ms", ms(s.All.P50), "")
			f(name+": p90", "ms", ms(s.All.P90), "")
			f(name+": p99", "ms", ms(s.All.P99), "")
		}
	}
	for _, name := range []string{PhaseRawEvalsha, PhaseLibDup, PhaseRawInsert, PhaseRawAllOps, PhaseLibClaim} {
		if s, ok := p[name]; ok {
			f(name+": ops/s", "1/s", s.Rate, "")
			f(name+": mean", "ms", ms(s.All.Mean), "")
			f(name+": p50", "ms", ms(s.All.P50), "")
			f(name+": p99", "ms", ms(s.All.P99), "")
		}
	}
	ratio := func(a, b time.Duration) float64 { return float64(a) / float64(b) }
	bare, okBare := p[PhaseBare]
	for _, name := range []string{PhaseDupRedis, PhaseDupMySQL} {
		if d, ok := p[name]; ok && okBare {
			f(name+" / bare-handler: p50 latency", "x", ratio(d.All.P50, bare.All.P50), "")
			f(name+" / bare-handler: mean latency", "x", ratio(d.All.Mean, bare.All.Mean), "")
			goal := ""
			if name == PhaseDupRedis {
				goal = "≥ 50 %"
			}
			f(name+" / bare-handler: throughput", "%", 100*d.Rate/bare.Rate, goal)
		}
	}
	if d, ok := p[PhaseDupRedis]; ok {
		if b, ok := p[PhaseBareInProc]; ok {
			f("dup-redis / bare-inproc: throughput", "%", 100*d.Rate/b.Rate, "")
		}
		if c, ok := rr.CPU[PhaseDupRedis]; ok {
			if b, ok := rr.CPU[PhaseBare]; ok && b > 0 {
				f("dup-redis / bare-handler: CPU per request", "x", ratio(c, b), "")
			}
		}
	}
	if r, ok1 := p[PhaseDupRedis]; ok1 {
		if m, ok2 := p[PhaseDupMySQL]; ok2 {
			f("dup-mysql / dup-redis: p50 latency", "x", ratio(m.All.P50, r.All.P50), "")
		}
	}
	if l, ok1 := p[PhaseLibClaim]; ok1 {
		if r, ok2 := p[PhaseRawInsert]; ok2 {
			f("lib claim+complete / raw INSERT+UPDATE: mean", "x", ratio(l.All.Mean, r.All.Mean), "≤ 1.3")
			f("lib claim+complete / raw INSERT+UPDATE: p50", "x", ratio(l.All.P50, r.All.P50), "")
			f("lib claim+complete / raw INSERT+UPDATE: throughput", "%", 100*l.Rate/r.Rate, "")
		}
		if r, ok2 := p[PhaseRawAllOps]; ok2 {
			f("lib claim+complete / raw all ops: mean", "x", ratio(l.All.Mean, r.All.Mean), "≤ 1.3")
			f("lib claim+complete / raw all ops: p50", "x", ratio(l.All.P50, r.All.P50), "")
		}
	}
	if l, ok1 := p[PhaseLibDup]; ok1 {
		if r, ok2 := p[PhaseRawEvalsha]; ok2 {
			f("lib duplicate (Redis) / raw EVALSHA: mean", "x", ratio(l.All.Mean, r.All.Mean), "≤ 1.3")
			f("lib duplicate (Redis) / raw EVALSHA: p50", "x", ratio(l.All.P50, r.All.P50), "")
		}
	}
	if m, ok1 := p[PhaseMain]; ok1 {
		if r, ok2 := p[PhaseRawInsert]; ok2 && m.Classes["first"].N > 0 {
			f("function first (HTTP) / raw INSERT+UPDATE: p50", "x", ratio(m.Classes["first"].P50, r.All.P50), "")
		}
		if l, ok2 := p[PhaseLibClaim]; ok2 && m.Classes["first"].N > 0 {
			f("function first (HTTP) / lib claim+complete: p50", "x", ratio(m.Classes["first"].P50, l.All.P50), "")
		}
	}
	for _, name := range []string{PhaseMain, PhaseDupRedis, PhaseDupMySQL} {
		if d, ok := rr.CPU[name]; ok {
			f("function CPU per request: "+name, "µs", float64(d)/float64(time.Microsecond), "")
		}
	}
	if d, ok := rr.CPU[PhaseBare]; ok {
		f("bare-handler CPU per request", "µs", float64(d)/float64(time.Microsecond), "")
	}
	v := rr.Verify
	f("effective duplicates", "%", v.EffectiveRate(), "0.00 %")
	f("injected duplicates", "%", 100*float64(v.Injected)/float64(max(1, v.Deliveries)), "")
	f("model calls saved", "calls", float64(v.Saved), "")
	var rss int64
	for _, n := range rr.LoadRSS {
		rss = max(rss, n)
	}
	if rss > 0 {
		f("RSS under load (largest instance)", "MB", float64(rss)/(1<<20), "")
	}
	return fs
}

func aggregate(runs []RunReport) []Aggregate {
	var order []string
	by := map[string]*Aggregate{}
	for _, r := range runs {
		for _, f := range r.Figures {
			a, ok := by[f.Name]
			if !ok {
				a = &Aggregate{Name: f.Name, Unit: f.Unit, Goal: f.Goal}
				by[f.Name] = a
				order = append(order, f.Name)
			}
			a.Values = append(a.Values, f.Value)
		}
	}
	out := make([]Aggregate, 0, len(order))
	for _, n := range order {
		a := by[n]
		a.Min, a.Max = math.Inf(1), math.Inf(-1)
		for _, v := range a.Values {
			a.Min, a.Max = min(a.Min, v), max(a.Max, v)
		}
		a.Median = median(a.Values)
		out = append(out, *a)
	}
	return out
}

func printRun(w io.Writer, rr RunReport, o Options) {
	fmt.Fprintf(w, "\n== run %d (nonce %s): %d deliveries: %d first, %d redeliveries, %d double submits, %d burst copies\n",
		rr.Run, rr.Nonce, rr.Verify.Deliveries, rr.Plan[KindFirst], rr.Plan[KindRedeliver], rr.Plan[KindDouble], rr.Plan[KindBurst])
	fmt.Fprintf(w, "%-20s %-10s %7s %9s %9s %9s %9s %9s %9s\n", "phase", "class", "n", "per s", "mean ms", "p50 ms", "p90 ms", "p99 ms", "max ms")
	for _, ph := range rr.Phases {
		row := func(class string, l Lat, rate float64) {
			fmt.Fprintf(w, "%-20s %-10s %7d %9.0f %9.3f %9.3f %9.3f %9.3f %9.3f\n", ph.Name, class, l.N, rate,
				ms(l.Mean), ms(l.P50), ms(l.P90), ms(l.P99), ms(l.Max))
		}
		row("all", ph.All, ph.Rate)
		if ph.Name == PhaseMain {
			for _, c := range []string{"first", "duplicate", "error"} {
				if l := ph.Classes[c]; l.N > 0 {
					row(c, l, l.Rate)
				}
			}
		} else if l := ph.Classes["error"]; l.N > 0 {
			row("error", l, l.Rate)
		}
	}
	fmt.Fprintln(w, "ratios (same run, same concurrency):")
	for _, f := range rr.Figures {
		if f.Unit == "x" || (f.Unit == "%" && strings.Contains(f.Name, "/")) {
			goal := ""
			if f.Goal != "" {
				goal = "   goal " + f.Goal
			}
			fmt.Fprintf(w, "  %-58s %8.2f %s%s\n", f.Name, f.Value, f.Unit, goal)
		}
	}
	v := rr.Verify
	fmt.Fprintf(w, "at most once: %d deliveries, %d answered non-200; %d actions, %d executions, %d effective duplicates (%.2f %%), %d actions not executed",
		v.Deliveries, v.Non200, v.Actions, v.Executions, v.Extra, v.EffectiveRate(), v.NoExecution)
	if v.DBChecked {
		fmt.Fprintf(w, "; MySQL: %d records, %d with attempt > 1, %d not SUCCEEDED", v.DBRecords, v.DBAttemptsOver1, v.DBNotOK)
	} else if v.DBSkipped != "" {
		fmt.Fprintf(w, "; MySQL check skipped: %s", v.DBSkipped)
	}
	if v.ObjChecked {
		fmt.Fprintf(w, "; %d attempt outputs for %d keys", v.Outputs, v.Keys)
	}
	fmt.Fprintf(w, "\nmodel calls saved: %d of %d injected duplicates answered without executing", v.Saved, v.Injected)
	if v.OK() {
		fmt.Fprintln(w, "  [OK]")
	} else {
		fmt.Fprintln(w, "  [FAILED]")
	}
	if len(rr.CPU) > 0 {
		fmt.Fprintf(w, "function CPU (user+system, /proc/<pid>/stat) per request:")
		for _, name := range []string{PhaseMain, PhaseDupRedis, PhaseDupMySQL} {
			if d, ok := rr.CPU[name]; ok {
				fmt.Fprintf(w, " %s %.0f µs;", name, float64(d)/float64(time.Microsecond))
			}
		}
		if d, ok := rr.CPU[PhaseBare]; ok {
			fmt.Fprintf(w, " (bare-handler processes: %.0f µs)", float64(d)/float64(time.Microsecond))
		}
		fmt.Fprintln(w)
	}
	if len(rr.LoadRSS) > 0 {
		fmt.Fprintf(w, "RSS under load (max while the main phase ran):")
		for _, k := range sortedKeys(rr.LoadRSS) {
			fmt.Fprintf(w, " %s %.1f MB;", k, float64(rr.LoadRSS[k])/(1<<20))
		}
		fmt.Fprintln(w)
	}
}

func printSummary(w io.Writer, s *Summary, o Options) {
	if len(s.IdleRSS) > 0 {
		fmt.Fprintf(w, "\nRSS idle (after /initialize, before load):")
		for _, k := range sortedKeys(s.IdleRSS) {
			fmt.Fprintf(w, " %s %.1f MB;", k, float64(s.IdleRSS[k])/(1<<20))
		}
		fmt.Fprintln(w)
	}
	if sc := s.Stats; sc != nil {
		fs, st := sc.Function["fast_reject"], sc.Function["store_conflict"]
		cl := sc.Client
		fmt.Fprintf(w, "\nfunction's own counters (idempotency_stats, flushed at SIGTERM) vs answers seen, all phases incl. warm-up:\n")
		fmt.Fprintf(w, "  first %d / %d, takeover %d / %d, repeat_other %d / %d, repeat_done %d / %d\n",
			sc.Function["first"], cl["first"], sc.Function["takeover"], cl["takeover"],
			sc.Function["repeat_other"], cl["repeat_other"], sc.Function["repeat_done"], cl["repeat_done"])
		pr, pm := cl["pure_duplicates_to_"+PhaseDupRedis], cl["pure_duplicates_to_"+PhaseDupMySQL]
		fmt.Fprintf(w, "  duplicates answered by Redis (fast_reject) %d, by MySQL (store_conflict) %d;\n", fs, st)
		fmt.Fprintf(w, "  pure duplicates sent to Redis instances %d, to MySQL-only instances %d; fast-layer failures logged %d\n",
			pr, pm, sc.FastFailures)
		switch {
		case !o.Redis:
		case sc.FastFailures > 0:
			fmt.Fprintf(w, "  → the split of the main phase's duplicates is not attributable: after each fast-layer failure an instance\n"+
				"    skips Redis for 1 s, and the duplicates it answers meanwhile (pure ones included) are answered by MySQL\n")
		case fs >= pr:
			fmt.Fprintf(w, "  → main-phase duplicates answered by Redis ≈ %d, by MySQL ≈ %d (if Redis answered every pure duplicate sent to it)\n", fs-pr, st-pm)
		default:
			fmt.Fprintf(w, "  → at least %d pure duplicates sent to Redis instances were answered by MySQL (Redis skipped after a failed or >50 ms call)\n", pr-fs)
		}
	}
	fmt.Fprintf(w, "\n== summary over %d run(s): min / median / max\n", len(s.Runs))
	for _, a := range s.Aggregate {
		goal := ""
		if a.Goal != "" {
			goal = "  goal " + a.Goal
		}
		fmt.Fprintf(w, "  %-58s %10.3f %10.3f %10.3f %s%s\n", a.Name, a.Min, a.Median, a.Max, a.Unit, goal)
	}
	if len(s.Notes) > 0 {
		fmt.Fprintln(w, "\nnotes:")
		for _, n := range s.Notes {
			fmt.Fprintln(w, "  "+n)
		}
	}
	if len(s.Problems) > 0 {
		fmt.Fprintln(w, "\nPROBLEMS:")
		for _, p := range s.Problems {
			fmt.Fprintln(w, "  "+p)
		}
	} else {
		fmt.Fprintln(w, "\nverdict: every delivery answered 200, 0 effective duplicates")
	}
}

func sortedKeys(m map[string]int64) []string { return slices.Sorted(maps.Keys(m)) }
