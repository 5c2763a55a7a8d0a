package e2e_test

// The failure drills, against real MariaDB and Redis and the real binary:
// each fails if its invariant breaks.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/mysqlstore"
	"github.com/idemgate/idemgate/internal/dev/modelfake"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

type drill struct {
	t     *testing.T
	llm   *modelfake.Fake
	env   []string
	store *mysqlstore.Store
	state string // STATE_DIR: result objects live under it
}

// newDrill prepares MySQL (a database of its own, migrated through the
// binary), Redis and a model fake; extra env entries come last and win.
func newDrill(t *testing.T, extra ...string) *drill {
	dsn, redisURL := testenv.FreshMySQLDSN(t), testenv.RedisURL(t)
	d := &drill{t: t, llm: newLLMFake(t, 0), state: t.TempDir()}
	d.env = append(append(d.llm.Env(), "MYSQL_DSN="+dsn, "REDIS_URL="+redisURL, "REDIS_KEY_PREFIX="+testenv.RedisPrefix(t),
		"STATE_DIR="+d.state), extra...)
	migrate(t, d.env)
	s, err := mysqlstore.Open(dsn, mysqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	d.store = s
	return d
}

// cli runs a subcommand of the binary with the drill's environment.
func (d *drill) cli(args ...string) (string, int) {
	d.t.Helper()
	return cli(d.t, d.env, args...)
}

func (d *drill) record(key string) driver.Record {
	rec, err := d.store.Get(context.Background(), key)
	if err != nil {
		d.t.Fatalf("record %s: %v", key, err)
	}
	return rec
}

func (d *drill) approved(key string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(d.state, "results", "tasks", key, "approved", "result.md"))
	return string(b), err == nil
}

// tryInvoke is invoke for deliveries whose instance may die under them.
func (i *instance) tryInvoke(body []byte, requestID string, retry int) (answer, error) {
	req, _ := http.NewRequest(http.MethodPost, i.Base+"/invoke", bytes.NewReader(body))
	req.Header.Set("x-fc-request-id", requestID)
	req.Header.Set("x-fc-function-timeout", "60")
	if retry >= 0 {
		req.Header.Set("x-fc-retry-count", fmt.Sprint(retry))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func mustJSON(t *testing.T, a answer, err error) map[string]any {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return a.json(t)
}

// Drill 1: the same event delivered twice.
func TestDrillSameEventTwice(t *testing.T) {
	d := newDrill(t)
	inst := start(t, d.env...)
	body := taskEvent("ev-"+nonce(), "drill one "+nonce(), nil)
	first := inst.invoke(t, body, "fc-"+nonce(), nil).json(t)
	second := inst.invoke(t, body, "fc-"+nonce(), nil).json(t)
	if first["decision"] != "FIRST" || second["duplicate"] != true || second["result_ref"] != first["result_ref"] {
		t.Fatalf("first %v second %v", first, second)
	}
	if d.llm.Total() != 1 {
		t.Fatalf("model calls %d", d.llm.Total())
	}
}

// Drill 3: the model call times out although the model finished; the retry
// calls it again under the same Idempotency-Key, within the attempt budget.
func TestDrillModelTimeout(t *testing.T) {
	d := newDrill(t, "LLM_TIMEOUT_SECONDS=1")
	d.llm.Set(func(n int64) (time.Duration, int) {
		if n == 1 {
			return 2500 * time.Millisecond, 200 // answers, but after the client gave up
		}
		return 0, 200
	})
	inst := start(t, d.env...)
	body := taskEvent("ev-"+nonce(), "drill three "+nonce(), nil)
	reqID := "fc-" + nonce()
	a, err := inst.tryInvoke(body, reqID, 0)
	m := mustJSON(t, a, err)
	if a.status != 404 || m["errorType"] != "timeout" || m["retryable"] != true {
		t.Fatalf("first try %d %v", a.status, m)
	}
	a, err = inst.tryInvoke(body, reqID, 1) // FC's retry
	m = mustJSON(t, a, err)
	if a.status != 200 || m["status"] != "SUCCEEDED" || m["attempt"] != 2.0 {
		t.Fatalf("retry %d %v", a.status, m)
	}
	key := m["idempotency_key"].(string)
	rec := d.record(key)
	if calls := d.llm.Calls(key); calls != 2 || int(d.llm.Total()) > rec.Attempt {
		t.Fatalf("model calls %d (key %d) vs attempts %d", d.llm.Total(), calls, rec.Attempt)
	}
	if !strings.HasSuffix(rec.ResultRef, "attempt-002/output.json") {
		t.Fatalf("result_ref %s", rec.ResultRef)
	}
	if text, ok := d.approved(key); !ok || !strings.Contains(text, "summary 2") {
		t.Fatalf("approved %q", text)
	}
}

// Drill 4: the process dies after saving the result and before updating the
// state. FC retries the same request on another instance: no second model
// call, one approved object.
func TestDrillCrashAfterOutput(t *testing.T) {
	d := newDrill(t)
	doomed := start(t, append(d.env, "IDEMGATE_FAULT=after_output")...)
	healthy := start(t, d.env...)
	body := taskEvent("ev-"+nonce(), "drill four "+nonce(), nil)
	reqID := "fc-" + nonce()
	if _, err := doomed.tryInvoke(body, reqID, 0); err == nil {
		t.Fatal("the doomed instance answered; the fault point did not fire")
	}
	doomed.Wait()
	a, err := healthy.tryInvoke(body, reqID, 1)
	m := mustJSON(t, a, err)
	if a.status != 200 || m["status"] != "SUCCEEDED" || m["decision"] != "REPEAT_SAME" {
		t.Fatalf("retry %d %v", a.status, m)
	}
	if d.llm.Total() != 1 {
		t.Fatalf("model calls %d, want 1: the saved output must be reused", d.llm.Total())
	}
	if _, ok := d.approved(m["idempotency_key"].(string)); !ok {
		t.Fatal("no approved object")
	}
}

// Drill 5: retries exhausted, then the dead letter, then a manual replay.
func TestDrillExhaustedDeadLetterReplay(t *testing.T) {
	d := newDrill(t, "MAX_ATTEMPTS=3")
	d.llm.Set(func(int64) (time.Duration, int) { return 0, 503 })
	inst := start(t, d.env...)
	body := taskEvent("ev-"+nonce(), "drill five "+nonce(), nil)
	reqID := "fc-" + nonce()
	var key string
	for retry := 0; retry < 3; retry++ {
		a, err := inst.tryInvoke(body, reqID, retry)
		m := mustJSON(t, a, err)
		want := "temporary_unavailable"
		if retry == 2 { // the budget's last attempt: recorded attempts_exhausted, its cause in the message
			want = driver.ExhaustedCode
		}
		if a.status != 404 || m["errorType"] != want {
			t.Fatalf("try %d: %d %v", retry, a.status, m)
		}
		key = m["idempotency_key"].(string)
	}
	if rec := d.record(key); rec.Status != driver.StatusFailedFinal || rec.Attempt != 3 {
		t.Fatalf("after the budget: %s attempt %d", rec.Status, rec.Attempt)
	}
	a, err := inst.tryInvoke(body, reqID, 3) // FC's last retry: answered at once
	if m := mustJSON(t, a, err); a.status != 404 || m["errorType"] != driver.ExhaustedCode || d.llm.Total() != 3 {
		t.Fatalf("after FAILED_FINAL: %d %v, model calls %d", a.status, m, d.llm.Total())
	}
	// FC's failure destination receives the original event as a string.
	dlq, _ := json.Marshal(map[string]any{"timestamp": time.Now().UnixMilli(),
		"requestContext": map[string]any{"requestId": reqID, "functionArn": "acs:fc:cn-hangzhou:1234567890123456:functions/idemgate",
			"condition": "UnhandledInvocationError", "approximateInvokeCount": 4},
		"requestPayload": string(body), "responseContext": map[string]any{"statusCode": 404, "functionError": "UnhandledInvocationError"},
		"responsePayload": ""})
	file := filepath.Join(t.TempDir(), "dead-letter.json")
	if err := os.WriteFile(file, dlq, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, code := d.cli("replay", "--dlq", file); code != 2 {
		t.Fatalf("replay without reason/operator exited %d, want 2", code)
	}
	d.llm.Set(func(int64) (time.Duration, int) { return 0, 200 }) // the provider recovered
	out, code := d.cli("replay", "--dlq", file, "--reason", "provider outage over", "--operator", "oncall@acme")
	if code != 0 || !strings.Contains(out, `"status": "SUCCEEDED"`) {
		t.Fatalf("replay: %d %s", code, out)
	}
	rec := d.record(key)
	if rec.Status != driver.StatusSucceeded || rec.Attempt != 4 || d.llm.Total() != 4 {
		t.Fatalf("after replay: %s attempt %d model calls %d", rec.Status, rec.Attempt, d.llm.Total())
	}
	// A second replay never yields a second effective result.
	out, code = d.cli("replay", "--key", key, "--reason", "double check", "--operator", "oncall@acme")
	if code != 0 || !strings.Contains(out, `"duplicate": true`) || d.llm.Total() != 4 {
		t.Fatalf("second replay: %d %s, model calls %d", code, out, d.llm.Total())
	}
	rps, err := d.store.Replays(context.Background(), key)
	if err != nil || len(rps) != 2 || rps[0].PriorStatus != driver.StatusFailedFinal || rps[0].Operator != "oncall@acme" ||
		rps[0].Source != "dlq" || rps[1].PriorStatus != driver.StatusSucceeded {
		t.Fatalf("audit rows %+v %v", rps, err)
	}
	if text, ok := d.approved(key); !ok || !strings.Contains(text, "summary 4") {
		t.Fatalf("approved %q", text)
	}
}

// kill -9 in the middle of the model call: FC's retry of the same request
// takes the claim over at once and finishes.
func TestDrillKill9MidTask(t *testing.T) {
	d := newDrill(t)
	d.llm.Set(func(n int64) (time.Duration, int) {
		if n == 1 {
			return 5 * time.Second, 200
		}
		return 0, 200
	})
	victim := start(t, d.env...)
	other := start(t, d.env...)
	body := taskEvent("ev-"+nonce(), "kill nine "+nonce(), nil)
	reqID := "fc-" + nonce()
	go func() { _, _ = victim.tryInvoke(body, reqID, 0) }()
	<-d.llm.Arrived // the victim is inside the model call
	victim.Kill()
	a, err := other.tryInvoke(body, reqID, 1)
	m := mustJSON(t, a, err)
	if a.status != 200 || m["status"] != "SUCCEEDED" || m["decision"] != "REPEAT_SAME" {
		t.Fatalf("retry %d %v", a.status, m)
	}
	key := m["idempotency_key"].(string)
	if rec := d.record(key); int(d.llm.Total()) > rec.Attempt {
		t.Fatalf("model calls %d > attempts %d", d.llm.Total(), rec.Attempt)
	}
}

// SIGSTOP past the lease, then SIGCONT: the paused worker finds its fence
// stale and publishes nothing; the approved object is the new owner's.
func TestDrillSigstopPastLease(t *testing.T) {
	d := newDrill(t, "LEASE_SECONDS=1")
	d.llm.Set(func(n int64) (time.Duration, int) {
		if n == 1 {
			return 2500 * time.Millisecond, 200
		}
		return 0, 200
	})
	paused := start(t, d.env...)
	other := start(t, d.env...)
	body := taskEvent("ev-"+nonce(), "sigstop "+nonce(), nil)
	done := make(chan answer, 1)
	go func() {
		a, err := paused.tryInvoke(body, "fc-"+nonce(), 0)
		if err != nil {
			a = answer{status: -1}
		}
		done <- a
	}()
	<-d.llm.Arrived
	paused.Signal(syscall.SIGSTOP)
	time.Sleep(1500 * time.Millisecond)               // past the 1 s lease
	a, err := other.tryInvoke(body, "fc-"+nonce(), 0) // a redelivery
	m := mustJSON(t, a, err)
	if m["status"] != "SUCCEEDED" || m["decision"] != "TAKEOVER" {
		t.Fatalf("takeover answer %v", m)
	}
	key := m["idempotency_key"].(string)
	paused.Signal(syscall.SIGCONT)
	stale := <-done
	if stale.status == 200 {
		t.Fatalf("the paused worker answered success: %s", stale.body)
	}
	rec := d.record(key)
	if rec.Status != driver.StatusSucceeded || !strings.HasSuffix(rec.ResultRef, "attempt-002/output.json") {
		t.Fatalf("record %s %s", rec.Status, rec.ResultRef)
	}
	if text, ok := d.approved(key); !ok || !strings.Contains(text, "summary 2") {
		t.Fatalf("approved %q is not the new owner's", text)
	}
}

// viaProxy is the test Redis URL (testenv.RedisURL: its scheme, password and
// database) with its host replaced by a proxy of it, which the test can cut.
func viaProxy(t *testing.T) (redisURL string, proxy *testenv.Proxy) {
	u, err := url.Parse(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy = testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	return u.String(), proxy
}

// Redis stopped mid-stream: the work goes on with MySQL alone, still once
// per key.
func TestDrillRedisStoppedMidStream(t *testing.T) {
	redisURL, proxy := viaProxy(t)
	d := newDrill(t, "REDIS_URL="+redisURL)
	inst := start(t, d.env...)
	run := "redis-down " + nonce()
	deliver := func(i int) map[string]any {
		a, err := inst.tryInvoke(taskEvent("ev-"+nonce(), fmt.Sprintf("%s %d", run, i%10), nil), "fc-"+nonce(), 0)
		m := mustJSON(t, a, err)
		if a.status != 200 {
			t.Fatalf("delivery %d: %d %v", i, a.status, m)
		}
		return m
	}
	for i := range 10 {
		deliver(i)
	}
	proxy.Cut()
	for i := range 20 { // 10 duplicates of the first half, 10 new keys
		m := deliver(i)
		if i < 10 && m["duplicate"] != true {
			t.Fatalf("duplicate %d executed again without Redis: %v", i, m)
		}
	}
	if d.llm.Total() != 10 {
		t.Fatalf("model calls %d, want 10 (one per key)", d.llm.Total())
	}
	inst.waitOutput(t, "fast layer unavailable") // the Redis outage is logged
}

// MySQL unreachable: nothing executes, the invocations fail retryably, and
// after recovery the redeliveries succeed once each.
func TestDrillMySQLUnreachable(t *testing.T) {
	proxy := testenv.NewProxy(t, "127.0.0.1:3306")
	d := newDrill(t)
	var dsn string
	for _, e := range d.env {
		if v, ok := strings.CutPrefix(e, "MYSQL_DSN="); ok {
			dsn = v
		}
	}
	viaProxy := strings.Replace(dsn, "127.0.0.1:3306", proxy.Addr(), 1)
	if viaProxy == dsn {
		t.Fatalf("DSN %q does not name 127.0.0.1:3306", dsn)
	}
	inst := start(t, append(d.env, "MYSQL_DSN="+viaProxy+"?timeout=1s&readTimeout=2s&writeTimeout=2s")...)
	proxy.Cut()
	bodies := make([][]byte, 5)
	for i := range bodies {
		bodies[i] = taskEvent("ev-"+nonce(), "mysql down "+nonce(), nil)
		a, err := inst.tryInvoke(bodies[i], "fc-"+nonce(), 0)
		m := mustJSON(t, a, err)
		if a.status != 404 || m["errorType"] != "store_unavailable" || m["retryable"] != true {
			t.Fatalf("while MySQL is down: %d %v", a.status, m)
		}
	}
	if d.llm.Total() != 0 {
		t.Fatalf("the model was called %d times without the durable store", d.llm.Total())
	}
	proxy.Restore()
	for i, b := range bodies {
		a, err := inst.tryInvoke(b, "fc-"+nonce(), 1)
		if m := mustJSON(t, a, err); a.status != 200 || m["status"] != "SUCCEEDED" {
			t.Fatalf("after recovery %d: %d %v", i, a.status, m)
		}
	}
	if d.llm.Total() != 5 {
		t.Fatalf("model calls %d, want 5", d.llm.Total())
	}
}

// A worker killed with no FC retry behind it: the sweeper re-drives the
// task from its stored input once its lease expired.
func TestDrillSweeperRedrivesAbandonedTask(t *testing.T) {
	d := newDrill(t, "LEASE_SECONDS=1")
	d.llm.Set(func(n int64) (time.Duration, int) {
		if n == 1 {
			return 3 * time.Second, 200
		}
		return 0, 200
	})
	victim := start(t, d.env...)
	body := taskEvent("ev-"+nonce(), "abandoned "+nonce(), nil)
	go func() { _, _ = victim.tryInvoke(body, "fc-"+nonce(), 0) }()
	<-d.llm.Arrived
	victim.Kill()
	time.Sleep(1200 * time.Millisecond) // the lease runs out
	out, code := d.cli("sweep", "--grace", "0s")
	if code != 0 {
		t.Fatalf("sweep: %s", out)
	}
	var rep struct {
		Redriven int
		Results  []map[string]any
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	var key string
	for _, r := range rep.Results {
		if r["status"] == "SUCCEEDED" && r["decision"] == "TAKEOVER" {
			key = r["idempotency_key"].(string)
		}
	}
	if key == "" {
		t.Fatalf("the abandoned task was not re-driven: %s", out)
	}
	if rec := d.record(key); rec.Status != driver.StatusSucceeded || int(d.llm.Calls(key)) > rec.Attempt {
		t.Fatalf("record %s attempt %d, model calls %d", rec.Status, rec.Attempt, d.llm.Calls(key))
	}
	if _, ok := d.approved(key); !ok {
		t.Fatal("no approved object after the sweep")
	}
}
