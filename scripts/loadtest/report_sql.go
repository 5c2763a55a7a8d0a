package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// SQLFigures are a phase's MySQL counters over its clean slices (those in
// which no other client of the server was seen), per executed task and per
// request.
type SQLFigures struct {
	Phase    string `json:"phase"`
	Slices   int    `json:"slices"`
	Clean    int    `json:"clean_slices"`
	Tasks    int    `json:"tasks"`    // executions in the clean slices
	Requests int    `json:"requests"` // answers (operations) in the clean slices
	// PerTask is each counter's delta per executed task; Statements the sum
	// of statementVars per task, MinStatements the smallest per-slice value
	// of it (what a slice free of the instances' 10 s stats flush shows; -1:
	// no slice executed a task), Others the other client statements per task.
	// Figures that cannot be computed are 0 (JSON has no NaN).
	PerTask       map[string]float64 `json:"per_task,omitempty"`
	Statements    float64            `json:"statements_per_task"`
	MinStatements float64            `json:"statements_per_task_min_slice"`
	Others        float64            `json:"other_statements_per_task"`
	PerRequest    float64            `json:"statements_per_request"`
	PerSecond     float64            `json:"statements_per_second"`
	Foreign       string             `json:"first_unclean_slice,omitempty"` // why a slice was left out
}

// usesMySQL names the phases whose statements are reported.
func usesMySQL(name string) bool {
	return isFunction(name) || slices.Contains([]string{PhaseRawInsert, PhaseRawAllOps, PhaseLibClaim,
		PhaseRawPipeline, PhaseRawPipelineQuiet, PhaseRawFunction, PhaseRawFunctionQuiet}, name)
}

// sqlFigures sums a phase's clean slices; ok is false when none was probed.
func sqlFigures(ph PhaseResult) (SQLFigures, bool) {
	f := SQLFigures{Phase: ph.Name, Slices: len(ph.Slices), MinStatements: -1}
	sum := Counters{}
	var others int64
	var wall time.Duration
	for _, s := range ph.Slices {
		switch {
		case s.SQL == nil && s.Foreign == "":
			continue
		case s.Foreign != "":
			if f.Foreign == "" {
				f.Foreign = s.Foreign
			}
			continue
		}
		f.Clean++
		f.Tasks += s.Tasks
		f.Requests += s.Requests
		wall += s.Wall
		for k, v := range s.SQL {
			sum[k] += v
		}
		others += s.SQL.Others()
		if s.Tasks > 0 {
			per := float64(s.SQL.Statements()) / float64(s.Tasks)
			if f.MinStatements < 0 || per < f.MinStatements {
				f.MinStatements = per
			}
		}
	}
	if f.Clean == 0 {
		return f, f.Foreign != ""
	}
	f.PerRequest = finite(div(sum.Statements(), f.Requests))
	f.PerSecond = float64(sum.Statements()) / wall.Seconds()
	if f.Tasks > 0 {
		f.PerTask = map[string]float64{}
		for k, v := range sum {
			f.PerTask[k] = div(v, f.Tasks)
		}
		f.Statements, f.Others = div(sum.Statements(), f.Tasks), div(others, f.Tasks)
	}
	return f, true
}

// finite is x, or 0 for NaN and infinities (JSON has neither).
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

func div(a int64, b int) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// sqlFigureList adds each phase's headline counts to the run's figures.
func sqlFigureList(fs *figureList, sq []SQLFigures) {
	for _, f := range sq {
		switch {
		case f.Clean == 0:
		case f.Tasks > 0:
			fs.add(f.Phase+": MySQL statements per task", "", f.Statements, "")
			fs.add(f.Phase+": InnoDB log writes per task", "", f.PerTask["Innodb_log_writes"], "")
			fs.add(f.Phase+": MySQL statements/s", "1/s", f.PerSecond, "")
		default:
			fs.add(f.Phase+": MySQL statements per request", "", f.PerRequest, "")
			fs.add(f.Phase+": MySQL statements/s", "1/s", f.PerSecond, "")
		}
	}
}

// printSQL prints the per-task table.
func printSQL(w io.Writer, sq []SQLFigures) {
	if len(sq) == 0 {
		return
	}
	fmt.Fprintln(w, "MySQL per executed task (SHOW GLOBAL STATUS deltas around each slice; slices in which another client was seen are left out):")
	fmt.Fprintf(w, "  %-31s %5s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %8s\n", "phase", "clean", "tasks",
		"INSERT", "UPDATE", "SELECT", "DELETE", "BEGIN", "COMMIT", "RBACK", "stmts", "(min)", "other", "logw", "fsync", "stmts/s")
	for _, f := range sq {
		if f.Clean == 0 {
			fmt.Fprintf(w, "  %-31s %2d/%-2d no clean slice (%s)\n", f.Phase, f.Clean, f.Slices, f.Foreign)
			continue
		}
		if f.Tasks == 0 {
			fmt.Fprintf(w, "  %-31s %2d/%-2d %6d requests, none executed: %.3f statements per request, %.0f/s\n",
				f.Phase, f.Clean, f.Slices, f.Requests, f.PerRequest, f.PerSecond)
			continue
		}
		p := f.PerTask
		fmt.Fprintf(w, "  %-31s %2d/%-2d %6d %6.2f %6.2f %6.2f %6.2f %6.2f %6.2f %6.2f %6.2f %6.2f %6.2f %6.2f %6.2f %8.0f\n",
			f.Phase, f.Clean, f.Slices, f.Tasks, p["Com_insert"]+p["Com_insert_select"]+p["Com_replace"]+p["Com_replace_select"],
			p["Com_update"]+p["Com_update_multi"], p["Com_select"], p["Com_delete"]+p["Com_delete_multi"], p["Com_begin"],
			p["Com_commit"], p["Com_rollback"], f.Statements, f.MinStatements, f.Others, p["Innodb_log_writes"],
			p["Innodb_data_fsyncs"], f.PerSecond)
	}
	for _, f := range sq {
		if f.Foreign != "" {
			fmt.Fprintf(w, "  (a slice left out, %s: %s)\n", f.Phase, f.Foreign)
			break
		}
	}
}
