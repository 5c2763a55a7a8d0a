package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idemgate/idemgate/internal/dev/proc"
)

// httpJob sends units to targets, charging pids the CPU time.
func (r *runner) httpJob(run int, name string, units []Unit, targets []string, pids []int) Job {
	return Job{Name: name, N: len(units), PIDs: pids, Run: func(lo, hi int, done *atomic.Int64) PhaseResult {
		return execute(r.ctx, r.client, run, name, units[lo:hi], targets, r.o.C, 0, done)
	}}
}

// opJob times n calls of an in-process baseline operation.
func (r *runner) opJob(run int, name string, n int, op func(context.Context, int) error) Job {
	return Job{Name: name, N: n, Run: func(lo, hi int, done *atomic.Int64) PhaseResult {
		return timeOps(r.ctx, run, name, lo, hi, r.o.C, done, op)
	}}
}

// dupJobs are the pure-duplicate phases and the bare handler, which run
// interleaved.
func (r *runner) dupJobs(run int, actions []Action, done []int, nDup, nBase int) []Job {
	var jobs []Job
	if nDup > 0 {
		jobs = append(jobs, r.httpJob(run, r.dupPhase, PureDuplicates(actions, done, nDup), r.fl.targets, r.fl.loadPIDs))
		if len(r.fl.mysqlTargets) > 0 {
			jobs = append(jobs, r.httpJob(run, PhaseDupMySQL, PureDuplicates(actions, done, nDup), r.fl.mysqlTargets,
				r.fl.mysqlPIDs))
		}
	}
	if nBase > 0 && r.o.bare() {
		// The bare handlers are compared with the duplicate phases: as many
		// requests as they have.
		n := nBase
		if nDup > 0 {
			n = nDup
		}
		jobs = append(jobs, r.httpJob(run, PhaseBare, PureDuplicates(actions, done, n), r.fl.bareTargets, r.fl.barePIDs),
			r.httpJob(run, PhaseBareInProc, PureDuplicates(actions, done, n), []string{r.bl.Bare}, nil))
	}
	return jobs
}

// floorJobs are the in-process floors, interleaved by group: raw EVALSHA
// with the engine's Redis duplicate; raw INSERT+UPDATE and all raw ops with
// the engine's claim+complete.
func (r *runner) floorJobs(run int, n int, nonce string) ([][]Job, error) {
	libDup, err := r.bl.EngineDuplicateRedis(r.ctx)
	if err != nil {
		return nil, fmt.Errorf("lib-dup-redis: %w", err)
	}
	// The Redis floors take ~30 µs an operation: n of them would be a few ms
	// per slice, shorter than one GC cycle or scheduler hiccup, so they run
	// redisFloorFactor times as many.
	nr := n * redisFloorFactor
	if r.o.Floors == FloorsMySQL {
		return [][]Job{{r.opJob(run, PhaseRawInsert, n, r.bl.RawInsertUpdate()), r.opJob(run, PhaseLibClaim, n, r.bl.EngineClaimComplete())}}, nil
	}
	return [][]Job{
		{r.opJob(run, PhaseRawEvalsha, nr, r.bl.RawEvalsha(nonce)), r.opJob(run, PhaseLibDup, nr, libDup)},
		{r.opJob(run, PhaseRawInsert, n, r.bl.RawInsertUpdate()), r.opJob(run, PhaseRawAllOps, n, r.bl.RawAllOps()),
			r.opJob(run, PhaseLibClaim, n, r.bl.EngineClaimComplete())},
	}, nil
}

func isFunction(name string) bool {
	return name == PhaseMain || name == PhaseDupRedis || name == PhaseDupMySQL || isFirst(name)
}

// tally counts the decisions of a function phase's 200 answers.
func (r *runner) tally(ph PhaseResult) {
	for i := range ph.Results {
		res := &ph.Results[i]
		if res.HTTPStatus == 200 && res.Decision != "" {
			r.decisions[strings.ToLower(res.Decision)]++
			if res.Kind == KindPureDup && res.Duplicate {
				r.sentPure[ph.Name]++
			}
		}
	}
}

// warmUp runs every phase briefly, unreported: connections, pools, the
// scripts' SHA in Redis. Its decisions count in the stats check.
func (r *runner) warmUp() error {
	o := r.o
	warm := NewPlan(r.rng, "warm"+proc.Nonce(), 4*o.C, o.C, 0, o.Mix, o.BurstMax)
	ph := r.interleave([]Job{r.httpJob(0, PhaseMain, warm.Units, r.fl.targets, nil)}, 1, "warm-up")[0]
	r.tally(ph)
	done := finishedActions(ph, len(warm.Actions))
	for _, ph := range r.interleave(r.dupJobs(0, warm.Actions, done, min(o.DupN, 4*o.C), min(o.BaseN, 4*o.C)), 2, "warm-up") {
		if isFunction(ph.Name) {
			r.tally(ph)
		}
	}
	if o.FirstN > 0 {
		for _, ph := range r.interleave(r.firstJobs(0, min(o.FirstN, 2*o.C), "warm"+proc.Nonce()), 2, "warm-up") {
			if isFunction(ph.Name) {
				r.tally(ph)
			}
		}
	}
	if o.BaseN == 0 {
		return nil
	}
	groups, err := r.floorJobs(0, min(o.BaseN, 4*o.C), "warm")
	if err != nil {
		return err
	}
	for _, g := range groups {
		r.interleave(g, 2, "warm-up")
	}
	return nil
}

// measured collects one run's phases.
type measured struct {
	rr     RunReport
	phases []PhaseResult
}

// add records a phase, and the CPU time of its processes per answer when
// its job named them (Job.PIDs).
func (m *measured) add(ph PhaseResult) {
	m.phases = append(m.phases, ph)
	if ph.charged && len(ph.Results) > 0 {
		var cpu time.Duration
		for _, s := range ph.Slices {
			cpu += s.CPU
		}
		m.rr.CPU[ph.Name] = cpu / time.Duration(len(ph.Results))
	}
	if len(ph.Results) > 0 && len(ph.Slices) > 0 && ph.Slices[0].Procs != nil {
		per := map[string]float64{}
		for _, s := range ph.Slices {
			for name, d := range s.Procs {
				per[name] += float64(d) / float64(time.Microsecond)
			}
			if ph.charged {
				per[procFunction] += float64(s.CPU) / float64(time.Microsecond)
			}
		}
		for name := range per {
			per[name] /= float64(len(ph.Results))
		}
		if m.rr.ProcCPU == nil {
			m.rr.ProcCPU = map[string]map[string]float64{}
		}
		m.rr.ProcCPU[ph.Name] = per
	}
	s := summarizePhase(ph)
	m.rr.Phases = append(m.rr.Phases, s)
	m.rr.phaseByName[ph.Name] = s
}

// measure is one repetition: the main phase, the pure duplicates beside
// the bare handler, the in-process floors, then the at-most-once check and
// the run's report.
func (r *runner) measure(run int) (RunReport, error) {
	m := &measured{rr: RunReport{Run: run, Nonce: proc.Nonce(), phaseByName: map[string]PhaseSummary{},
		CPU: map[string]time.Duration{}}}
	plan := NewPlan(r.rng, m.rr.Nonce, r.o.N, r.o.C, r.o.DupRate, r.o.Mix, r.o.BurstMax)
	m.rr.Plan = plan.Counts
	mainPh := r.mainPhase(m, plan)
	r.dupPhases(m, plan.Actions, finishedActions(mainPh, len(plan.Actions)))
	r.firstPhases(m)
	if r.o.BaseN > 0 {
		groups, err := r.floorJobs(run, r.o.BaseN, m.rr.Nonce)
		if err != nil {
			return m.rr, err
		}
		for i, g := range groups {
			for _, ph := range r.interleave(g, r.o.Slices, fmt.Sprintf("floor %d", i+1)) {
				m.add(ph)
				r.addHist(ph.Name, ph, "")
			}
		}
	}
	side := r.sideEffects()
	var err error
	if m.rr.Verify, err = Verify(r.ctx, plan, mainPh, r.bl.DB(), side); err != nil {
		return m.rr, err
	}
	r.judge(m, side)
	for _, ph := range m.phases {
		if f, ok := sqlFigures(ph); ok && usesMySQL(ph.Name) {
			m.rr.SQL = append(m.rr.SQL, f)
		}
	}
	if r.o.Rate > 0 {
		m.rr.Offer = newOffer(r.o, mainPh)
	}
	m.rr.Figures = figures(m.rr)
	if r.csvw != nil {
		for _, ph := range m.phases {
			writeCSV(r.csvw, ph)
		}
		r.csvw.Flush()
	}
	printRun(r.out, m.rr)
	return m.rr, nil
}

// mainPhase sends the plan (paced with -rate), with the instances' CPU
// time and RSS sampled.
func (r *runner) mainPhase(m *measured, plan *Plan) PhaseResult {
	pids := r.fl.loadPIDs
	var sampler RSSSampler
	if len(pids) > 0 {
		sampler.Start(pids)
	}
	var pace time.Duration
	if r.o.Rate > 0 {
		pace = time.Duration(float64(time.Second) / r.o.Rate)
	}
	job := Job{Name: PhaseMain, N: len(plan.Units), PIDs: pids, Run: func(lo, hi int, done *atomic.Int64) PhaseResult {
		return execute(r.ctx, r.client, m.rr.Run, PhaseMain, plan.Units[lo:hi], r.fl.targets, r.o.C, pace, done)
	}}
	ph := r.interleave([]Job{job}, 1, PhaseMain)[0]
	if len(pids) > 0 {
		m.rr.LoadRSS = map[string]int64{}
		for pid, n := range sampler.Stop() {
			m.rr.LoadRSS[r.fl.pidOf[pid]] = n
		}
	}
	r.tally(ph)
	m.add(ph)
	r.addHist("main: first", ph, "first")
	r.addHist("main: duplicate", ph, "duplicate")
	return ph
}

// dupPhases runs the pure duplicates of the finished actions interleaved
// with the bare handler; each is charged its processes' CPU time (m.add).
func (r *runner) dupPhases(m *measured, actions []Action, done []int) {
	for _, ph := range r.interleave(r.dupJobs(m.rr.Run, actions, done, r.o.DupN, r.o.BaseN), r.o.Slices, "duplicates") {
		if isFunction(ph.Name) {
			r.tally(ph)
		}
		m.add(ph)
		r.addHist(ph.Name, ph, "")
	}
}

// judge records the run's problems: a failed at-most-once check, a
// first-delivery phase whose tasks did not each execute exactly once, a
// raw-function phase whose tasks did not each do the whole floor, or an
// error in a function phase (main is judged by Verify). A baseline's errors
// (e.g. the engine's duplicate answered by MySQL after a Redis call over the
// 50 ms fast timeout) are reported with the figures but do not fail the run.
func (r *runner) judge(m *measured, side *SideEffects) {
	run := m.rr.Run
	if !m.rr.Verify.OK() {
		r.sum.Problems = append(r.sum.Problems, fmt.Sprintf("run %d: at-most-once verification failed: %+v", run, m.rr.Verify))
	}
	for _, ph := range m.phases {
		var bad []string
		switch {
		case isFirst(ph.Name):
			bad = checkFirst(ph, side)
		case isRawFunction(ph.Name):
			rows, err := scratchRows(r.ctx, r.bl.DB(), keysOf(ph))
			if err != nil {
				bad = []string{fmt.Sprintf("%s: %v", ph.Name, err)}
			} else {
				bad = checkRawFunction(ph, side, rows)
			}
		}
		for _, p := range bad {
			r.sum.Problems = append(r.sum.Problems, fmt.Sprintf("run %d: %s", run, p))
		}
	}
	if r.fk != nil && r.fk.recv.refused() > 0 {
		r.sum.Problems = append(r.sum.Problems, fmt.Sprintf("run %d: the notify receiver refused %d requests (unsigned or malformed)", run, r.fk.recv.refused()))
	}
	for i, ph := range m.rr.Phases {
		e := ph.Classes["error"]
		switch {
		case e.N == 0 || ph.Name == PhaseMain || isFirst(ph.Name) || isRawFunction(ph.Name): // judged above
		case isFunction(ph.Name):
			r.sum.Problems = append(r.sum.Problems, fmt.Sprintf("run %d: %d errors in %s: %s", run, e.N, ph.Name, firstErr(m.phases[i])))
		default:
			r.sum.Notes = append(r.sum.Notes, fmt.Sprintf("run %d: %d of %d baseline operations failed in %s: %s", run, e.N, ph.N, ph.Name, firstErr(m.phases[i])))
		}
	}
}

// addHist adds a phase's latencies of one class ("": all) to the PNG's
// histogram under label.
func (r *runner) addHist(label string, ph PhaseResult, class string) {
	if _, ok := r.hist[label]; !ok {
		r.histOrder = append(r.histOrder, label)
	}
	for i := range ph.Results {
		if class == "" || ph.Results[i].Class() == class {
			r.hist[label] = append(r.hist[label], ms(ph.Results[i].Latency))
		}
	}
}
