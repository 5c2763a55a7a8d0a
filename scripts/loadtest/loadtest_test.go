package main

import (
	"bytes"
	"context"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/dev/proc"

	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// TestLoadAgainstSpawnedInstances runs a small load (200 deliveries, 11.7 %
// duplicates) against two spawned instances with Redis, plus the pure
// duplicate phases and the baselines, and checks at most once end to end.
// Without MariaDB or Redis it skips, and fails under CI=true.
func TestLoadAgainstSpawnedInstances(t *testing.T) {
	dsn := testenv.FreshMySQLDSN(t)
	redisURL := testenv.RedisURL(t)
	dir := t.TempDir()
	o := DefaultOptions()
	o.Spawn, o.N, o.C, o.DupN, o.BaseN, o.Slices = 2, 200, 8, 60, 60, 2
	o.MySQLDSN, o.RedisURL = dsn, redisURL
	o.MaxDuration = 90 * time.Second
	o.Seed = 7
	o.WorkDir = filepath.Join(dir, "work")
	o.CSV, o.PNG, o.JSON = filepath.Join(dir, "r.csv"), filepath.Join(dir, "h.png"), filepath.Join(dir, "s.json")
	if err := os.Mkdir(o.WorkDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A plain build (as the e2e tests do) shares their build cache; the
	// program's own -spawn build adds -trimpath and CGO_ENABLED=0.
	bin, err := proc.Build(context.Background(), dir, false)
	if err != nil {
		t.Fatal(err)
	}
	o.Bin = bin
	var out bytes.Buffer
	sum, err := Run(context.Background(), o, &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
	if !sum.OK() {
		t.Fatalf("problems: %v", sum.Problems)
	}
	if len(sum.Runs) != 1 {
		t.Fatalf("runs = %d", len(sum.Runs))
	}
	r := sum.Runs[0]
	v := r.Verify
	if v.Deliveries != 200 || v.Non200 != 0 || v.Extra != 0 || v.EffectiveRate() != 0 {
		t.Errorf("verification: %+v", v)
	}
	if v.Injected != 23 || v.Saved != v.Injected || v.Executions != v.Actions || v.Actions != 177 {
		t.Errorf("want 177 actions executed once and 23 duplicates saved: %+v", v)
	}
	if !v.DBChecked || v.DBRecords != 177 || v.DBAttemptsOver1 != 0 || !v.ObjChecked || v.Outputs != 177 {
		t.Errorf("MySQL / objects: %+v", v)
	}
	for _, ph := range r.Phases {
		if ph.Classes["error"].N != 0 {
			// Function phases fail the run (sum.OK above); a baseline may
			// lose a few operations on a loaded machine.
			t.Logf("%s: %d errors (baseline)", ph.Name, ph.Classes["error"].N)
		}
		want := map[string]int{PhaseMain: 200, PhaseDupRedis: 60, PhaseDupMySQL: 60, PhaseBare: 60, PhaseBareInProc: 60,
			PhaseRawEvalsha: 600, PhaseLibDup: 600, PhaseRawInsert: 60, PhaseRawAllOps: 60, PhaseLibClaim: 60}[ph.Name]
		if ph.N != want {
			t.Errorf("%s: %d requests, want %d", ph.Name, ph.N, want)
		}
	}
	if len(r.Phases) != 10 {
		t.Errorf("phases: %d, want 10", len(r.Phases))
	}
	// The bare handler ran in processes of its own, measured like the
	// function's (in 10 ms ticks: a phase this short may read 0).
	if _, ok := r.CPU[PhaseBare]; !ok {
		t.Errorf("no CPU figure for the bare-handler processes: %v", r.CPU)
	}
	// The function's own counters agree with the answers.
	sc := sum.Stats
	if sc == nil {
		t.Fatal("no stats check")
	}
	if sc.Function["first"] != sc.Client["first"] || sc.Function["first"] == 0 {
		t.Errorf("first: function counted %d, answers %d", sc.Function["first"], sc.Client["first"])
	}
	dups := sc.Client["repeat_other"] + sc.Client["repeat_done"]
	if got := sc.Function["fast_reject"] + sc.Function["store_conflict"]; got != dups {
		t.Errorf("duplicates: function counted %d, answers %d", got, dups)
	}
	// Pure duplicates to the MySQL-only instances cannot have been answered by Redis.
	if sc.Function["store_conflict"] < sc.Client["pure_duplicates_to_"+PhaseDupMySQL] {
		t.Errorf("store_conflict %d < pure duplicates sent to MySQL-only instances %d",
			sc.Function["store_conflict"], sc.Client["pure_duplicates_to_"+PhaseDupMySQL])
	}
	csv, err := os.ReadFile(o.CSV)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(csv), "\n"); lines != 1+200+7*60+2*600 {
		t.Errorf("csv: %d lines, want %d", lines, 1+200+7*60+2*600)
	}
	f, err := os.Open(o.PNG)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if img, err := png.Decode(f); err != nil || img.Bounds().Dx() < 500 {
		t.Errorf("png: %v", err)
	}
	if _, err := os.Stat(o.JSON); err != nil {
		t.Error(err)
	}
}

func TestPlanCounts(t *testing.T) {
	for _, c := range []struct {
		n, c int
		rate float64
		mix  Mix
	}{
		{1000, 16, 11.7, Mix{40, 30, 30}},
		{200, 8, 11.7, Mix{40, 30, 30}},
		{50, 1, 50, Mix{0, 0, 1}}, // c=1: no room for bursts, they become redeliveries
		{10, 4, 0, Mix{1, 1, 1}},
	} {
		p := NewPlan(rand.New(rand.NewPCG(1, 2)), "t", c.n, c.c, c.rate, c.mix, 4)
		dups := int(float64(c.n)*c.rate/100 + 0.5)
		if p.Deliveries() != c.n || p.Duplicates() != dups || len(p.Actions) != c.n-dups {
			t.Errorf("%+v: %d deliveries, %d duplicates, %d actions", c, p.Deliveries(), p.Duplicates(), len(p.Actions))
		}
		seen := map[int]bool{}
		for _, u := range p.Units {
			if len(u.Members) > min(4, c.c) {
				t.Errorf("%+v: burst of %d", c, len(u.Members))
			}
			for _, d := range u.Members {
				if d.Kind == KindFirst {
					seen[d.Action] = true
				} else if !seen[d.Action] && d.Kind != KindBurst {
					t.Errorf("%+v: %s of action %d before its first delivery", c, d.Kind, d.Action)
				}
			}
		}
		if c.c == 1 && p.Counts[KindBurst] != 0 {
			t.Errorf("c=1 planned %d burst copies", p.Counts[KindBurst])
		}
	}
}

func TestLatStats(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	l := latStats(ds, time.Second)
	if l.N != 100 || l.P50 != 50*time.Millisecond || l.P90 != 90*time.Millisecond || l.P99 != 99*time.Millisecond ||
		l.Max != 100*time.Millisecond || l.Min != time.Millisecond || l.Rate != 100 {
		t.Errorf("%+v", l)
	}
}

func TestParseMix(t *testing.T) {
	if m, err := ParseMix("redeliver=1, burst=3"); err != nil || m != (Mix{1, 0, 3}) {
		t.Errorf("%+v %v", m, err)
	}
	for _, bad := range []string{"", "redeliver=0", "x=1", "burst=-1", "double"} {
		if _, err := ParseMix(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
