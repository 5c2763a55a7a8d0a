package explore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aliyun/fc-runtime-go-sdk/fccontext"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/go1"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/keys"
	"github.com/idemgate/idemgate/ossresult"
)

// The world's time constants. The lease is long in real time (no renewal
// ever ticks during a seed) and expires only when the clock jumps.
const (
	simLease      = 10 * time.Minute
	simGrace      = time.Minute // what the timer's sweep leaves to FC
	dedupTTL      = 300 * time.Second
	inputHorizon  = time.Hour        // handler: a record without input.json is left to FC this long
	maxRetryDelay = 10 * time.Minute // FC delivers a due retry within this (its async retry span is shorter than the horizon)
	maxAttempts   = 3
	// maxExplored bounds the clock of the explored phase: the timer sweeps
	// every minute in production, the world only a few times.
	maxExplored = 90 * time.Minute
)

// script is what the model does for one business key.
type script int

const (
	scriptOK        script = iota // answers
	scriptFailFirst               // the first call fails retryably
	scriptFinal                   // refuses for good (content policy)
	scriptRetryAll                // always fails retryably
)

// keySpec is one business action and the events that carry it.
type keySpec struct {
	name     string
	taskType string
	explicit string // explicit idempotency_key, or ""
	version  string // explicit input_version, or ""
	input    map[string]any
	notify   bool
	script   script
	k        keys.Derived
	bodies   [2][]byte // [0] as specified, [1] the double submit that differs only in notify
	token    string    // a word only this spec's input holds: the model's prompt names the payload
}

// delivery is one FC async invocation: up to w.fcTries tries with one request id.
type delivery struct {
	spec     *keySpec
	reqID    string
	body     []byte
	resolved bool // answered success, or dead-lettered
	acked    bool // answered HTTP 200: FC is done with it
	dlq      bool // dead-lettered
	go1      bool // over the go1 runtime API: its tries carry no retry count
	norc     bool // over the custom runtime without x-fc-retry-count: RetryCount -1
	late     bool // a new submission long after the others (not a retry of theirs)
	scripted int  // an enumerated scenario races its tries up to this one itself: FC adds none of them
}

type world struct {
	t    *testing.T
	seed int64
	rng  interface {
		IntN(int) int
		Float64() float64
	}
	be       *backend
	names    *strings.Replacer
	events   chan event
	actors   []*actor
	now      time.Duration
	trace    []string
	draining bool

	lease, grace   time.Duration
	pCrash, pPause float64
	pFail          map[string]float64 // by kind of call: store, redis, oss, model, notify
	maxSteps       int
	sweepLimit     int
	sweeps         int
	fcTries        int // FC's async tries per delivery: 1 + its configured retries (0 to 2 here)

	specs      []*keySpec
	deliveries []*delivery
	dlq        [][]byte
	model      *model
	notes      *notifier
	resultsDir string
	results    *ossresult.Local
	log        *slog.Logger

	violations []string
	resets     map[string]int           // K → replays that reset it
	parent     map[string]string        // K and its step records' keys → K
	staleUntil map[string]time.Duration // K → end of the documented window of a Redis entry a reset could not replace
	successes  map[string][]string      // K → result_ref of every success answer

	feat      map[string]bool    // the world's features (-world)
	maxClock  time.Duration      // the explored phase's clock bound
	retention time.Duration      // the purge's (feature purge)
	objectTTL time.Duration      // objects expire this long after their write (feature expiry)
	tombAge   time.Duration      // a tombstone's age when the purge deletes it
	holders   map[string]*holder // K → its lease's holder
	// leaseOwner: K → the actor its record names as lease owner (the last
	// granted its lease or finish), kept past a Complete or Fail, which
	// keep the record's owner and try (windows_test.go's newLease)
	leaseOwner map[string]*actor
	finishers  map[string]*holder // K → its finish's holder
	posts      map[string][]*post // K → every notification POST
	objects    *objectLog
	libKeys    []string // keys of the library callers (feature library)
	nonce      string
	tenant     string
	pairs      []string             // K → spec name, for the trace
	lives      map[string]int       // K → lives begun (a FIRST claim after a purge begins another)
	lv         livesWorld           // lives_test.go: purged keys, tombstones, refused notify URLs
	copyMarks  map[string]int       // K → the try a copy's claim raised its lease's to (windows_test.go)
	ownerMarks map[string]ownerMark // K → the record's mark (owner, try) as the store's answers showed it (windows_test.go)
	backoffs   map[string]*backoff  // K → the back-off of its last retryable failure (windows_test.go)
	retries    map[string]retryable // K → its retryable failure (clock_test.go)
	stored     storedKeys           // keys seeded with stored state (feature stored)
	shift      atomic.Int64         // w.now, for the processes' clocks (clock_test.go)
}

// newWorld generates seed's world on be.
func newWorld(t *testing.T, seed int64, be *backend, nonce string) *world {
	w := newBareWorld(t, seed, be, nonce)
	w.genSpecs(nonce)
	w.genActors()
	w.genLives()
	return w
}

// newBareWorld is seed's world without keys or actors.
func newBareWorld(t *testing.T, seed int64, be *backend, nonce string) *world {
	rng := newRand(seed)
	rates := []float64{0.01, 0.04, 0.1}
	w := &world{t: t, seed: seed, rng: rng, be: be, events: make(chan event), lease: simLease, grace: simGrace,
		pCrash: rates[rng.IntN(3)], pPause: rates[rng.IntN(3)], pFail: map[string]float64{}, maxSteps: 300,
		sweepLimit: 1 + rng.IntN(2), fcTries: 1 + rng.IntN(3),
		resets: map[string]int{}, successes: map[string][]string{}, parent: map[string]string{},
		staleUntil: map[string]time.Duration{}, feat: worldFeatures(), maxClock: maxExplored, nonce: nonce, lives: map[string]int{},
		holders: map[string]*holder{}, leaseOwner: map[string]*actor{}, finishers: map[string]*holder{}, posts: map[string][]*post{},
		log: slog.New(slog.NewJSONHandler(io.Discard, nil)), names: strings.NewReplacer()}
	w.objects = &objectLog{w: w, sums: map[string]string{}, at: map[string]time.Duration{}, gone: map[string]bool{},
		goneIn: map[string]int{}}
	if w.feat["purge"] {
		w.retention = 2 * time.Hour
		w.tombAge = 100 * w.retention // objects never expire: tombstones stay
		if w.feat["expiry"] {
			w.objectTTL = w.retention * time.Duration(1+rng.IntN(3))
			w.tombAge = w.objectTTL + w.retention // OBJECT_EXPIRE_DAYS + a margin
		}
		w.maxClock = 3*w.retention + maxExplored
	}
	for _, c := range []string{"store", "redis", "oss", "model", "notify"} {
		w.pFail[c] = []float64{0, 0.05, 0.3}[rng.IntN(3)] // sometimes an outage
	}
	w.resultsDir = filepath.Join(t.TempDir(), "results")
	local, err := ossresult.NewLocal(w.resultsDir)
	if err != nil {
		t.Fatal(err)
	}
	w.results = local
	w.model = &model{w: w, scripts: map[string]script{}, calls: map[string]int{}, prompts: map[string]string{}, base: map[string]int{}}
	w.notes = &notifier{w: w, posts: map[string]int{}, refused: map[string]bool{}, refuses: map[string]bool{}}
	return w
}

// genSpecs: two to four keys, and sometimes one more that reuses an
// explicit key with another payload.
func (w *world) genSpecs(nonce string) {
	tenant := fmt.Sprintf("t-%s-%s-%d", nonce, w.be.name, w.seed) // configurations share one Redis
	n := 2 + w.rng.IntN(3)
	for i := range n {
		s := &keySpec{name: fmt.Sprintf("k%d", i), taskType: "summarize", notify: w.rng.IntN(2) == 0,
			script: pickScript(w.rng.IntN(10))}
		if w.rng.IntN(4) == 0 {
			s.taskType = "keywords"
		}
		if w.rng.IntN(3) == 0 {
			s.explicit = fmt.Sprintf("order-%d", i)
			if w.rng.IntN(2) == 0 {
				s.version = "v1"
			}
		}
		s.token = token(i)
		s.input = specInput(s.taskType, fmt.Sprintf("document %d of seed %d %s", i, w.seed, s.token))
		w.specs = append(w.specs, s)
	}
	if w.rng.IntN(3) == 0 { // B reuses A's explicit key with another input
		a := w.specs[0]
		if a.explicit == "" {
			a.explicit = "order-0"
		}
		b := &keySpec{name: "k0b", taskType: a.taskType, explicit: a.explicit, version: a.version, notify: w.rng.IntN(2) == 0, script: a.script,
			token: token(9)}
		b.input = specInput(a.taskType, fmt.Sprintf("another document of seed %d %s", w.seed, b.token))
		w.specs = append(w.specs, b)
	}
	w.derive(tenant)
}

// derive computes the keys and events of w.specs.
func (w *world) derive(tenant string) {
	var pairs []string
	for _, s := range w.specs {
		s.k = mustDerive(w.t, tenant, s)
		s.bodies[0] = taskEvent(tenant, s, s.notify)
		s.bodies[1] = taskEvent(tenant, s, !s.notify)
		if _, ok := w.model.scripts[s.k.Key]; !ok {
			w.model.scripts[s.k.Key] = s.script
		}
		pairs = append(pairs, s.k.Key, s.name)
		if w.feat["notifyfinal"] && w.rng.IntN(3) == 0 {
			w.notes.refuses[s.k.Key] = true
		}
		w.parent[s.k.Key] = s.k.Key
	}
	w.pairs = pairs
	w.names = strings.NewReplacer(pairs...)
}

func pickScript(n int) script {
	switch {
	case n < 6:
		return scriptOK
	case n < 8:
		return scriptFailFirst
	case n < 9:
		return scriptFinal
	}
	return scriptRetryAll
}

// token is a word of letters unique to spec i (the keywords task keeps only
// words of four letters or more).
func token(i int) string { return "tokn" + string(rune('a'+i)) + "zq" }

func specInput(taskType, text string) map[string]any {
	if taskType == "keywords" {
		return map[string]any{"text": text + " alpha beta gamma alpha delta"}
	}
	return map[string]any{"content": text}
}

// genActors: one to three deliveries per key (each a double submit of the
// others, sometimes differing in notify), sweeps, and sometimes a replay by
// key.
func (w *world) genActors() {
	for i, s := range w.specs {
		for j := range 1 + w.rng.IntN(3) {
			body := s.bodies[0]
			if j > 0 && w.rng.IntN(3) == 0 {
				body = s.bodies[1]
			}
			if (w.seed+int64(i+j))%3 != 0 { // its own upstream request id (chosen off the seed's draws, which stay as they were)
				body = withRequestID(body, fmt.Sprintf("up-%d-%d", i, j))
			}
			d := &delivery{spec: s, reqID: fmt.Sprintf("fc-%d-%d", i, j), body: body, go1: w.feat["go1"] && w.rng.IntN(2) == 0,
				norc: w.feat["norc"] && w.rng.IntN(2) == 0}
			w.deliveries = append(w.deliveries, d)
			w.addTry(d, 0, 0)
			if w.feat["copies"] && w.rng.IntN(3) == 0 { // FC delivers the same invocation twice (each with its retries)
				c := *d
				w.deliveries = append(w.deliveries, &c)
				w.addTry(&c, 0, 0)
			}
		}
		if w.feat["late"] && w.rng.IntN(3) == 0 { // a double submit long after the first ones
			d := &delivery{spec: s, reqID: fmt.Sprintf("fc-%d-late", i), body: withRequestID(s.bodies[w.rng.IntN(2)],
				fmt.Sprintf("up-%d-late", i)), late: true}
			w.deliveries = append(w.deliveries, d)
			until := maxExplored // before any record is old enough for the purge
			if w.feat["resend"] {
				until = w.maxClock
			}
			w.addTry(d, 0, time.Duration(w.rng.IntN(int(until/time.Minute)))*time.Minute)
		}
	}
	if w.feat["stored"] {
		w.genStored()
	}
	if w.feat["library"] {
		w.genLibrary()
	}
	if w.feat["purge"] {
		for n := range 1 + w.rng.IntN(3) {
			at := time.Duration(w.rng.IntN(int(w.maxClock/time.Minute))) * time.Minute
			w.addActor(&actor{name: fmt.Sprintf("purge%d", n), kind: kindPurge, startAt: at, run: w.runPurge})
		}
	}
	for range 1 + w.rng.IntN(2) {
		w.addSweep()
	}
	if w.rng.IntN(4) == 0 {
		s := w.specs[w.rng.IntN(len(w.specs))]
		w.addActor(&actor{name: "replay-key-" + s.name, kind: kindReplayKey, run: func(a *actor) { w.runReplayKey(a, s.k.Key) }})
	}
}

// maxSweeps bounds the timer's sweeps in the explored phase.
const maxSweeps = 8

func (w *world) addSweep() {
	w.sweeps++
	w.addActor(&actor{name: fmt.Sprintf("sweep%d", w.sweeps), kind: kindSweep, startAt: w.now, run: w.runSweep})
}

func (w *world) addActor(a *actor) *actor {
	a.w, a.id = w, len(w.actors)
	w.actors = append(w.actors, a)
	return a
}

func (w *world) addTry(d *delivery, try int, at time.Duration) {
	w.addActor(&actor{name: fmt.Sprintf("%s/try%d", d.reqID, try), kind: kindTry, d: d, try: try, startAt: at,
		run: func(a *actor) { w.runTry(a) }})
}

// ended is called when an actor returned or crashed.
func (w *world) ended(a *actor) {
	if a.dead.Load() {
		w.tracef("%s died", a.name)
	}
	w.settle(a)
	if a.kind != kindTry || a.timedOut || a.d.resolved {
		return
	}
	if a.dead.Load() {
		w.retryOrDLQ(a)
	}
}

// retryOrDLQ is FC after a failed or timed-out try: the next try, or the
// dead-letter queue (and, sometimes, an operator who replays it).
func (w *world) retryOrDLQ(a *actor) {
	d := a.d
	if a.try+1 <= d.scripted {
		return // the scenario's own actor is that retry
	}
	if a.try+1 < w.fcTries {
		at := w.now
		if w.feat["delay"] { // FC's back-off before the retry
			at += time.Duration(w.rng.IntN(int(maxRetryDelay/time.Second))) * time.Second
		}
		w.addTry(d, a.try+1, at)
		return
	}
	d.resolved, d.dlq = true, true
	w.tracef("FC: %s dead-lettered", d.reqID)
	body := d.body
	if w.rng.IntN(2) == 0 {
		body = failureDestination(d, w.fcTries)
	}
	w.dlq = append(w.dlq, body)
	if w.rng.IntN(10) < 7 {
		n := len(w.dlq)
		w.addActor(&actor{name: fmt.Sprintf("replay-dlq%d", n), kind: kindReplayDLQ, startAt: w.now,
			expect: map[string]string{d.spec.k.Key: d.spec.k.PayloadHash},
			run:    func(p *actor) { w.runReplayDLQ(p, body) }})
	}
}

// runTry is one FC try: the pipeline's Handle, as the runtime adapter calls it.
func (w *world) runTry(a *actor) {
	p := w.pipeline(a)
	meta := handler.Meta{RequestID: a.d.reqID, RetryCount: a.try}
	if a.d.norc {
		meta.RetryCount = -1
	}
	if a.d.go1 { // the go1 runtime API carries no retry count: the SDK reports 0
		meta = go1.Meta(fccontext.NewContext(context.Background(), &fccontext.FcContext{RequestID: a.d.reqID}))
	}
	failed := w.finishFailed(a.d.spec.k.Key) // before the try: a duplicate may read it before a failure
	ctx, cancel := w.invocation(a)
	defer cancel()
	rep := p.Handle(ctx, a.d.body, meta)
	o := w.answer(a, rep.Body)
	if a.timedOut || a.d.resolved {
		return // FC gave up on this try; its answer reaches nobody
	}
	if o.ErrorType == "input_missing" && !a.d.late {
		w.violate("%s: FC's delivery of the event was answered input_missing (%s)", a.name, o.ErrorMessage)
	}
	if rep.Status == 200 {
		a.d.resolved, a.d.acked = true, true
		if o.Status == string(driver.StatusRunning) {
			w.checkHeld(a, o.IdempotencyKey)
			w.checkOwnLeaseAcked(a, o.IdempotencyKey)
		}
		if o.Status == string(driver.StatusSucceeded) && (a.d.go1 || a.d.norc) {
			w.checkOwnFinishAcked(a, o.IdempotencyKey)
		}
		if (failed || w.stored.overFailure[a]) && o.Status != string(driver.StatusRunning) { // (in progress: another owner's lease carries it, checkHeld)
			w.checkFinishFailedAcked(a, o.IdempotencyKey)
		}
		return
	}
	w.retryOrDLQ(a)
}

func (w *world) runSweep(a *actor) {
	rep, err := w.pipeline(a).Sweep(context.Background(), handler.Meta{RequestID: "timer-" + a.name, RetryCount: -1},
		handler.SweepOptions{Limit: w.sweepLimit, Grace: w.grace})
	if err != nil {
		w.tracef("%s: %v", a.name, err)
		return
	}
	for _, o := range rep.Results {
		w.noteOutcome(a, o)
	}
}

func (w *world) runReplayDLQ(a *actor, body []byte) {
	outs, err := w.pipeline(a).ReplayDLQ(context.Background(), body, handler.ReplayRequest{Reason: "explore", Operator: "sim"},
		handler.Meta{RequestID: a.name, RetryCount: -1})
	if err != nil {
		w.tracef("%s: %v", a.name, err)
	}
	for _, o := range outs {
		w.noteOutcome(a, o)
	}
}

func (w *world) runReplayKey(a *actor, key string) {
	o, err := w.pipeline(a).ReplayKey(context.Background(), key, handler.ReplayRequest{Reason: "explore", Operator: "sim"},
		handler.Meta{RequestID: a.name, RetryCount: -1})
	if err != nil {
		w.tracef("%s: %v", a.name, err)
		return
	}
	w.noteOutcome(a, o)
}

// answer decodes a reply and notes it.
func (w *world) answer(a *actor, body []byte) handler.Outcome {
	var o handler.Outcome
	if err := json.Unmarshal(body, &o); err != nil {
		w.violate("%s: answer is not an outcome: %s", a.name, body)
	}
	w.noteOutcome(a, o)
	return o
}

func (w *world) noteOutcome(a *actor, o handler.Outcome) {
	w.tracef("%s answered %s %s %s %s", a.name, o.Status, o.Decision, o.ErrorType, o.ResultRef)
	if o.Status == string(driver.StatusSucceeded) && o.ErrorType == "" {
		w.successes[o.IdempotencyKey] = append(w.successes[o.IdempotencyKey], o.ResultRef)
		w.checkAnswerPayload(a, o)
	}
	w.checkLivesAnswer(a, o)
	w.checkStoredAnswer(a, o)
}

// pipeline builds the process's own pipeline: its engine and every outside
// call go through wrappers that yield to the scheduler.
func (w *world) pipeline(a *actor) *handler.Pipeline {
	st := &storeW{a: a, s: w.be.store}
	// Finish marks are written when the process flushes them (atEnd), never
	// by a timer the scheduler does not see.
	opts := []idempotency.Option{idempotency.WithLease(w.lease), idempotency.WithMaxAttempts(maxAttempts),
		idempotency.WithLogger(w.log), idempotency.WithFastTimeout(5 * time.Second), idempotency.WithFastBackoff(0),
		idempotency.WithFinishBatch(24*time.Hour, 1<<20)}
	opts = append(opts, w.clockOptions()...)
	if w.be.fast != nil {
		opts = append(opts, idempotency.WithFastLayer(&fastW{a: a, f: w.be.fast}))
	}
	if w.feat["cache"] {
		opts = append(opts, idempotency.WithLocalCache(64, dedupTTL))
	}
	rs := &resultsW{a: a, r: w.results}
	a.engine = idempotency.New(st, opts...)
	return &handler.Pipeline{Engine: a.engine,
		Results: func(context.Context, handler.Credentials) (handler.ResultStore, error) { return rs, nil },
		Model:   &modelW{a: a, m: w.model}, Notify: &notifyW{a: a, n: w.notes}, Tasks: handler.Builtin(),
		Fault: func(point string) { a.yield("fault "+point, false) }, Log: w.log,
		Retention: handler.Retention{Records: w.retention, Tombstones: w.tombAge}}
}

func mustDerive(t *testing.T, tenant string, s *keySpec) keys.Derived {
	in, _ := json.Marshal(s.input)
	d, err := keys.Derive(keys.Fields{TenantID: tenant, TaskType: s.taskType, Operation: s.taskType, Input: in,
		IdempotencyKey: s.explicit, InputVersion: s.version})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func taskEvent(tenant string, s *keySpec, notify bool) []byte {
	data := map[string]any{"tenant_id": tenant, "task_type": s.taskType, "operation": s.taskType, "input": s.input}
	if s.explicit != "" {
		data["idempotency_key"] = s.explicit
	}
	if s.version != "" {
		data["input_version"] = s.version
	}
	if notify {
		data["notify"] = map[string]any{"url": "https://hook.test/" + s.name}
	}
	b, _ := json.Marshal(map[string]any{"id": "ev-" + s.name, "source": "explore", "specversion": "1.0",
		"type": "idemgate:Task:Submitted", "datacontenttype": "application/json", "data": data})
	return b
}

// withRequestID is the task event body with data.request_id id: the same
// K and payload (request_id is neither), another upstream request, whose id
// the record keeps only when its claim is the key's first.
func withRequestID(body []byte, id string) []byte {
	var ev map[string]any
	_ = json.Unmarshal(body, &ev)
	ev["data"].(map[string]any)["request_id"] = id
	b, _ := json.Marshal(ev)
	return b
}

// failureDestination wraps a dead letter as FC's async failure destination
// does (the original event is its requestPayload).
func failureDestination(d *delivery, tries int) []byte {
	b, _ := json.Marshal(map[string]any{"timestamp": 1, "requestContext": map[string]any{"requestId": d.reqID,
		"functionArn": "acs:fc:cn-hangzhou:1:functions/idemgate", "condition": "UnhandledInvocationError",
		"approximateInvokeCount": tries}, "requestPayload": string(d.body),
		"responseContext": map[string]any{"statusCode": 200, "functionError": "UnhandledInvocationError"}})
	return b
}
