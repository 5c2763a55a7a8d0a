package e2e_test

// Issue 40, drill 1: the arbiter fails over. Two private MariaDB servers
// (GTID replication, the replica's link to its primary delayed as between
// two zones), the function's MYSQL_DSN on a proxy that plays the RDS
// endpoint; load at c = 32 with duplicates; the primary killed with SIGKILL
// mid-run, the replica promoted and the endpoint moved to it. FC's
// asynchronous delivery is simulated: a failed try is retried with the next
// x-fc-retry-count, and a delivery whose tries are spent goes to the
// dead-letter queue.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/mysqlstore"
	"github.com/idemgate/idemgate/internal/dev/modelfake"
	"github.com/idemgate/idemgate/internal/dev/proc"
	"github.com/idemgate/idemgate/internal/dev/testenv"
	"github.com/idemgate/idemgate/ossresult"
	"github.com/idemgate/idemgate/ossresult/ossfake"
)

// failoverDrill is one run's settings.
type failoverDrill struct {
	semiSync bool
	// fallback: the primary waits for the replica's acknowledgement only
	// this long, less than the link's round trip, so semi-synchronous
	// replication falls back to asynchronous (as under load)
	fallback time.Duration
	keys     int           // business keys; each delivered 1 to 3 times
	lag      time.Duration // the replica link's delay, one way
	killAt   float64       // the share of deliveries answered before the kill
}

// failoverFigures are what a run measured.
type failoverFigures struct {
	deliveries, acked, deadLettered int
	extraCalls, keysCalledTwice     int
	recordsLost                     int // keys answered done whose record the store no longer holds done
	replayed                        int // dead-lettered keys an operator's replay settled
	lostTx                          int // transactions the primary committed that the replica never applied
	gap                             time.Duration
	errors                          map[string]int // the errorType of every failed try
}

// The replication link's delay: a replica this far behind loses the last
// moment of commits when the primary dies (asynchronous replication), and a
// semi-synchronous commit waits two of them.
const replicaLag = 40 * time.Millisecond

func TestFailoverAsyncReplication(t *testing.T) {
	f := runFailover(t, failoverDrill{keys: 240, lag: replicaLag, killAt: 0.4})
	// Asynchronous replication may lose what the primary committed last:
	// the figures say what that cost; the invariants (runFailover) hold.
	if f.lostTx == 0 {
		t.Logf("no transaction was lost in this run (the kill fell between commits)")
	}
}

// Semi-synchronous replication that fell back to asynchronous (its timeout
// passed: rpl_semi_sync_master_timeout, here shorter than the link's round
// trip) costs what asynchronous replication costs: the invariants hold, the
// figures say what it cost.
func TestFailoverSemiSyncFallenBack(t *testing.T) {
	runFailover(t, failoverDrill{semiSync: true, fallback: 5 * time.Millisecond, keys: 240, lag: replicaLag, killAt: 0.4})
}

func TestFailoverSemiSyncReplication(t *testing.T) {
	f := runFailover(t, failoverDrill{semiSync: true, keys: 160, lag: replicaLag, killAt: 0.4})
	// The primary waits for the replica before it answers a commit, so
	// what a worker saw committed survives: no claim or completion is
	// lost, and no model call is made twice. (The dead primary's binary
	// log may hold transactions the replica lacks: ones no client was
	// told had committed.)
	if f.extraCalls != 0 {
		t.Fatalf("semi-synchronous replication: %d extra model calls; want none", f.extraCalls)
	}
}

// runFailover runs one drill, checks its invariants and reports its
// figures (t.Log, and a FAILOVER line .ci/run prints).
func runFailover(t *testing.T, d failoverDrill) failoverFigures {
	ctx := context.Background()
	primary, replica, link := startPair(t, d)
	endpoint := testenv.NewProxy(t, primary.Addr) // the RDS endpoint
	dbName := "idemgate_failover"
	if err := proc.EnsureDatabase(ctx, primary.DSN(dbName)); err != nil {
		t.Fatal(err)
	}
	oss := ossfake.New(ossfake.Config{Bucket: ossBucket, Region: ossRegion, AccessKeyID: "LTAI-failover",
		AccessKeySecret: "failover-secret-0123456789", RequireTag: ossresult.TagKind, RequireTagPrefix: "tasks/"})
	t.Cleanup(oss.Close)
	llm := newLLMFake(t, 20*time.Millisecond)
	dsn := "root@tcp(" + endpoint.Addr() + ")/" + dbName + "?timeout=2s&readTimeout=10s&writeTimeout=10s"
	env := append(llm.Env(), "MYSQL_DSN="+dsn, "STATE_DIR="+t.TempDir(), "LEASE_SECONDS=6",
		"OSS_ENDPOINT="+oss.Endpoint(), "OSS_BUCKET="+ossBucket, "OSS_REGION="+ossRegion,
		"ALIBABA_CLOUD_ACCESS_KEY_ID=LTAI-failover", "ALIBABA_CLOUD_ACCESS_KEY_SECRET=failover-secret-0123456789")
	// No Redis: the arbiter alone (a fast-layer entry would answer some
	// duplicates whose record the failover lost, hiding the cost).
	migrate(t, env)
	insts := []*instance{start(t, env...), start(t, env...)}

	plan := failoverPlan(d.keys)
	fc := &fcSim{insts: insts, retries: 4, backoff: 250 * time.Millisecond, answers: map[string][]answerOf{}, errors: map[string]int{}}
	var answered atomic.Int64
	killed := make(chan time.Duration, 1)
	go func() { // the failover, once killAt of the deliveries were answered
		for answered.Load() < int64(d.killAt*float64(len(plan))) {
			time.Sleep(5 * time.Millisecond)
		}
		killed <- failover(t, primary, replica, link, endpoint, d)
	}()
	fc.run(plan, 32, func() { answered.Add(1) })
	gap := <-killed
	if t.Failed() {
		t.FailNow()
	}

	// After the run: FC's retries are over; the leases the failover left
	// behind end and the sweeper takes up what no delivery finished.
	time.Sleep(6500 * time.Millisecond)
	for range 3 {
		if out, code := cli(t, env, "sweep", "--grace", "0s"); code != 0 {
			t.Fatalf("sweep: %s", out)
		}
	}
	store, err := mysqlstore.Open(replica.DSN(dbName), mysqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	fig := fc.check(t, store, oss, llm.Snapshot())
	fig.gap = gap
	fig.replayed = replayDeadLetters(t, env, store, oss, llm, fc.deadLetters)
	if sent, err := primary.BinlogGTIDs(ctx); err != nil {
		t.Fatal(err)
	} else if applied, err := replica.Variable(ctx, "SELECT @@gtid_slave_pos"); err != nil {
		t.Fatal(err)
	} else {
		seq, _ := strconv.Atoi(applied[strings.LastIndexByte(applied, '-')+1:])
		fig.lostTx = sent - seq
	}
	mode := map[bool]string{false: "async", true: "semisync"}[d.semiSync]
	if d.fallback > 0 {
		mode = "semisync-fallen-back"
	}
	t.Logf("FAILOVER mode=%s keys=%d deliveries=%d acked=%d dead_lettered=%d lost_tx=%d extra_model_calls=%d keys_called_twice=%d records_lost=%d replayed=%d gap_ms=%d errors=%v",
		mode, d.keys, fig.deliveries, fig.acked, fig.deadLettered, fig.lostTx, fig.extraCalls, fig.keysCalledTwice, fig.recordsLost,
		fig.replayed, gap.Milliseconds(), fig.errors)
	return fig
}

// startPair starts the primary and its replica, the replica's link through
// a proxy that delays it by d.lag and is cut when the primary dies.
func startPair(t *testing.T, d failoverDrill) (primary, replica *proc.MariaDB, link *testenv.Proxy) {
	ctx := context.Background()
	var mu sync.Mutex
	var errs []error
	servers := make([]*proc.MariaDB, 2)
	var wg sync.WaitGroup
	for i := range servers { // mariadb-install-db takes seconds: both at once
		wg.Go(func() {
			o := proc.ServerOptions{ServerID: i + 1, SemiSyncPrimary: d.semiSync && i == 0, SemiSyncReplica: d.semiSync && i == 1,
				SemiSyncTimeout: d.fallback}
			m, err := proc.StartMariaDBWith(ctx, t.TempDir(), proc.MariaDBOptions{ServerOptions: o})
			mu.Lock()
			defer mu.Unlock()
			servers[i] = m
			errs = append(errs, err)
		})
	}
	wg.Wait()
	for _, m := range servers {
		if m != nil {
			t.Cleanup(m.Kill)
		}
	}
	if err := errors.Join(errs...); errors.Is(err, proc.ErrNoMariaDB) && !testenv.Required() {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	link = testenv.NewProxy(t, servers[0].Addr)
	link.SetLatency(d.lag)
	if err := servers[1].Replicate(ctx, link.Addr()); err != nil {
		t.Fatal(err)
	}
	return servers[0], servers[1], link
}

// failover kills the primary (SIGKILL), cuts what was in flight to the
// replica and every client connection, promotes the replica and moves the
// endpoint to it. It returns the time the endpoint answered nothing.
func failover(t *testing.T, primary, replica *proc.MariaDB, link, endpoint *testenv.Proxy, d failoverDrill) time.Duration {
	ctx := context.Background()
	if d.semiSync { // the drill's premise: no commit went unacknowledged so far (or, fallen back, some did)
		for _, v := range []string{"Rpl_semi_sync_master_status", "Rpl_semi_sync_master_no_tx", "Rpl_semi_sync_master_yes_tx"} {
			val, err := primary.Variable(ctx, "SHOW STATUS LIKE '"+v+"'")
			if err != nil {
				t.Error(err)
				return 0
			}
			t.Logf("before the kill: %s = %s", v, val)
			switch {
			case d.fallback == 0 && (v == "Rpl_semi_sync_master_status" && val != "ON" || v == "Rpl_semi_sync_master_no_tx" && val != "0"):
				t.Errorf("semi-synchronous replication fell back to asynchronous before the kill (%s = %s)", v, val)
			case d.fallback > 0 && v == "Rpl_semi_sync_master_no_tx" && val == "0":
				t.Errorf("semi-synchronous replication did not fall back (%s = %s)", v, val)
			}
		}
	}
	start := time.Now()
	endpoint.Cut()
	primary.Kill()
	link.Cut()
	pos, err := replica.Promote(ctx)
	if err != nil {
		t.Error(err)
		return 0
	}
	endpoint.Retarget(replica.Addr)
	endpoint.Restore()
	gap := time.Since(start)
	t.Logf("primary killed (pid %d), replica promoted at GTID %s, endpoint moved after %s", primary.Pid(), pos, gap.Round(time.Millisecond))
	return gap
}

// fcDelivery is one asynchronous invocation: FC accepted it (acknowledged
// the producer) and delivers it until the function answers 200 or its
// retries are spent (then it is dead-lettered).
type fcDelivery struct {
	body  []byte
	reqID string
}

// failoverPlan is n tasks, each delivered once more as a redelivery of the
// same event or a double submit with a probability of 0.4 each, shuffled.
func failoverPlan(n int) []fcDelivery {
	run := nonce()
	rng := rand.New(rand.NewPCG(40, 1))
	var plan []fcDelivery
	for i := range n {
		content := fmt.Sprintf("failover task %d of %s", i, run)
		first := taskEvent(fmt.Sprintf("ev-%d-%s", i, run), content, nil)
		plan = append(plan, fcDelivery{first, "fc-" + nonce()})
		if rng.Float64() < 0.4 {
			plan = append(plan, fcDelivery{first, "fc-" + nonce()}) // EventBridge redelivers
		}
		if rng.Float64() < 0.4 {
			plan = append(plan, fcDelivery{taskEvent("ev-"+nonce(), content, nil), "fc-" + nonce()}) // a double submit
		}
	}
	rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	return plan
}

// deadLetter is a delivery FC gave up on, and its key ("" when no answer
// named it).
type deadLetter struct {
	fcDelivery
	key string
}

// answerOf is one try's answer.
type answerOf struct {
	status  int
	outcome map[string]any
}

// fcSim delivers like FC's asynchronous invocation.
type fcSim struct {
	insts   []*instance
	retries int
	backoff time.Duration

	mu           sync.Mutex
	answers      map[string][]answerOf // by idempotency key
	errors       map[string]int        // errorType of failed tries
	deadLettered map[string]int        // by idempotency key
	deadLetters  []deadLetter
	acked        int
	deliveries   int
}

func (fc *fcSim) run(plan []fcDelivery, c int, each func()) {
	fc.deadLettered = map[string]int{}
	work := make(chan fcDelivery)
	var wg sync.WaitGroup
	for w := range c {
		wg.Go(func() {
			for d := range work {
				fc.deliver(fc.insts[w%len(fc.insts)], d)
				each()
			}
		})
	}
	for _, d := range plan {
		work <- d
	}
	close(work)
	wg.Wait()
}

// deliver runs one delivery's tries.
func (fc *fcSim) deliver(in *instance, d fcDelivery) {
	key := ""
	for try := 0; ; try++ {
		a, err := in.tryInvoke(d.body, d.reqID, try)
		var m map[string]any
		if err == nil {
			_ = json.Unmarshal(a.body, &m)
		}
		if k, ok := m["idempotency_key"].(string); ok {
			key = k
		}
		fc.mu.Lock()
		if key != "" {
			fc.answers[key] = append(fc.answers[key], answerOf{a.status, m})
		}
		switch {
		case err != nil:
			fc.errors["connection: "+err.Error()]++
		case a.status != 200:
			fc.errors[fmt.Sprint(m["errorType"])]++
		}
		done := err == nil && a.status == 200
		if done {
			fc.acked++
		}
		if !done && try == fc.retries {
			fc.deadLettered[key]++
			fc.deadLetters = append(fc.deadLetters, deadLetter{d, key})
		}
		fc.mu.Unlock()
		if done || try == fc.retries {
			fc.mu.Lock()
			fc.deliveries++
			fc.mu.Unlock()
			return
		}
		time.Sleep(min(fc.backoff<<try, 2*time.Second))
	}
}

// check asserts the drill's invariants over every key and returns the
// figures:
//   - every delivery ended acknowledged or dead-lettered, and every key
//     ends done (SUCCEEDED, its finish done, approved/result.md the output
//     its result_ref names) or has a dead letter;
//   - every success answer of a key names one result_ref, and the approved
//     object is that output's text: never two effective results;
//   - a failed try carries a classified error (never a bare connection
//     failure of the instance).
func (fc *fcSim) check(t *testing.T, store *mysqlstore.Store, oss *ossfake.Server, calls map[string]int) failoverFigures {
	fig := failoverFigures{deliveries: fc.deliveries, acked: fc.acked, errors: fc.errors}
	objects := oss.Objects()
	text := func(ref string) (string, bool) {
		_, key, ok := strings.Cut(strings.TrimPrefix(ref, "oss://"), "/")
		o, found := objects[key]
		var out struct{ Text string }
		if !ok || !found || json.Unmarshal(o.Body, &out) != nil {
			return "", false
		}
		return out.Text, true
	}
	keys := make([]string, 0, len(fc.answers))
	for k := range fc.answers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fig.deadLettered += fc.deadLettered[k]
		refs := map[string]bool{}
		for _, a := range fc.answers[k] {
			if a.status == 200 && a.outcome["status"] == "SUCCEEDED" {
				refs[fmt.Sprint(a.outcome["result_ref"])] = true
			}
		}
		if len(refs) > 1 {
			t.Errorf("key %s: two effective results answered: %v", k, refs)
		}
		approvedKey, _ := ossresult.ApprovedKey(k)
		approved, published := objects[approvedKey]
		for ref := range refs {
			if want, ok := text(ref); !ok || !published || string(approved.Body) != want {
				t.Errorf("key %s: answered %s, but approved/result.md (published %v) is not its text", k, ref, published)
			}
		}
		rec, err := store.Get(context.Background(), k)
		done := err == nil && rec.Status == driver.StatusSucceeded && rec.Finish == driver.FinishDone
		if done {
			if want, ok := text(rec.ResultRef); !ok || !published || string(approved.Body) != want {
				t.Errorf("key %s: done with %s, but approved/result.md (published %v) is not its text", k, rec.ResultRef, published)
			}
		}
		if !done && len(refs) == 1 && published {
			// The store lost the record the answer came from, but the effect
			// stands: the approved object is the answered result.
			fig.recordsLost++
			done = true
		}
		if !done && fc.deadLettered[k] == 0 {
			t.Errorf("key %s: neither done (%s finish %s, %v) nor dead-lettered; answers %v", k, rec.Status, rec.Finish, err, fc.answers[k])
		}
		if n := calls[k]; n > 1 {
			fig.extraCalls += n - 1
			fig.keysCalledTwice++
		}
	}
	if n := fc.deadLettered[""]; n > 0 {
		t.Errorf("%d deliveries dead-lettered without an answer naming their key", n)
	}
	for e, n := range fc.errors {
		if strings.HasPrefix(e, "connection: ") {
			t.Errorf("%d tries got no answer from the instance: %s", n, e)
		}
	}
	if os.Getenv("IDEMGATE_FAILOVER_VERBOSE") != "" {
		t.Logf("answers: %v", fc.answers)
	}
	return fig
}

// replayDeadLetters replays each dead letter as an operator would (main
// replay --dlq with FC's failure-destination message) and checks that its
// key settles: SUCCEEDED, finish done, approved/result.md the text of the
// output its result_ref names; a key the model was called for already is
// not called again (the saved output settles it). It returns how many keys
// it settled.
func replayDeadLetters(t *testing.T, env []string, store *mysqlstore.Store, oss *ossfake.Server, llm *modelfake.Fake, dead []deadLetter) int {
	called := llm.Snapshot()
	settled := map[string]bool{}
	for i, dl := range dead {
		msg, _ := json.Marshal(map[string]any{"timestamp": time.Now().UnixMilli(),
			"requestContext": map[string]any{"requestId": dl.reqID, "functionArn": "acs:fc:cn-hangzhou:1234567890123456:functions/idemgate",
				"condition": "UnhandledInvocationError", "approximateInvokeCount": 5},
			"requestPayload": string(dl.body), "responseContext": map[string]any{"statusCode": 404, "functionError": "UnhandledInvocationError"},
			"responsePayload": ""})
		file := filepath.Join(t.TempDir(), fmt.Sprintf("dead-letter-%d.json", i))
		if err := os.WriteFile(file, msg, 0o600); err != nil {
			t.Fatal(err)
		}
		out, code := cli(t, env, "replay", "--dlq", file, "--reason", "failover drill", "--operator", "drill@idemgate")
		var answer struct {
			Results []struct {
				Key string `json:"idempotency_key"`
			}
		}
		err := json.Unmarshal([]byte(out), &answer)
		if code != 0 || err != nil || len(answer.Results) != 1 || answer.Results[0].Key == "" ||
			dl.key != "" && answer.Results[0].Key != dl.key {
			t.Errorf("replay of a dead letter of %q: exit %d, %v\n%s", dl.key, code, err, out)
			continue
		}
		settled[answer.Results[0].Key] = true
	}
	for k := range settled {
		var rec driver.Record
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			rec, _ = store.Get(context.Background(), k)
			if rec.Finish == driver.FinishDone { // the mark is batched
				break
			}
		}
		objects := oss.Objects()
		approvedKey, _ := ossresult.ApprovedKey(k)
		_, outKey, _ := strings.Cut(strings.TrimPrefix(rec.ResultRef, "oss://"), "/")
		var output struct{ Text string }
		_ = json.Unmarshal(objects[outKey].Body, &output)
		if rec.Status != driver.StatusSucceeded || rec.Finish != driver.FinishDone ||
			string(objects[approvedKey].Body) != output.Text || output.Text == "" {
			t.Errorf("key %s: replaying its dead letters did not settle it: %s finish %s %s (%s)", k, rec.Status, rec.Finish,
				rec.LastErrorCode, rec.ResultRef)
			delete(settled, k)
		}
		if before, now := called[k], llm.Calls(k); before > 0 && now != before {
			t.Errorf("key %s: its replay called the model again (%d calls, %d before): the saved output must settle it", k, now, before)
		}
	}
	return len(settled)
}

// A failover may hand the endpoint to a server that is still read-only (a
// standby not yet promoted, a demoted primary): for an account without the
// privilege to write there anyway, every write is refused. The store gives a
// clear, retryable error naming the refusal, runs nothing, and FC's retry
// once the server takes writes runs each task once.
func TestFailoverEndpointStillReadOnly(t *testing.T) {
	ctx := context.Background()
	m, err := proc.StartMariaDB(ctx, t.TempDir())
	if errors.Is(err, proc.ErrNoMariaDB) && !testenv.Required() {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	if err := m.Exec(ctx, "CREATE DATABASE app", "CREATE USER 'app'@'%' IDENTIFIED BY 'app-password'",
		"GRANT ALL ON app.* TO 'app'@'%'"); err != nil {
		t.Fatal(err)
	}
	llm := newLLMFake(t, 0)
	env := append(llm.Env(), "STATE_DIR="+t.TempDir())
	migrate(t, append(env, "MYSQL_DSN="+m.DSN("app")))
	inst := start(t, append(env, "MYSQL_DSN=app:app-password@tcp("+m.Addr+")/app")...)
	if err := m.Exec(ctx, "SET GLOBAL read_only = 1"); err != nil {
		t.Fatal(err)
	}
	bodies := make([][]byte, 3)
	reqIDs := make([]string, 3)
	for i := range bodies {
		bodies[i], reqIDs[i] = taskEvent("ev-"+nonce(), "read-only "+nonce(), nil), "fc-"+nonce()
		a, err := inst.tryInvoke(bodies[i], reqIDs[i], 0)
		m := mustJSON(t, a, err)
		if a.status != 404 || m["errorType"] != "store_unavailable" || m["retryable"] != true ||
			!strings.Contains(fmt.Sprint(m["errorMessage"]), "read-only") {
			t.Fatalf("a delivery to a read-only server: %d %v", a.status, m)
		}
		if i == 0 {
			t.Logf("answered: %s: %s", m["errorType"], m["errorMessage"])
		}
	}
	if llm.Total() != 0 {
		t.Fatalf("the model was called %d times while nothing could be recorded", llm.Total())
	}
	if err := m.Exec(ctx, "SET GLOBAL read_only = 0"); err != nil {
		t.Fatal(err)
	}
	for i := range bodies {
		a, err := inst.tryInvoke(bodies[i], reqIDs[i], 1)
		if m := mustJSON(t, a, err); a.status != 200 || m["status"] != "SUCCEEDED" {
			t.Fatalf("FC's retry once the server takes writes: %d %v", a.status, m)
		}
	}
	if llm.Total() != 3 {
		t.Fatalf("model calls %d, want 3", llm.Total())
	}
}
