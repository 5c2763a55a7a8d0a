package main

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
)

// The first-delivery group: first deliveries only (fresh actions, no
// duplicates), to the instances with Redis and to those without, with and
// without notify, interleaved with the raw pipeline (the floor: the same
// external work without idempotency logic), with and without notify.
const (
	PhaseFirst            = "first-delivery"                 // Redis instances, notify
	PhaseFirstQuiet       = "first-delivery/no-notify"       // Redis instances
	PhaseFirstMySQL       = "first-delivery/mysql"           // instances without REDIS_URL, notify
	PhaseFirstMySQLQuiet  = "first-delivery/mysql/no-notify" // instances without REDIS_URL
	PhaseRawPipeline      = "raw-pipeline"                   // the floor, notify
	PhaseRawPipelineQuiet = "raw-pipeline/no-notify"
	// The raw pipeline in processes of their own (scripts/loadtest/rawfn),
	// invoked over HTTP as the instances are and measured as they are.
	PhaseRawFunction      = "raw-function"
	PhaseRawFunctionQuiet = "raw-function/no-notify"
)

func isFirst(name string) bool { return strings.HasPrefix(name, "first-delivery") }

func isRawFunction(name string) bool { return strings.HasPrefix(name, PhaseRawFunction) }

// notifies says whether a first-delivery, raw-pipeline or raw-function phase
// posts a notify.
func notifies(name string) bool { return !strings.HasSuffix(name, "/no-notify") }

// floorOf is the raw-pipeline phase a first-delivery phase is compared with.
func floorOf(name string) string {
	if notifies(name) {
		return PhaseRawPipeline
	}
	return PhaseRawPipelineQuiet
}

// firstVariant is one first-delivery phase: where it goes and what it asks.
type firstVariant struct {
	name    string
	targets []string
	pids    []int
}

func (r *runner) firstVariants() []firstVariant {
	f := r.fl
	var v []firstVariant
	if !r.o.Redis { // the targets answer from MySQL alone
		v = []firstVariant{{PhaseFirstMySQL, f.targets, f.loadPIDs}, {PhaseFirstMySQLQuiet, f.targets, f.loadPIDs}}
	} else {
		v = []firstVariant{{PhaseFirst, f.targets, f.loadPIDs}, {PhaseFirstQuiet, f.targets, f.loadPIDs}}
		if len(f.mysqlTargets) > 0 {
			v = append(v, firstVariant{PhaseFirstMySQL, f.mysqlTargets, f.mysqlPIDs},
				firstVariant{PhaseFirstMySQLQuiet, f.mysqlTargets, f.mysqlPIDs})
		}
	}
	if len(f.rawTargets) > 0 {
		v = append(v, firstVariant{PhaseRawFunction, f.rawTargets, f.rawPIDs},
			firstVariant{PhaseRawFunctionQuiet, f.rawTargets, f.rawPIDs})
	}
	if r.o.NoQuiet {
		v = slices.DeleteFunc(v, func(x firstVariant) bool { return !notifies(x.name) })
	}
	return v
}

// firstJobs are the group's jobs, n tasks each; every first-delivery phase
// has actions of its own (nonce-variant).
func (r *runner) firstJobs(run, n int, nonce string) []Job {
	var jobs []Job
	for i, v := range r.firstVariants() {
		url := ""
		if notifies(v.name) {
			url = r.fk.notifyURL
		}
		actions := newActions(fmt.Sprintf("%s-f%d", nonce, i), n, url)
		units := make([]Unit, n)
		for a := range actions {
			units[a] = Unit{Members: []Delivery{{Action: a, Kind: KindFirst, Body: actions[a].Body}}}
		}
		jobs = append(jobs, r.httpJob(run, v.name, units, v.targets, v.pids))
	}
	jobs = append(jobs, r.opJob(run, PhaseRawPipeline, n, r.raw.op(true)))
	if r.o.NoQuiet {
		return jobs
	}
	return append(jobs, r.opJob(run, PhaseRawPipelineQuiet, n, r.raw.op(false)))
}

// firstPhases runs the group (with -first-n > 0 and spawned instances), with
// the instances' RSS sampled.
func (r *runner) firstPhases(m *measured) {
	if r.o.FirstN <= 0 || r.raw == nil {
		return
	}
	var sampler RSSSampler
	pids := slices.Concat(r.fl.loadPIDs, r.fl.mysqlPIDs, r.fl.rawPIDs)
	sampler.Start(pids)
	for _, ph := range r.interleave(r.firstJobs(m.rr.Run, r.o.FirstN, m.rr.Nonce), r.o.Slices, "first deliveries") {
		if isFirst(ph.Name) {
			r.tally(ph)
		}
		m.add(ph)
		r.addHist(ph.Name, ph, "")
	}
	if m.rr.LoadRSS == nil {
		m.rr.LoadRSS = map[string]int64{}
	}
	for pid, n := range sampler.Stop() {
		label := r.fl.pidOf[pid]
		m.rr.LoadRSS[label] = max(m.rr.LoadRSS[label], n)
	}
}

// sideEffects is what the fakes saw, for the at-most-once checks (nil with
// -targets: the instances' services are their own).
func (r *runner) sideEffects() *SideEffects {
	if r.fk == nil || r.o.Spawn == 0 {
		return nil
	}
	outputs, objects := r.fk.objectsByKey()
	return &SideEffects{Outputs: outputs, Objects: objects, ModelCalls: r.fk.model.Calls, Notifies: r.fk.recv.posts}
}

// checkFirst checks a first-delivery phase: every answer a 200 FIRST
// SUCCEEDED, one model call, one attempt output and (with notify) one
// signed notify POST per key, none without.
func checkFirst(ph PhaseResult, side *SideEffects) []string {
	var bad []string
	wantNotify := 0
	if notifies(ph.Name) {
		wantNotify = 1
	}
	for i := range ph.Results {
		res := &ph.Results[i]
		switch {
		case res.Class() == "error":
			bad = append(bad, fmt.Sprintf("HTTP %d %s", res.HTTPStatus, res.Err))
		case res.Decision != "FIRST" || res.Status != "SUCCEEDED":
			bad = append(bad, fmt.Sprintf("%s %s", res.Decision, res.Status))
		case side == nil:
		case side.ModelCalls(res.Key) != 1:
			bad = append(bad, fmt.Sprintf("%d model calls", side.ModelCalls(res.Key)))
		case side.Outputs[res.Key] != 1:
			bad = append(bad, fmt.Sprintf("%d attempt outputs", side.Outputs[res.Key]))
		case side.Notifies(res.Key) != wantNotify:
			bad = append(bad, fmt.Sprintf("%d notify POSTs, want %d", side.Notifies(res.Key), wantNotify))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%s: %d of %d tasks not executed exactly once as asked (first: %s)", ph.Name, len(bad), len(ph.Results), bad[0])}
}

// rawObjects are the objects a task of the raw pipeline writes: input.json,
// attempt-001/output.json, approved/result.md.
const rawObjects = 3

// checkRawFunction checks a raw-function phase: every answer a 200 FIRST
// SUCCEEDED, and every task did the whole floor — one scratch row updated
// to SUCCEEDED (rows: its status by key), one model call, its three
// objects and (with notify) one signed notify POST. A floor that skips a
// step would make the function's overhead look smaller than it is.
func checkRawFunction(ph PhaseResult, side *SideEffects, rows map[string]string) []string {
	if side == nil {
		return nil
	}
	wantNotify := 0
	if notifies(ph.Name) {
		wantNotify = 1
	}
	var bad []string
	for i := range ph.Results {
		res := &ph.Results[i]
		switch k := res.Key; {
		case res.Class() == "error":
			bad = append(bad, fmt.Sprintf("HTTP %d %s", res.HTTPStatus, res.Err))
		case res.Decision != "FIRST" || res.Status != "SUCCEEDED":
			bad = append(bad, fmt.Sprintf("%s %s", res.Decision, res.Status))
		case rows[k] != "SUCCEEDED":
			bad = append(bad, fmt.Sprintf("scratch row %q, want one SUCCEEDED", rows[k]))
		case side.ModelCalls(k) != 1:
			bad = append(bad, fmt.Sprintf("%d model calls", side.ModelCalls(k)))
		case side.Objects[k] != rawObjects || side.Outputs[k] != 1:
			bad = append(bad, fmt.Sprintf("%d objects (%d attempt outputs), want %d (1)", side.Objects[k], side.Outputs[k], rawObjects))
		case side.Notifies(k) != wantNotify:
			bad = append(bad, fmt.Sprintf("%d notify POSTs, want %d", side.Notifies(k), wantNotify))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%s: %d of %d tasks did not do the raw pipeline's work exactly once (first: %s)",
		ph.Name, len(bad), len(ph.Results), bad[0])}
}

// scratchRows reads the status of the scratch table's rows of keys.
func scratchRows(ctx context.Context, db *sql.DB, keys []string) (map[string]string, error) {
	rows := map[string]string{}
	for lo := 0; lo < len(keys); lo += 500 {
		chunk := keys[lo:min(lo+500, len(keys))]
		args := make([]any, len(chunk))
		for i, k := range chunk {
			args[i] = k
		}
		q := "SELECT request_id, status FROM " + scratchTable + " WHERE request_id IN (?" + strings.Repeat(",?", len(chunk)-1) + ")"
		rs, err := db.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("scratch rows: %w", err)
		}
		for rs.Next() {
			var k, st string
			if err := rs.Scan(&k, &st); err != nil {
				rs.Close()
				return nil, err
			}
			rows[k] = st
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// keysOf are the keys a phase's answers named.
func keysOf(ph PhaseResult) []string {
	var keys []string
	for i := range ph.Results {
		if k := ph.Results[i].Key; k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}
