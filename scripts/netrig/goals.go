package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/idemgate/idemgate/internal/dev/netrig"
)

// The load test's phases the rig reports, in its table's order, with their
// labels.
var phases = []struct{ name, label string }{
	{"first-delivery", "first delivery, Redis + MySQL"},
	{"first-delivery/mysql", "first delivery, MySQL alone"},
	{"raw-function", "raw pipeline, own process"},
	{"raw-pipeline", "raw pipeline, in generator"},
	{"dup-redis", "Redis duplicate"},
	{"dup-mysql", "MySQL duplicate"},
	{"raw-insert+update", "raw INSERT + UPDATE"},
}

// The process groups charged per phase (the load test's -observe names and
// its own two), in the table's order.
var procs = []string{"function", "redis", "mariadb", "load-generator", "proxy-redis", "proxy-mysql"}

// Phase is one phase's figures in one run.
type Phase struct {
	Rate     float64            `json:"per_s"`
	P50, P99 float64            // ms
	CPU      map[string]float64 `json:"cpu_us_per_request"` // by process group
}

// Run is one run of a configuration.
type Run struct {
	Phases map[string]Phase `json:"phases"`
}

// Config is one concurrency × delay, with its runs and goals.
type Config struct {
	C       int                     `json:"c"`
	Delay   time.Duration           `json:"delay_one_way_ns"`
	Mode    string                  `json:"delay_mode"`
	Runs    []Run                   `json:"runs"`
	Goals   []Goal                  `json:"goals"`
	Proxies map[string]netrig.Stats `json:"proxies,omitempty"`
	// Problems are the load test's: a wrong answer or an effective
	// duplicate (the figures are reported all the same).
	Problems []string `json:"problems,omitempty"`
}

// Goal is one of issue 41's goals over a configuration's runs.
type Goal struct {
	Name             string    `json:"name"`
	Unit             string    `json:"unit"`
	Want             string    `json:"want"` // "≤ 1.30" …
	Values           []float64 `json:"values"`
	Min, Median, Max float64   `json:"-"`
	Met              bool      `json:"met"`
	limit            float64
	atMost           bool
}

// ltSummary is the part of the load test's -json the rig reads.
type ltSummary struct {
	Runs []struct {
		Figures []struct {
			Name  string  `json:"name"`
			Value float64 `json:"value"`
		} `json:"figures"`
		ProcCPU map[string]map[string]float64 `json:"cpu_per_request_us_by_process"`
	} `json:"runs"`
	Problems []string `json:"problems"`
}

// read takes a configuration's runs from the load test's JSON and
// computes its goals.
func (c *Config) read(js []byte) error {
	var s ltSummary
	if err := json.Unmarshal(js, &s); err != nil {
		return fmt.Errorf("the load test's JSON: %w", err)
	}
	c.Problems = s.Problems
	if len(s.Runs) == 0 {
		return fmt.Errorf("the load test's JSON has no runs (problems: %v)", s.Problems)
	}
	for _, lr := range s.Runs {
		fig := map[string]float64{}
		for _, f := range lr.Figures {
			fig[f.Name] = f.Value
		}
		run := Run{Phases: map[string]Phase{}}
		for _, p := range phases {
			rate, ok := fig[p.name+": events/s"]
			if !ok {
				rate, ok = fig[p.name+": ops/s"]
			}
			if !ok {
				return fmt.Errorf("the load test did not report phase %s", p.name)
			}
			run.Phases[p.name] = Phase{Rate: rate, P50: fig[p.name+": p50"], P99: fig[p.name+": p99"], CPU: lr.ProcCPU[p.name]}
		}
		c.Runs = append(c.Runs, run)
	}
	c.Goals = goals(c)
	return nil
}

// goals are issue 41's, each per run, then judged by the median.
func goals(c *Config) []Goal {
	rtt := 2 * float64(c.Delay) / float64(time.Millisecond) // ms
	gs := []Goal{
		{Name: "function CPU per first delivery / raw function's CPU per task", Unit: "x", limit: 1.3, atMost: true},
		{Name: "function CPU per Redis duplicate", Unit: "µs", limit: 150, atMost: true},
		{Name: "first-delivery p50 − raw function's p50 (budget: 2 Redis round trips + 0.3 ms)", Unit: "ms", limit: 2*rtt + 0.3, atMost: true},
		{Name: "Redis duplicate p50 (budget: 1 round trip + 0.3 ms)", Unit: "ms", limit: rtt + 0.3, atMost: true},
		{Name: "first-delivery throughput / raw function's", Unit: "x", limit: 0.85},
		{Name: "first-delivery throughput, MySQL + Redis / MySQL alone", Unit: "x", limit: 0.95},
	}
	// The raw pipeline of the goals is the raw function: the same work in
	// processes of their own, placed, invoked and measured as the
	// instances are (scripts/loadtest/rawfn).
	for _, r := range c.Runs {
		p := r.Phases
		vals := []float64{
			p["first-delivery"].CPU["function"] / p["raw-function"].CPU["function"],
			p["dup-redis"].CPU["function"],
			p["first-delivery"].P50 - p["raw-function"].P50,
			p["dup-redis"].P50,
			p["first-delivery"].Rate / p["raw-function"].Rate,
			p["first-delivery"].Rate / p["first-delivery/mysql"].Rate,
		}
		for i, v := range vals {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				gs[i].Values = append(gs[i].Values, v)
			}
		}
	}
	for i := range gs {
		g := &gs[i]
		op := "≥"
		if g.atMost {
			op = "≤"
		}
		g.Want = fmt.Sprintf("%s %.2f %s", op, g.limit, g.Unit)
		if len(g.Values) == 0 {
			g.Min, g.Median, g.Max = math.NaN(), math.NaN(), math.NaN()
			continue
		}
		s := slices.Clone(g.Values)
		slices.Sort(s)
		g.Min, g.Max, g.Median = s[0], s[len(s)-1], median(s)
		g.Met = (g.atMost && g.Median <= g.limit) || (!g.atMost && g.Median >= g.limit)
	}
	return gs
}

func median(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// medianPhase is a phase's figures, each the median over the runs.
func medianPhase(c *Config, name string) Phase {
	pick := func(f func(Phase) float64) float64 {
		var v []float64
		for _, r := range c.Runs {
			v = append(v, f(r.Phases[name]))
		}
		slices.Sort(v)
		return median(v)
	}
	m := Phase{Rate: pick(func(p Phase) float64 { return p.Rate }), P50: pick(func(p Phase) float64 { return p.P50 }),
		P99: pick(func(p Phase) float64 { return p.P99 }), CPU: map[string]float64{}}
	for _, proc := range procs {
		if _, ok := c.Runs[0].Phases[name].CPU[proc]; ok {
			m.CPU[proc] = pick(func(p Phase) float64 { return p.CPU[proc] })
		}
	}
	return m
}

// printConfig prints one configuration's phases side by side and its goals.
func (r *rig) printConfig(c *Config) {
	w := r.out
	fmt.Fprintf(w, "\nc = %d, one-way delay %s to Redis and to MariaDB (%s), median of %d run(s); CPU per delivery from /proc, µs:\n",
		c.C, c.Delay, c.Mode, len(c.Runs))
	fmt.Fprintf(w, "%-31s %8s %8s %8s", "phase", "per s", "p50 ms", "p99 ms")
	for _, p := range procs {
		fmt.Fprintf(w, " %9s", shortProc(p))
	}
	fmt.Fprintln(w)
	for _, ph := range phases {
		m := medianPhase(c, ph.name)
		fmt.Fprintf(w, "%-31s %8.0f %8.3f %8.3f", ph.label, m.Rate, m.P50, m.P99)
		for _, p := range procs {
			if v, ok := m.CPU[p]; ok {
				fmt.Fprintf(w, " %9.1f", v)
			} else {
				fmt.Fprintf(w, " %9s", "–")
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "(the \"function\" column of \"raw pipeline, own process\" is the raw function's processes: scripts/loadtest/rawfn)")
	for name, s := range c.Proxies {
		fmt.Fprintf(w, "%s: %d connections, %d chunks; written late by p50 %s, p99 %s beyond the %s delay (nanosleep overshoot %s, subtracted)\n",
			name, s.Connections, s.Chunks, s.LateP50.Round(time.Microsecond), s.LateP99.Round(time.Microsecond), s.Delay,
			s.Overshoot.Round(time.Microsecond))
	}
	for _, p := range c.Problems {
		fmt.Fprintf(w, "PROBLEM: %s\n", p)
	}
	fmt.Fprintln(w, "goals (min / median / max over the runs; met by the median):")
	for _, g := range c.Goals {
		fmt.Fprintf(w, "  %-82s %8.3f %8.3f %8.3f %-3s  goal %-12s %s\n", g.Name, g.Min, g.Median, g.Max, g.Unit, g.Want, metWord(g.Met))
	}
}

func shortProc(p string) string {
	return map[string]string{"function": "function", "redis": "redis", "mariadb": "mariadb", "load-generator": "generator",
		"proxy-redis": "prx-redis", "proxy-mysql": "prx-mysql"}[p]
}

func metWord(met bool) string {
	if met {
		return "met"
	}
	return "NOT MET"
}

// report prints the goals of every configuration as one Markdown table and
// writes -md and -json.
func (r *rig) report(configs []*Config) {
	if len(configs) == 0 {
		return
	}
	var b strings.Builder
	writeMarkdown(&b, configs)
	fmt.Fprintf(r.out, "\n== goals, every configuration (Markdown)\n%s", b.String())
	if r.o.MD != "" {
		if err := os.WriteFile(r.o.MD, []byte(b.String()), 0o644); err != nil {
			fmt.Fprintln(r.out, "netrig: -md:", err)
		}
	}
	if r.o.JSON != "" {
		if err := writeJSON(r.o.JSON, configs); err != nil {
			fmt.Fprintln(r.out, "netrig: -json:", err)
		}
	}
}

func writeMarkdown(w io.Writer, configs []*Config) {
	fmt.Fprintln(w, "| goal | c | one-way delay | min / median / max | goal | |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, c := range configs {
		for _, g := range c.Goals {
			fmt.Fprintf(w, "| %s | %d | %s (%s) | %s / **%s** / %s %s | %s | **%s** |\n", g.Name, c.C, c.Delay, c.Mode,
				num(g.Min), num(g.Median), num(g.Max), g.Unit, g.Want, strings.ToLower(metWord(g.Met)))
		}
	}
}

func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3f", v)
}
