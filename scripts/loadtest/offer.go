package main

import (
	"fmt"
	"io"
	"time"
)

// Offer describes a paced main phase (-rate): what was offered, what was
// sent and answered, and what MySQL would have to carry at the offered rate.
type Offer struct {
	Rate     float64       `json:"offered_per_second"`
	Window   time.Duration `json:"window_ns"`
	Planned  int           `json:"planned"`
	Sent     int           `json:"sent"`
	Answered float64       `json:"answered_per_second"` // 200 answers per second of the phase's wall time
	LagP50   time.Duration `json:"dispatch_lag_p50_ns"`
	LagP99   time.Duration `json:"dispatch_lag_p99_ns"`
	// StatementsPerDelivery over the phase; AtOffered = that × Rate: the
	// statements per second the MySQL arbiter would need at the offered rate.
	StatementsPerDelivery float64 `json:"statements_per_delivery"`
	AtOffered             float64 `json:"statements_per_second_at_offered_rate"`
}

func newOffer(o Options, ph PhaseResult) *Offer {
	f := &Offer{Rate: o.Rate, Window: o.Window, Planned: o.N, Sent: len(ph.Results)}
	lags := make([]time.Duration, 0, len(ph.Results))
	ok := 0
	for i := range ph.Results {
		lags = append(lags, ph.Results[i].Lag)
		if ph.Results[i].Class() != "error" {
			ok++
		}
	}
	l := latStats(lags, 0)
	f.LagP50, f.LagP99 = l.P50, l.P99
	if ph.Wall > 0 {
		f.Answered = float64(ok) / ph.Wall.Seconds()
	}
	var stmts int64
	for _, s := range ph.Slices {
		stmts += s.SQL.Statements()
	}
	f.StatementsPerDelivery = finite(div(stmts, len(ph.Results)))
	f.AtOffered = f.StatementsPerDelivery * o.Rate
	return f
}

func (f *Offer) figures(fs *figureList) {
	fs.add("main: offered deliveries/s", "1/s", f.Rate, "")
	fs.add("main: sent of offered", "%", 100*float64(f.Sent)/float64(max(1, f.Planned)), "")
	fs.add("main: answered/s (sustained)", "1/s", f.Answered, "")
	fs.add("main: dispatch lag p99", "ms", ms(f.LagP99), "")
	fs.add("main: MySQL statements per delivery", "", f.StatementsPerDelivery, "")
	fs.add("main: MySQL statements/s needed at the offered rate", "1/s", f.AtOffered, "")
}

func (f *Offer) print(w io.Writer) {
	fmt.Fprintf(w, "offered %.0f deliveries/s for %s: %d of %d sent (backlog %d), %.0f answered/s; dispatch lag p50 %.1f ms, p99 %.1f ms\n",
		f.Rate, f.Window, f.Sent, f.Planned, f.Planned-f.Sent, f.Answered, ms(f.LagP50), ms(f.LagP99))
	fmt.Fprintf(w, "MySQL: %.2f statements per delivery (every client of the server, the whole phase): %.0f statements/s at the offered rate\n",
		f.StatementsPerDelivery, f.AtOffered)
}
