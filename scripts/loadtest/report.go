package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// report aggregates the runs and writes the summary, the PNG and the JSON.
func (r *runner) report() error {
	o, sum := r.o, r.sum
	sum.Aggregate = aggregate(sum.Runs)
	printSummary(r.out, sum, o)
	if o.PNG != "" {
		if err := WriteHistogramPNG(o.PNG, r.histOrder, r.hist); err != nil {
			return fmt.Errorf("png: %w", err)
		}
		fmt.Fprintf(r.out, "histogram: %s\n", o.PNG)
	}
	if o.CSV != "" {
		fmt.Fprintf(r.out, "per-request CSV: %s\n", o.CSV)
	}
	if o.JSON != "" {
		b, err := json.MarshalIndent(sum, "", "  ")
		if err != nil {
			return fmt.Errorf("json: %w", err)
		}
		if err := os.WriteFile(o.JSON, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// printHeader names the run's shape and targets.
func (r *runner) printHeader() {
	o := r.o
	fmt.Fprintf(r.out, "idemgate load test: %d deliveries per run, %.1f %% duplicates (mix %s, bursts ≤ %d), c=%d, %d run(s)\n",
		o.N, o.DupRate, o.Mix, min(o.BurstMax, o.C), o.C, o.Repeat)
	fmt.Fprintf(r.out, "targets (Redis %v): %s\n", o.Redis, strings.Join(r.fl.targets, " "))
	if len(r.fl.mysqlTargets) > 0 {
		fmt.Fprintf(r.out, "MySQL-only targets (dup-mysql phase): %s\n", strings.Join(r.fl.mysqlTargets, " "))
	}
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
func figures(rr RunReport) []Figure {
	var fs figureList
	phaseFigures(&fs, rr.phaseByName)
	ratioFigures(&fs, rr)
	sqlFigureList(&fs, rr.SQL)
	if rr.Offer != nil {
		rr.Offer.figures(&fs)
	}
	for _, name := range cpuPhases {
		if d, ok := rr.CPU[name]; ok {
			fs.add("function CPU per request: "+name, "µs", float64(d)/float64(time.Microsecond), "")
		}
	}
	if d, ok := rr.CPU[PhaseBare]; ok {
		fs.add("bare-handler CPU per request", "µs", float64(d)/float64(time.Microsecond), "")
	}
	v := rr.Verify
	fs.add("effective duplicates", "%", v.EffectiveRate(), "0.00 %")
	fs.add("injected duplicates", "%", 100*float64(v.Injected)/float64(max(1, v.Deliveries)), "")
	fs.add("model calls saved", "calls", float64(v.Saved), "")
	var rss int64
	for _, n := range rr.LoadRSS {
		rss = max(rss, n)
	}
	if rss > 0 {
		fs.add("RSS under load (largest instance)", "MB", float64(rss)/(1<<20), "")
	}
	return fs
}

// cpuPhases are the function phases whose CPU per request is reported.
var cpuPhases = []string{PhaseMain, PhaseDupRedis, PhaseDupMySQL, PhaseFirst, PhaseFirstQuiet, PhaseFirstMySQL, PhaseFirstMySQLQuiet,
	PhaseRawFunction, PhaseRawFunctionQuiet}

// figureList collects figures, leaving out what could not be computed.
type figureList []Figure

func (fs *figureList) add(name, unit string, v float64, goal string) {
	if !math.IsNaN(v) && !math.IsInf(v, 0) {
		*fs = append(*fs, Figure{Name: name, Unit: unit, Value: v, Goal: goal})
	}
}

// phaseFigures are each phase's own rate and latencies.
func phaseFigures(fs *figureList, p map[string]PhaseSummary) {
	if m, ok := p[PhaseMain]; ok {
		fs.add("main: events/s", "1/s", m.Rate, "")
		for _, c := range []string{"first", "duplicate"} {
			if l := m.Classes[c]; l.N > 0 {
				fs.add("main "+c+": p50", "ms", ms(l.P50), "")
				fs.add("main "+c+": p90", "ms", ms(l.P90), "")
				fs.add("main "+c+": p99", "ms", ms(l.P99), "")
			}
		}
	}
	for _, name := range []string{PhaseDupRedis, PhaseDupMySQL, PhaseBare, PhaseBareInProc, PhaseFirst, PhaseFirstQuiet,
		PhaseFirstMySQL, PhaseFirstMySQLQuiet, PhaseRawPipeline, PhaseRawPipelineQuiet, PhaseRawFunction, PhaseRawFunctionQuiet} {
		if s, ok := p[name]; ok {
			fs.add(name+": events/s", "1/s", s.Rate, "")
			fs.add(name+": p50", "ms", ms(s.All.P50), "")
			fs.add(name+": p90", "ms", ms(s.All.P90), "")
			fs.add(name+": p99", "ms", ms(s.All.P99), "")
		}
	}
	for _, name := range []string{PhaseRawEvalsha, PhaseLibDup, PhaseRawInsert, PhaseRawAllOps, PhaseLibClaim} {
		if s, ok := p[name]; ok {
			fs.add(name+": ops/s", "1/s", s.Rate, "")
			fs.add(name+": mean", "ms", ms(s.All.Mean), "")
			fs.add(name+": p50", "ms", ms(s.All.P50), "")
			fs.add(name+": p99", "ms", ms(s.All.P99), "")
		}
	}
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

// ratioFigures compare the function with its floors, measured in the same
// run at the same concurrency.
func ratioFigures(fs *figureList, rr RunReport) {
	p := rr.phaseByName
	bare, okBare := p[PhaseBare]
	for _, name := range []string{PhaseDupRedis, PhaseDupMySQL} {
		if d, ok := p[name]; ok && okBare {
			fs.add(name+" / bare-handler: p50 latency", "x", ratio(d.All.P50, bare.All.P50), "")
			fs.add(name+" / bare-handler: mean latency", "x", ratio(d.All.Mean, bare.All.Mean), "")
			goal := ""
			if name == PhaseDupRedis {
				goal = "≥ 50 %"
			}
			fs.add(name+" / bare-handler: throughput", "%", 100*d.Rate/bare.Rate, goal)
		}
	}
	if d, ok := p[PhaseDupRedis]; ok {
		if b, ok := p[PhaseBareInProc]; ok {
			fs.add("dup-redis / bare-inproc: throughput", "%", 100*d.Rate/b.Rate, "")
		}
		if c, ok := rr.CPU[PhaseDupRedis]; ok {
			if b, ok := rr.CPU[PhaseBare]; ok && b > 0 {
				fs.add("dup-redis / bare-handler: CPU per request", "x", ratio(c, b), "")
			}
		}
		if m, ok := p[PhaseDupMySQL]; ok {
			fs.add("dup-mysql / dup-redis: p50 latency", "x", ratio(m.All.P50, d.All.P50), "")
		}
	}
	libraryRatios(fs, p)
	firstRatios(fs, p)
	rawFunctionRatios(fs, rr)
}

// rawFunctionRatios compare each first-delivery phase with the raw
// function (the same external work in processes of their own, reached over
// HTTP): throughput, p50 and the CPU per task of the processes.
func rawFunctionRatios(fs *figureList, rr RunReport) {
	p := rr.phaseByName
	for _, name := range []string{PhaseFirst, PhaseFirstQuiet, PhaseFirstMySQL, PhaseFirstMySQLQuiet} {
		floor := PhaseRawFunction
		if !notifies(name) {
			floor = PhaseRawFunctionQuiet
		}
		f, ok1 := p[name]
		raw, ok2 := p[floor]
		if !ok1 || !ok2 || raw.Rate == 0 {
			continue
		}
		fs.add(name+" / "+floor+": throughput", "x", f.Rate/raw.Rate, "")
		fs.add(name+" / "+floor+": p50 latency", "x", ratio(f.All.P50, raw.All.P50), "")
		if c, rc := rr.CPU[name], rr.CPU[floor]; c > 0 && rc > 0 {
			fs.add(name+" / "+floor+": CPU per task", "x", ratio(c, rc), "")
		}
	}
}

// firstRatios compare each first-delivery phase with the raw pipeline that
// does the same external work (with notify or without).
func firstRatios(fs *figureList, p map[string]PhaseSummary) {
	for _, name := range []string{PhaseFirst, PhaseFirstQuiet, PhaseFirstMySQL, PhaseFirstMySQLQuiet} {
		f, ok1 := p[name]
		raw, ok2 := p[floorOf(name)]
		if !ok1 || !ok2 || raw.Rate == 0 {
			continue
		}
		goalRate, goalP50 := "", ""
		if name == PhaseFirst || (name == PhaseFirstMySQL && p[PhaseFirst].N == 0) {
			// Issue #24's goals; the Goals table's older ones were 0.6 and 2.
			goalRate, goalP50 = "≥ 0.7 (#24)", "≤ 1.6 (#24)"
		}
		fs.add(name+" / "+floorOf(name)+": throughput", "x", f.Rate/raw.Rate, goalRate)
		fs.add(name+" / "+floorOf(name)+": p50 latency", "x", ratio(f.All.P50, raw.All.P50), goalP50)
	}
}

// libraryRatios compare the engine in-process with the raw operations, and
// the function's first deliveries with both.
func libraryRatios(fs *figureList, p map[string]PhaseSummary) {
	if l, ok1 := p[PhaseLibClaim]; ok1 {
		if r, ok2 := p[PhaseRawInsert]; ok2 {
			fs.add("lib claim+complete / raw INSERT+UPDATE: mean", "x", ratio(l.All.Mean, r.All.Mean), "≤ 1.3")
			fs.add("lib claim+complete / raw INSERT+UPDATE: p50", "x", ratio(l.All.P50, r.All.P50), "")
			fs.add("lib claim+complete / raw INSERT+UPDATE: throughput", "%", 100*l.Rate/r.Rate, "")
		}
		if r, ok2 := p[PhaseRawAllOps]; ok2 {
			fs.add("lib claim+complete / raw all ops: mean", "x", ratio(l.All.Mean, r.All.Mean), "≤ 1.3")
			fs.add("lib claim+complete / raw all ops: p50", "x", ratio(l.All.P50, r.All.P50), "")
		}
	}
	if l, ok1 := p[PhaseLibDup]; ok1 {
		if r, ok2 := p[PhaseRawEvalsha]; ok2 {
			fs.add("lib duplicate (Redis) / raw EVALSHA: mean", "x", ratio(l.All.Mean, r.All.Mean), "≤ 1.3")
			fs.add("lib duplicate (Redis) / raw EVALSHA: p50", "x", ratio(l.All.P50, r.All.P50), "")
		}
	}
	if m, ok1 := p[PhaseMain]; ok1 && m.Classes["first"].N > 0 {
		if r, ok2 := p[PhaseRawInsert]; ok2 {
			fs.add("function first (HTTP) / raw INSERT+UPDATE: p50", "x", ratio(m.Classes["first"].P50, r.All.P50), "")
		}
		if l, ok2 := p[PhaseLibClaim]; ok2 {
			fs.add("function first (HTTP) / lib claim+complete: p50", "x", ratio(m.Classes["first"].P50, l.All.P50), "")
		}
	}
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

func printRun(w io.Writer, rr RunReport) {
	fmt.Fprintf(w, "\n== run %d (nonce %s): %d deliveries sent; planned: %d first, %d redeliveries, %d double submits, %d burst copies\n",
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
	printSQL(w, rr.SQL)
	if rr.Offer != nil {
		rr.Offer.print(w)
	}
	if len(rr.CPU) > 0 {
		fmt.Fprintf(w, "function CPU (user+system, /proc/<pid>/stat) per request:")
		for _, name := range cpuPhases {
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
		fmt.Fprintf(w, "RSS under load (max while the main and first-delivery phases ran):")
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
		fs, ca, st := sc.Function["fast_reject"], sc.Function["cache_answer"], sc.Function["store_conflict"]
		cl := sc.Client
		fmt.Fprintf(w, "\nfunction's own counters (idempotency_stats, flushed at SIGTERM) vs answers seen, all phases incl. warm-up:\n")
		fmt.Fprintf(w, "  first %d / %d, takeover %d / %d, repeat_other %d / %d, repeat_done %d / %d\n",
			sc.Function["first"], cl["first"], sc.Function["takeover"], cl["takeover"],
			sc.Function["repeat_other"], cl["repeat_other"], sc.Function["repeat_done"], cl["repeat_done"])
		pr, pm := cl["pure_duplicates_to_"+PhaseDupRedis], cl["pure_duplicates_to_"+PhaseDupMySQL]
		fmt.Fprintf(w, "  duplicates answered by Redis (fast_reject) %d, by a local cache (cache_answer) %d, by MySQL (store_conflict) %d;\n", fs, ca, st)
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
