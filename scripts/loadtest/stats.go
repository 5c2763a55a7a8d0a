package main

import (
	"math"
	"slices"
	"time"
)

// Lat are latency figures of one class.
type Lat struct {
	N                             int
	Min, Mean, P50, P90, P99, Max time.Duration
	Rate                          float64 // answers of this class per second of the phase's wall time
}

// latStats summarises latencies (nearest-rank percentiles).
func latStats(ds []time.Duration, wall time.Duration) Lat {
	if len(ds) == 0 {
		return Lat{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	pct := func(p float64) time.Duration {
		i := int(math.Ceil(p/100*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	l := Lat{N: len(s), Mean: sum / time.Duration(len(s)), P50: pct(50), P90: pct(90), P99: pct(99),
		Max: s[len(s)-1], Min: s[0]}
	if wall > 0 {
		l.Rate = float64(len(s)) / wall.Seconds()
	}
	return l
}

// PhaseSummary is one phase's figures.
type PhaseSummary struct {
	Name    string
	N       int
	Wall    time.Duration
	Rate    float64 // requests per second
	All     Lat
	Classes map[string]Lat // first, duplicate, error
}

func summarizePhase(p PhaseResult) PhaseSummary {
	by := map[string][]time.Duration{}
	var all []time.Duration
	for i := range p.Results {
		r := &p.Results[i]
		by[r.Class()] = append(by[r.Class()], r.Latency)
		all = append(all, r.Latency)
	}
	s := PhaseSummary{Name: p.Name, N: len(p.Results), Wall: p.Wall, All: latStats(all, p.Wall), Classes: map[string]Lat{}}
	if p.Wall > 0 {
		s.Rate = float64(s.N) / p.Wall.Seconds()
	}
	for c, ds := range by {
		s.Classes[c] = latStats(ds, p.Wall)
	}
	return s
}

// median of xs (NaN for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
