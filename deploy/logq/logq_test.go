package logq

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/queries.golden")

// The SQL of every query, as template.yml and the README carry it.
func TestQueriesGolden(t *testing.T) {
	var b strings.Builder
	b.WriteString("# duplicate rate per minute (README)\n" + DuplicateRate.SQL() + "\n")
	for _, a := range Alerts() {
		b.WriteString("\n# " + a.Name + " (" + a.Start() + " .. now): " + a.Condition() + "\n" + a.Query.SQL() + "\n")
	}
	path := filepath.Join("testdata", "queries.golden")
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Fatalf("queries changed (go test ./deploy/logq -update, then review):\n%s", b.String())
	}
}

func lines(t *testing.T, js ...string) []Line {
	t.Helper()
	var out []Line
	for _, j := range js {
		var l Line
		if err := json.Unmarshal([]byte(j), &l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

func TestEval(t *testing.T) {
	at := func(min, sec int) string {
		return time.Date(2026, 11, 30, 7, min, sec, 0, time.UTC).Format(time.RFC3339Nano)
	}
	task := func(ts, decision, status string) string {
		return `{"time":"` + ts + `","msg":"task answered","decision":"` + decision + `","status":"` + status + `","attempt":1}`
	}
	log := lines(t,
		task(at(0, 1), "FIRST", "SUCCEEDED"),
		task(at(0, 2), "REPEAT_DONE", "SUCCEEDED"),
		task(at(0, 59), "TAKEOVER", "SUCCEEDED"),
		task(at(1, 0), "REPEAT_OTHER", "RUNNING"),
		`{"time":"`+at(1, 1)+`","msg":"task failed","decision":"REJECTED","status":"REJECTED","errorType":"malformed_event"}`,
		`{"time":"`+at(1, 2)+`","msg":"sweep done","scanned":2,"oldest_age_s":30}`,
		`{"time":"`+at(1, 3)+`","msg":"sweep done","scanned":0,"oldest_age_s":0}`,
		`{"time":"`+at(1, 4)+`","msg":"sweep done","scanned":1,"oldest_age_s":1000}`,
	)
	m0 := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		q    Query
		want []Row
	}{
		{"duplicate rate per minute, REJECTED is no delivery", DuplicateRate,
			[]Row{{Minute: m0, Value: 2.0 / 3, Lines: 3}, {Minute: m0.Add(time.Minute), Value: 1, Lines: 1}}},
		{"count over the window", Query{Where: Filter{{"msg", []string{"task answered"}}}}, []Row{{Value: 4, Lines: 4}}},
		{"count of nothing is one zero row", Query{Where: Filter{{"msg", []string{"no such line"}}}}, []Row{{}}},
		{"per minute of nothing is no row", Query{Where: Filter{{"msg", []string{"no such line"}}}, PerMinute: true}, []Row{}},
		{"numbers compare as text", Query{Where: Filter{{"attempt", []string{"1"}}}}, []Row{{Value: 4, Lines: 4}}},
		{"max of a numeric key", Query{Where: Filter{{"msg", []string{"sweep done"}}}, Agg: Max, Field: "oldest_age_s"},
			[]Row{{Value: 1000, Lines: 3}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.q.Eval(log)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
	if _, err := DuplicateRate.Eval(lines(t, `{"msg":"task answered","decision":"FIRST"}`)); err == nil {
		t.Error("a per-minute query accepted a line without a time")
	}
}

func TestFires(t *testing.T) {
	share := Alert{Op: ">", Threshold: 0.3, MinLines: 20}
	count := Alert{Op: ">=", Threshold: 5}
	cases := []struct {
		name string
		a    Alert
		rows []Row
		want bool
	}{
		{"share above, enough lines", share, []Row{{Value: 0.31, Lines: 20}}, true},
		{"share above, too few lines", share, []Row{{Value: 0.9, Lines: 19}}, false},
		{"share at the threshold", share, []Row{{Value: 0.3, Lines: 100}}, false},
		{"count at the threshold", count, []Row{{Value: 4, Lines: 4}, {Value: 5, Lines: 5}}, true},
		{"count below", count, []Row{{Value: 4, Lines: 4}}, false},
		{"no rows", count, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.a.Fires(c.rows); got != c.want {
				t.Fatalf("Fires = %v, want %v (condition %s)", got, c.want, c.a.Condition())
			}
		})
	}
}

func TestCheck(t *testing.T) {
	if err := Check(Alerts()); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		mutate func(a *Alert)
		want   string
	}{
		{"renamed key", func(a *Alert) { a.Query.Where = Filter{{"Decision", []string{"FIRST"}}} }, "does not cover"},
		{"max of text", func(a *Alert) { a.Query.Agg, a.Query.Field = Max, "decision" }, "maximum of text"},
		{"long title", func(a *Alert) { a.Title = strings.Repeat("x", 65) }, "title"},
		{"odd severity", func(a *Alert) { a.Severity = 5 }, "severity"},
		{"seconds window", func(a *Alert) { a.Window = 90 * time.Second }, "window"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			as := Alerts()
			c.mutate(&as[0])
			if err := Check(as); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Check: %v, want an error about %q", err, c.want)
			}
		})
	}
	if err := Check(append(Alerts(), Alerts()[0])); err == nil {
		t.Error("Check accepted two alerts of one name")
	}
}

// The dashboard's charts read only indexed keys, compute only on numbers,
// and draw only columns their queries name; each mistake is caught.
func TestCheckDashboard(t *testing.T) {
	if err := CheckDashboard(Dashboard()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(Dashboard()[0].SQL, DuplicateRate.SQL()) {
		t.Fatal("the duplicate-rate chart is not the alert's formula")
	}
	for _, c := range []struct {
		name string
		edit func(*Chart)
		want string
	}{
		{"an unindexed key", func(c *Chart) { c.SQL = strings.Replace(c.SQL, `"message.decision"`, `"message.command"`, 1) }, `reads "command"`},
		{"a percentile of text", func(c *Chart) { c.SQL = strings.ReplaceAll(c.SQL, `"message.duration_ms"`, `"message.status"`) }, `computes on "status"`},
		{"an axis the query does not name", func(c *Chart) { c.Y = append(c.Y, "p99") }, `draws "p99"`},
		{"no type", func(c *Chart) { c.Type = "" }, "type line or table"},
	} {
		t.Run(c.name, func(t *testing.T) {
			charts := Dashboard()
			c.edit(&charts[len(charts)-1])
			if err := CheckDashboard(charts); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}
