package e2e_test

// The alerts of template.yml, run on log lines the real binary wrote: each
// scenario produces one alert's condition (duplicates, final failures,
// exhausted attempts, takeovers, Redis down, old work for the sweeper), the
// lines are parsed as SLS would index them, and the alert's own query
// (deploy/logq, the source of template.yml's SQL) is evaluated on them in Go.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/deploy/logq"
	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/internal/dev/proc"
)

// tail hands out the lines an instance printed since the last call.
type tail struct {
	t    *testing.T
	in   *instance
	seen int
}

// through waits until the invocations of reqID have ended times in the
// output (it arrives through a pipe, behind the answers), then returns
// next().
func (l *tail) through(reqID string, times int) []logq.Line {
	l.t.Helper()
	marker := "FC Invoke End RequestId: " + reqID + `"`
	for end := time.Now().Add(10 * time.Second); strings.Count(l.in.Output(), marker) < times; {
		if time.Now().After(end) {
			l.t.Fatalf("invocation %s never ended in the output", reqID)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return l.next()
}

// waitOutput waits until the instance's output holds want: the output
// arrives through a pipe, behind the answers.
func (in *instance) waitOutput(t *testing.T, want string) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !strings.Contains(in.Output(), want); {
		if time.Now().After(end) {
			t.Fatalf("output lacks %q", want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (l *tail) next() []logq.Line {
	l.t.Helper()
	var out []logq.Line
	all := strings.Split(l.in.Output(), "\n")
	for _, s := range all[l.seen:] {
		var line logq.Line
		if json.Unmarshal([]byte(s), &line) == nil {
			out = append(out, line)
		}
	}
	l.seen = len(all) - 1 // the last element is the unterminated rest
	return out
}

// alertByName is the alert of that name; the test fails if there is none.
func alertByName(t *testing.T, name string) logq.Alert {
	t.Helper()
	for _, a := range logq.Alerts() {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("no alert %q", name)
	return logq.Alert{}
}

func eval(t *testing.T, a logq.Alert, lines []logq.Line) []logq.Row {
	t.Helper()
	rows, err := a.Query.Eval(lines)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// mustFire fails the test unless the alert fires on lines.
func mustFire(t *testing.T, name string, lines []logq.Line) []logq.Row {
	t.Helper()
	a := alertByName(t, name)
	rows := eval(t, a, lines)
	if !a.Fires(rows) {
		t.Fatalf("alert %s (%s) does not fire on its scenario: rows %+v over %d lines", name, a.Condition(), rows, len(lines))
	}
	return rows
}

// quietMinute waits until at least 15 s remain in the current minute, so that
// a short burst that a per-minute alert counts falls into one minute.
func quietMinute() {
	if s := time.Now().Second(); s >= 45 {
		time.Sleep(time.Duration(61-s) * time.Second)
	}
}

func sweepEvent(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "testdata", "events", "timer-sweep.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAlertsOnRealLogLines(t *testing.T) {
	d := newDrill(t, "MAX_ATTEMPTS=3", "LEASE_SECONDS=2")
	healthy := start(t, d.env...)
	log := &tail{t: t, in: healthy}
	run := "alerts " + nonce()
	var last string          // the request id of the latest delivery
	ends := map[string]int{} // deliveries per request id
	deliver := func(in *instance, content, reqID string, retry int) map[string]any {
		t.Helper()
		last = reqID
		ends[reqID]++
		a, err := in.tryInvoke(taskEvent("ev-"+nonce(), content, nil), reqID, retry)
		return mustJSON(t, a, err)
	}
	var all []logq.Line

	// Baseline: new tasks and a sweep with nothing to do fire nothing.
	for i := range 4 {
		deliver(healthy, fmt.Sprintf("%s base %d", run, i), "fc-"+nonce(), 0)
	}
	last = "fc-sweep-" + nonce()
	if a := healthy.invoke(t, sweepEvent(t), last, nil); a.status != 200 {
		t.Fatalf("sweep: %d %s", a.status, a.body)
	}
	baseline := log.through(last, 1)
	for _, a := range logq.Alerts() {
		if rows := eval(t, a, baseline); a.Fires(rows) {
			t.Errorf("alert %s fires on a healthy baseline: %+v", a.Name, rows)
		}
	}
	all = append(all, baseline...)

	// Duplicates: 7 more keys, each delivered three times (other FC requests).
	for i := range 7 {
		for range 3 {
			deliver(healthy, fmt.Sprintf("%s dup %d", run, i), "fc-"+nonce(), 0)
		}
	}
	dups := append(slices.Clip(baseline), log.through(last, ends[last])...)
	rows := mustFire(t, "duplicate-rate", dups)
	if want := 14.0 / 25; math.Abs(rows[0].Value-want) > 1e-9 || rows[0].Lines != 25 {
		t.Fatalf("duplicate rate %+v, want %v over 25 deliveries", rows[0], want)
	}
	sameRateInStats(t, healthy, d.env, rows[0].Value)
	all = append(all, dups[len(baseline):]...)

	// Takeovers: 10 tasks fail retryably, then FC's retries take them over.
	quietMinute()
	d.llm.Set(func(int64) (time.Duration, int) { return 0, 503 })
	reqs := map[string]string{}
	for i := range 10 {
		content, req := fmt.Sprintf("%s takeover %d", run, i), "fc-"+nonce()
		reqs[content] = req
		if m := deliver(healthy, content, req, 0); m["status"] != "FAILED_RETRYABLE" {
			t.Fatalf("takeover setup %d: %v", i, m)
		}
	}
	d.llm.Set(func(int64) (time.Duration, int) { return 0, 200 })
	for content, req := range reqs {
		if m := deliver(healthy, content, req, 1); m["decision"] != "TAKEOVER" {
			t.Fatalf("retry: %v", m)
		}
	}
	takeovers := log.through(last, ends[last])
	mustFire(t, "takeovers", takeovers)
	all = append(all, takeovers...)

	// Final failures: the model refuses 5 tasks (400); FC's retries of them are
	// answered from the record and must not count again.
	quietMinute()
	d.llm.Set(func(int64) (time.Duration, int) { return 0, 400 })
	for i := range 5 {
		content, req := fmt.Sprintf("%s final %d", run, i), "fc-"+nonce()
		if m := deliver(healthy, content, req, 0); m["status"] != "FAILED_FINAL" {
			t.Fatalf("final %d: %v", i, m)
		}
		deliver(healthy, content, req, 1)
	}
	d.llm.Set(func(int64) (time.Duration, int) { return 0, 200 })
	finals := log.through(last, ends[last])
	if rows := mustFire(t, "failed-final", finals); rows[0].Value != 5 {
		t.Fatalf("FAILED_FINAL per minute %+v, want 5 (retries not counted)", rows)
	}
	all = append(all, finals...)

	all = append(all, exhaustAttempts(t, d, run)...)
	all = append(all, sweepOldWork(t, d, healthy, log, run)...)
	all = append(all, redisDown(t, d, run)...)
	everyKeyIndexed(t, all)
}

// sameRateInStats: `main stats --json` computes the rate the logs show,
// from the counters the instance flushes at /pre-stop.
func sameRateInStats(t *testing.T, in *instance, env []string, rate float64) {
	t.Helper()
	in.preStop(t)
	out, code := cli(t, env, "stats", "--since", "1h", "--json")
	if code != 0 {
		t.Fatalf("stats: %d %s", code, out)
	}
	var mins []handler.MinuteStats
	if err := json.Unmarshal([]byte(out), &mins); err != nil {
		t.Fatalf("stats --json: %v\n%s", err, out)
	}
	var claims, dups int64
	for _, m := range mins {
		claims, dups = claims+m.Claims, dups+m.Duplicates
	}
	if claims == 0 || math.Abs(float64(dups)/float64(claims)-rate) > 1e-9 {
		t.Fatalf("main stats: %d duplicates of %d claims; the logs' rate is %v", dups, claims, rate)
	}
}

// exhaustAttempts: with one attempt, a worker killed mid-task leaves nothing
// to retry; FC's retry of the same request is answered attempts_exhausted.
func exhaustAttempts(t *testing.T, d *drill, run string) []logq.Line {
	t.Helper()
	body, req := taskEvent("ev-"+nonce(), run+" exhausted", nil), "fc-"+nonce()
	doomed := start(t, append(d.env, "MAX_ATTEMPTS=1", "IDEMGATE_FAULT=before_steps")...)
	if _, err := doomed.tryInvoke(body, req, 0); err == nil {
		t.Fatal("the doomed instance answered instead of dying")
	}
	doomed.Wait()
	next := start(t, append(d.env, "MAX_ATTEMPTS=1")...)
	a, err := next.tryInvoke(body, req, 1)
	if m := mustJSON(t, a, err); m["errorType"] != logq.ErrorExhausted {
		t.Fatalf("retry after the budget: %v", m)
	}
	lines := (&tail{t: t, in: next}).through(req, 1)
	mustFire(t, "attempts-exhausted", lines)
	return append((&tail{t: t, in: doomed}).next(), lines...)
}

// sweepOldWork: a task whose worker died 20 minutes after its first claim
// (created_at moved back in MySQL) is found by the sweep timer.
func sweepOldWork(t *testing.T, d *drill, healthy *instance, log *tail, run string) []logq.Line {
	t.Helper()
	content := run + " abandoned"
	doomed := start(t, append(d.env, "LEASE_SECONDS=1", "IDEMGATE_FAULT=before_steps")...)
	if _, err := doomed.tryInvoke(taskEvent("ev-"+nonce(), content, nil), "fc-"+nonce(), 0); err == nil {
		t.Fatal("the doomed instance answered instead of dying")
	}
	doomed.Wait()
	backdate(t, d, keyOf(t, content), 20*time.Minute)
	time.Sleep(1100 * time.Millisecond) // its one-second lease runs out
	log.next()
	req := "fc-sweep-" + nonce()
	if a := healthy.invoke(t, sweepEvent(t), req, nil); a.status != 200 || !strings.Contains(string(a.body), `"redriven":1`) {
		t.Fatalf("sweep: %d %s", a.status, a.body)
	}
	lines := log.through(req, 1)
	if rows := mustFire(t, "sweep-old-work", lines); rows[0].Value < 1200 {
		t.Fatalf("oldest candidate %v s old, want at least 1200", rows[0].Value)
	}
	return append((&tail{t: t, in: doomed}).next(), lines...)
}

// backdate moves the first claim of key back by age.
func backdate(t *testing.T, d *drill, key string, age time.Duration) {
	t.Helper()
	var dsn string
	for _, e := range d.env {
		if v, ok := strings.CutPrefix(e, "MYSQL_DSN="); ok {
			dsn = v
		}
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.ExecContext(context.Background(),
		"UPDATE idempotency_record SET created_at = created_at - INTERVAL ? SECOND WHERE request_id = ?", int(age.Seconds()), key)
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("backdate %s: %v (%d rows)", key, err, n)
	}
}

// redisDown: REDIS_URL names a loopback port nobody listens on; deliveries
// a little over the one-second back-off apart each find it unavailable.
func redisDown(t *testing.T, d *drill, run string) []logq.Line {
	t.Helper()
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	in := start(t, append(d.env, fmt.Sprintf("REDIS_URL=redis://127.0.0.1:%d/0", port))...)
	var req string
	for i := range 3 {
		if i > 0 {
			time.Sleep(1100 * time.Millisecond)
		}
		req = "fc-" + nonce()
		a, err := in.tryInvoke(taskEvent("ev-"+nonce(), fmt.Sprintf("%s redis down %d", run, i), nil), req, 0)
		if m := mustJSON(t, a, err); m["status"] != "SUCCEEDED" {
			t.Fatalf("without Redis: %v", m)
		}
	}
	lines := (&tail{t: t, in: in}).through(req, 1)
	mustFire(t, "fast-layer-unavailable", lines)
	return lines
}

// everyKeyIndexed: each key the lines carry is indexed or deliberately left
// to the full-text index (logq.Unindexed).
func everyKeyIndexed(t *testing.T, lines []logq.Line) {
	t.Helper()
	var indexed []string
	for _, f := range logq.Fields {
		indexed = append(indexed, f.Name)
	}
	seen := map[string]bool{}
	for _, l := range lines {
		for k := range l {
			if _, why := logq.Unindexed[k]; !why && !slices.Contains(indexed, k) && !seen[k] {
				seen[k] = true
				t.Errorf("log key %q is neither indexed (deploy/logq Fields) nor in logq.Unindexed", k)
			}
		}
	}
	for _, f := range []string{"decision", "status", "errorType", "idempotency_key", "fingerprint", "duration_ms",
		"request_id", "fc_request_id", "oldest_age_s"} {
		found := false
		for _, l := range lines {
			_, ok := l[f]
			found = found || ok
		}
		if !found {
			t.Errorf("no line carries %q", f)
		}
	}
}
