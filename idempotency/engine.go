package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/idemgate/idemgate/idempotency/driver"
)

// Defaults of the engine's options (docs/design.md §5).
const (
	DefaultLease       = 60 * time.Second
	DefaultMaxAttempts = 3
	defaultFastTimeout = 50 * time.Millisecond
	defaultFastBackoff = time.Second
	// terminalWriteTimeout bounds Complete and Fail, which run detached from the
	// caller's context so that a timed-out invocation still records its end.
	terminalWriteTimeout = 5 * time.Second
	// defaultRetryBackoff is the first retryable failure's back-off (see
	// WithRetryBackoff).
	defaultRetryBackoff = time.Second
)

// Engine claims keys and records outcomes. It is safe for concurrent use;
// build one per process and share it.
type Engine struct {
	store driver.Store
	fast  driver.FastLayer
	o     options

	fastDownUntil atomic.Int64 // unix nanos; the fast layer is skipped until then
	stats         counters
	marks         finishMarks
	cache         *cache // nil unless WithLocalCache
}

type options struct {
	lease        time.Duration
	maxAttempts  int
	fastTimeout  time.Duration
	fastBackoff  time.Duration
	log          *slog.Logger
	fast         driver.FastLayer
	observe      func(Decision, Tier)
	finishWindow time.Duration
	finishMax    int
	blobs        driver.BlobStore
	waitInFlight time.Duration
	disabled     bool
	cacheSize    int
	cacheTTL     time.Duration
	retryBackoff time.Duration
	now          func() time.Time
}

// Option configures an Engine.
type Option func(*options)

// WithFastLayer adds the Redis tier (default: none, the Store alone).
func WithFastLayer(f driver.FastLayer) Option { return func(o *options) { o.fast = f } }

// WithLease sets the lease a claim takes and renewals extend (default 60 s,
// LEASE_SECONDS). A lease is never longer than the context's deadline.
func WithLease(d time.Duration) Option { return func(o *options) { o.lease = d } }

// WithMaxAttempts sets the attempt budget (default 3, MAX_ATTEMPTS).
func WithMaxAttempts(n int) Option { return func(o *options) { o.maxAttempts = n } }

// WithFastTimeout bounds each fast-layer call (default 50 ms); past it the
// engine goes on with the Store alone.
func WithFastTimeout(d time.Duration) Option { return func(o *options) { o.fastTimeout = d } }

// WithFastBackoff sets how long the fast layer is skipped after it failed
// (default 1 s), so that a dead Redis costs one timeout per second, not one
// per call.
func WithFastBackoff(d time.Duration) Option { return func(o *options) { o.fastBackoff = d } }

// WithUnconfirmedGrace is kept for callers that set it; it does nothing.
//
// Deprecated: another owner's fast-layer claim that the Store has not
// confirmed never answers a duplicate by itself any more, however young:
// the Store decides (docs/design.md §7).
func WithUnconfirmedGrace(time.Duration) Option { return func(*options) {} }

// WithRetryBackoff sets the back-off of a retryable failure: attempt n's
// failure is retried by another delivery no sooner than base·2^(n-1) later,
// never longer than a lease (default 1 s; 0: at once). Until then a claim
// is answered retry_later (not acknowledged), except by the failed
// request's own later try, which waited FC's back-off already: copies of
// the action (a batch carrying it twice, a double submit) then cannot spend
// the attempt budget on one transient error. The store records the end on
// its own clock.
func WithRetryBackoff(base time.Duration) Option {
	return func(o *options) { o.retryBackoff = max(base, 0) }
}

// WithClock sets the clock the engine measures its own time on (default
// time.Now): how long a finish it holds has left ([Finisher.Hold]), when
// [Lease.KeepAlive] gives up, the fast layer's back-off, how much of a
// context's deadline is left (a lease is clamped to it), and the deadline
// Finisher.Hold sets on the effect it bounds. Deadlines are instants on
// this clock, while a context's timer fires on the real one: a clock ahead
// of real time ends those contexts later than their deadline says (a
// simulation checks the deadline on its own clock), one behind real time
// ends them early. Instants the store recorded (a record's lease_until,
// retry_after) are the store's: the store decides on its own clock, and the
// engine's guesses at its decisions (a reset's pre-check, WithWaitInFlight's
// poll) read the store's now with the record (driver.NowReader; the wall
// clock for a store without one), not this clock. For simulations
// (handler/explore moves it with the stores' clock).
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// WithLogger sets the logger (default slog.Default()). The engine logs with
// the caller's context, so a context-aware handler can add request fields.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// New builds an engine on a durable store.
func New(store driver.Store, opts ...Option) *Engine {
	o := options{lease: DefaultLease, maxAttempts: DefaultMaxAttempts, fastTimeout: defaultFastTimeout,
		fastBackoff: defaultFastBackoff, log: slog.Default(),
		finishWindow: defaultFinishWindow, finishMax: defaultFinishBatch, retryBackoff: defaultRetryBackoff,
		now: time.Now}
	e := &Engine{store: store}
	for _, opt := range opts {
		opt(&o)
	}
	e.o = o
	e.fast = o.fast
	e.stats.observe = o.observe
	if o.cacheSize > 0 {
		e.cache = newCache(o.cacheSize, o.cacheTTL)
	}
	if o.disabled {
		o.log.Warn("IDEMPOTENCY IS DISABLED: every call runs its function; nothing is claimed, recorded or answered " +
			"from an earlier delivery (WithDisabled; tests only)")
	}
	return e
}

// now reads the engine's clock (WithClock).
func (e *Engine) now() time.Time { return e.o.now() }

// until is how much of ctx's deadline is left on the engine's clock (ok
// false without one).
func (e *Engine) until(ctx context.Context) (left time.Duration, ok bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	return dl.Sub(e.now()), true
}

// Store returns the durable store (operators' tools read through it).
func (e *Engine) Store() driver.Store { return e.store }

// MaxAttempts is the engine's attempt budget.
func (e *Engine) MaxAttempts() int { return e.o.maxAttempts }

// fill completes a request with the engine's defaults and keeps the lease
// inside the context's deadline: a lease that outlived the FC invocation
// would block the retry of a killed instance for nothing.
func (e *Engine) fill(ctx context.Context, req ClaimRequest) (ClaimRequest, error) {
	if err := checkKey(req.Key); err != nil {
		return req, Final("invalid_request", err)
	}
	if err := checkText(req); err != nil {
		return req, Final("invalid_request", err)
	}
	if req.Lease <= 0 {
		req.Lease = e.o.lease
	}
	if req.MaxAttempts <= 0 {
		req.MaxAttempts = e.o.maxAttempts
	}
	if left, ok := e.until(ctx); ok {
		if left <= 0 {
			return req, Retryable("timeout", context.DeadlineExceeded)
		}
		req.Lease = min(req.Lease, left)
	}
	return req, nil
}

// Claim asks for the lease on req.Key: first the fast layer, which may answer
// a duplicate at once, then the Store, which decides. The Lease is non-nil
// exactly when the decision is owned.
func (e *Engine) Claim(ctx context.Context, req ClaimRequest) (driver.ClaimResult, *Lease, error) {
	req, err := e.fill(ctx, req)
	if err != nil {
		return driver.ClaimResult{}, nil, err
	}
	if res, ok := e.cache.get(req); ok {
		e.stats.count(res.Decision, TierCache)
		return res, nil, nil
	}
	fastClaimed := false
	if ans, ok := e.fastClaim(ctx, req); ok {
		switch {
		case ans.Verdict == driver.FastRepeatOther && (ans.Unconfirmed || ans.Record.Fence == 0):
			// A claim the Store has not confirmed is no hand-off: its
			// claimant may have died, or its Store claim failed, before
			// the Store held it, and an "in progress" answer acknowledges
			// the delivery (issue 20: one that met such a claim, the
			// retry of a claim that committed but reported failure, was
			// answered 200 and the work lost). The Store decides; its
			// answer is published, so later duplicates are answered here.
		case ans.Verdict == driver.FastRepeatOther && req.Try > 0:
			// FC's retry of a try that was not acknowledged: an "in
			// progress" answer would acknowledge it, and the entry may be
			// older news than the Store (a late publish after the lease
			// it names was taken over, an eviction): only the Store may.
			// Retries are few; this costs nothing on the hot path.
		case ans.Verdict == driver.FastRepeatOther && req.Owner != "" && ans.Record.LeaseOwner == req.Owner && req.Try >= 0:
			// A copy of the holder's known try: the Store marks its try
			// (driver.ActMarkTry), so FC's retry of it does not take the
			// live lease over.
		case ans.Verdict == driver.FastRepeatOther:
			e.stats.count(DecisionRepeatOther, TierFast)
			ans.Record.Key = req.Key
			return driver.ClaimResult{Decision: DecisionRepeatOther, Record: ans.Record, LeaseLeft: ans.LeaseLeft, Source: "redis"}, nil, nil
		case ans.Verdict == driver.FastSucceeded || ans.Verdict == driver.FastFailedFinal:
			e.stats.count(DecisionRepeatDone, TierFast)
			ans.Record.Key, ans.Record.PayloadHash = req.Key, req.PayloadHash // a terminal answer means it matched
			e.cache.put(ans.Record)
			return driver.ClaimResult{Decision: DecisionRepeatDone, Record: ans.Record, Source: "redis"}, nil, nil
		case ans.Verdict == driver.FastFirst:
			fastClaimed = true
		}
	}
	res, err := e.store.Claim(ctx, req)
	if err != nil {
		e.fastDo(ctx, "release", func(c context.Context) error { return e.fast.Release(c, req.Key, req.Owner) })
		return driver.ClaimResult{}, nil, storeErr("claim", err)
	}
	e.stats.count(res.Decision, TierStore)
	codeFailedFinish(&res.Record)
	e.cache.put(res.Record)
	// After a FIRST on both tiers the fast layer holds nothing of ours (a
	// FIRST registers nothing there), which sends duplicates to the Store as
	// an unconfirmed claim would; the completion publishes. Skip the round
	// trip on the hot path.
	if !(fastClaimed && res.Decision == DecisionFirst) {
		e.publish(ctx, res.Record, res.LeaseLeft)
	}
	if !res.Decision.Owned() {
		return res, nil, nil
	}
	return res, &Lease{e: e, Key: req.Key, Fence: res.Record.Fence, Attempt: res.Record.Attempt,
		Owner: req.Owner, OriginRequestID: res.Record.OriginRequestID, lease: req.Lease, maxAttempts: req.MaxAttempts,
		payloadHash: req.PayloadHash, try: req.Try, salvage: res.Salvage, finishAfter: req.FinishAfter,
		steps: res.Record.Steps, checkpoint: make(chan struct{}, 1), decision: res.Decision}, nil
}

// Get reads the durable record.
func (e *Engine) Get(ctx context.Context, key string) (driver.Record, error) {
	if err := checkKey(key); err != nil {
		return driver.Record{}, err
	}
	rec, err := e.store.Get(ctx, key)
	codeFailedFinish(&rec)
	return rec, storeErr("get", err)
}

// GetNow reads the durable record and the store's now at the read, for a
// decision on the record's instants (LeaseUntil, UpdatedAt), which the
// store set on its own clock: this process's may be ahead or behind the
// database's. A store that is not a driver.NowReader answers this
// process's wall clock.
func (e *Engine) GetNow(ctx context.Context, key string) (rec driver.Record, now time.Time, err error) {
	if err := checkKey(key); err != nil {
		return driver.Record{}, now, err
	}
	if rec, now, err = e.readNow(ctx, key); err != nil {
		return rec, now, storeErr("get", err)
	}
	codeFailedFinish(&rec)
	return rec, now, nil
}

// readNow is the store's GetNow, or Get and this process's wall clock.
func (e *Engine) readNow(ctx context.Context, key string) (driver.Record, time.Time, error) {
	if nr, ok := e.store.(driver.NowReader); ok {
		return nr.GetNow(ctx, key)
	}
	rec, err := e.store.Get(ctx, key)
	return rec, time.Now(), err
}

func (e *Engine) fastClaim(ctx context.Context, req ClaimRequest) (driver.FastAnswer, bool) {
	var ans driver.FastAnswer
	ok := e.fastDo(ctx, "claim", func(c context.Context) (err error) {
		ans, err = e.fast.Claim(c, req.Key, req.Owner, req.Try, req.PayloadHash, req.Lease)
		return err
	})
	return ans, ok
}

func (e *Engine) publish(ctx context.Context, rec driver.Record, leaseLeft time.Duration) {
	e.fastDo(ctx, "publish", func(c context.Context) error { return e.fast.Publish(c, rec, leaseLeft) })
}

// fastDo runs one bounded fast-layer call. A failure is logged, counted and
// opens the back-off window; it never fails the caller.
func (e *Engine) fastDo(ctx context.Context, op string, call func(context.Context) error) bool {
	if e.fast == nil {
		return false
	}
	if e.now().UnixNano() < e.fastDownUntil.Load() {
		e.stats.fastSkipped.Add(1)
		return false
	}
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.o.fastTimeout)
	defer cancel()
	if err := call(c); err != nil {
		e.stats.fastErrors.Add(1)
		e.fastDownUntil.Store(e.now().Add(e.o.fastBackoff).UnixNano())
		e.o.log.WarnContext(ctx, "fast layer unavailable, going on with the durable store alone",
			"op", op, "error", err.Error())
		return false
	}
	return true
}

// Lease is an owned claim. Every write through it is guarded by its fence.
type Lease struct {
	e       *Engine
	Key     string
	Fence   int64
	Attempt int
	Owner   string
	// OriginRequestID is the request id the record keeps
	// (driver.Record.OriginRequestID): the task's, whichever delivery
	// holds the lease — a takeover's own request id is not it.
	OriginRequestID string
	lease           time.Duration
	maxAttempts     int
	payloadHash     string
	try             int
	salvage         bool
	finishAfter     bool
	completed       bool              // Complete left a finish pending under this lease
	completeAt      time.Time         // when that Complete was sent: its finish lease runs from no earlier
	stepsMu         sync.Mutex        // guards steps
	steps           map[string]string // the record's checkpoints, as this lease knows them
	checkpoint      chan struct{}     // one checkpoint write at a time (each writes the whole map); a token
	disabled        bool              // WithDisabled: no store behind it
	decision        Decision          // how the claim granted it
}

// Decision is how the claim granted this lease: FIRST, REPEAT_SAME (the
// same request's later try) or TAKEOVER (DISABLED under WithDisabled).
func (l *Lease) Decision() Decision { return l.decision }

// Salvage reports whether this lease was granted past the attempt budget:
// the caller may only complete from work an earlier attempt saved (an
// output object it left behind), or record [exhaustedError]; it must not
// do the work again.
func (l *Lease) Salvage() bool { return l.salvage }

// snapshot is the record as this lease last wrote it, for the fast layer.
func (l *Lease) snapshot(st driver.Status) driver.Record {
	return driver.Record{Key: l.Key, Status: st, Fence: l.Fence, Attempt: l.Attempt, LeaseOwner: l.Owner, LeaseTry: l.try,
		PayloadHash: l.payloadHash}
}

// Duration is the lease length each renewal extends to.
func (l *Lease) Duration() time.Duration { return l.lease }

// Renew extends the lease, clamped to ctx's deadline; ErrLeaseLost if the
// fence moved on.
func (l *Lease) Renew(ctx context.Context) error {
	d := l.lease
	if left, ok := l.e.until(ctx); ok {
		d = min(d, left)
	}
	if d <= 0 {
		return Retryable("timeout", context.DeadlineExceeded)
	}
	if err := l.e.store.Renew(ctx, l.Key, l.Fence, d); err != nil {
		return storeErr("renew", err)
	}
	l.e.publish(ctx, l.snapshot(driver.StatusRunning), d)
	return nil
}

// Complete records SUCCEEDED with resultRef. ErrLeaseLost means another worker
// owns the key now: publish nothing. A resultRef over [driver.MaxResultRef] bytes
// is refused with a FINAL result_too_large error before anything is written.
// When the claim asked for FinishAfter, the completion leaves a finish
// pending under this lease's owner: see [Lease.Finisher].
func (l *Lease) Complete(ctx context.Context, resultRef string) error {
	if err := checkResult(resultRef); err != nil {
		return err
	}
	comp := driver.Completion{ResultRef: resultRef, Try: l.try}
	if l.finishAfter {
		comp.FinishLease = l.lease
	}
	c, cancel := detached(ctx)
	defer cancel()
	sent := l.e.now()
	if err := l.e.store.Complete(c, l.Key, l.Fence, comp); err != nil {
		return storeErr("complete", err)
	}
	l.completed, l.completeAt = l.finishAfter, sent
	rec := l.snapshot(driver.StatusSucceeded)
	rec.ResultRef = resultRef
	l.e.publish(ctx, rec, 0)
	l.e.cache.put(rec)
	return nil
}

// finishFailedCode answers a finish recorded FAILED without a code.
const finishFailedCode = "finish_failed"

// codeFailedFinish names the code of a finish recorded FAILED without one,
// on every read that answers a delivery (Claim, ClaimFinish, Get): migration
// 005 marked finishes that had failed under an earlier version FAILED
// without a code. The fast layer mirrors the code, not the finish, and would
// answer the key as done; an answer rebuilt from the record would say
// "unknown".
func codeFailedFinish(rec *driver.Record) {
	if rec.FailedFinish() && rec.LastErrorCode == "" {
		rec.LastErrorCode = finishFailedCode
	}
}

// resultTooLargeCode is the error code of a result over MaxResultRef.
const resultTooLargeCode = "result_too_large"

// resultNotTextCode is the error code of a result that is not valid UTF-8.
const resultNotTextCode = "result_not_utf8"

func checkResult(ref string) error {
	if !utf8.ValidString(ref) { // MySQL would refuse it on every try: the work done, never recorded
		return Final(resultNotTextCode, errors.New("the result reference is not valid UTF-8 (store binary results by reference)"))
	}
	if len(ref) > driver.MaxResultRef {
		return Final(resultTooLargeCode, fmt.Errorf("result of %d bytes; a record holds at most %d (store a reference to it)",
			len(ref), driver.MaxResultRef))
	}
	return nil
}

// Finisher returns the handle on the finish this lease's completion left
// pending (nil unless the claim asked for FinishAfter and Complete
// succeeded).
func (l *Lease) Finisher() *Finisher {
	if !l.completed {
		return nil
	}
	return &Finisher{e: l.e, Key: l.Key, Owner: l.Owner, OriginRequestID: l.OriginRequestID, try: l.try, fence: l.Fence,
		lease: l.lease, taken: l.completeAt}
}

// Fail records cause, classified (see [Classify]): FAILED_FINAL when it is
// FINAL, FAILED_FINAL attempts_exhausted (the cause in its message) when a
// cause that is not FINAL ends the attempt budget, else FAILED_RETRYABLE. It
// returns the status recorded.
func (l *Lease) Fail(ctx context.Context, cause error) (driver.Status, error) {
	f := failure(l.budgeted(cause))
	st := driver.StatusFailedRetryable
	if f.Final {
		st = driver.StatusFailedFinal
	} else {
		f.RetryAfter = l.backoff()
	}
	c, cancel := detached(ctx)
	defer cancel()
	if err := l.e.store.Fail(c, l.Key, l.Fence, f); err != nil {
		return "", storeErr("fail", err)
	}
	rec := l.snapshot(st)
	rec.LastErrorCode, rec.LastError = f.Code, f.Message
	l.e.publish(ctx, rec, 0)
	l.e.cache.put(rec)
	return st, nil
}

// budgeted is cause as the record keeps it: a failure that is not FINAL on
// the budget's last attempt becomes attempts_exhausted (docs/library.md), so
// the alert and every later delivery name why nothing will run again.
func (l *Lease) budgeted(cause error) error {
	if class, _ := Classify(cause); class == ClassFinal || l.Attempt < l.maxAttempts {
		return cause
	}
	return Final(driver.ExhaustedCode, fmt.Errorf("attempt budget spent after %d attempts: %w", l.Attempt, cause))
}

// backoff is this attempt's retry back-off: the engine's base doubled per
// earlier attempt, at most one lease (docs/design.md §10).
func (l *Lease) backoff() time.Duration {
	d := l.e.o.retryBackoff
	for i := 1; i < l.Attempt && d < l.lease; i++ {
		d *= 2
	}
	return min(d, l.lease)
}

// detached keeps a terminal write alive after the invocation's context ended:
// a timed-out invocation must still record that it failed.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), terminalWriteTimeout)
}

// maxErrorText bounds the error message a record keeps, maxErrorCode its
// code (MySQL's last_error_code holds 64 characters: a longer code would be
// refused, and the failure with it).
const (
	maxErrorText = 1000
	maxErrorCode = 64
)

// failure is what a record keeps of cause: its code, its message without
// the code (at most maxErrorText bytes), and whether it is FINAL.
func failure(cause error) driver.Failure {
	class, code := Classify(cause)
	return driver.Failure{Final: class == ClassFinal, Code: truncate(code, maxErrorCode), Message: truncate(message(cause), maxErrorText)}
}

// truncate is s as valid UTF-8 (an error text may wrap any bytes) in at
// most n bytes, cut at a character: MySQL refuses invalid UTF-8, and a
// failure it refuses is never recorded.
func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Step runs fn once per (K, op) and checkpoints its result on the record,
// fenced: a task resumed after a failure, or taken over from a dead worker,
// gets the result of every step that completed instead of running it again.
// A failing step records nothing (the caller's Fail records the task's
// failure). A worker that lost its lease may still be running a step when
// the new owner runs it too; only the owner's checkpoint lands. Steps with
// different ops may run concurrently; two concurrent calls with the same op
// both run fn. Keep results small (an ID, an object key): at most
// MaxResultRef bytes each, 60 KiB of JSON together.
func (l *Lease) Step(ctx context.Context, op string, fn func(ctx context.Context) (string, error)) (string, error) {
	if l.disabled {
		return fn(ctx)
	}
	if !utf8.ValidString(op) {
		// Checkpointed as JSON, the name would come back another (U+FFFD
		// for the bytes): a resumed lease would miss it and run fn again.
		return "", Final("invalid_request", fmt.Errorf("%w: the step name %q is not valid UTF-8", driver.ErrInvalid, op))
	}
	l.stepsMu.Lock()
	v, ok := l.steps[op]
	l.stepsMu.Unlock()
	if ok {
		return v, nil
	}
	out, err := fn(ctx)
	if err == nil {
		err = checkResult(out)
	}
	if err != nil {
		return "", err
	}
	// Detached like Complete and Fail: a step that ended as the invocation's
	// deadline passed is done, and its checkpoint (fenced) must still land,
	// or the retry runs it again. The bound covers the wait for the write
	// before it too, so that steps ending together do not add up theirs.
	c, cancel := detached(ctx)
	defer cancel()
	// One checkpoint at a time, each from the map the one before wrote: two
	// steps ending together must not each write a map without the other.
	select {
	case l.checkpoint <- struct{}{}:
	case <-c.Done():
		return "", storeErr("checkpoint "+op, fmt.Errorf("waiting for the checkpoint before it: %w", c.Err()))
	}
	defer func() { <-l.checkpoint }()
	l.stepsMu.Lock()
	steps := make(map[string]string, len(l.steps)+1)
	maps.Copy(steps, l.steps)
	l.stepsMu.Unlock()
	steps[op] = out
	if err := checkCheckpoints(steps); err != nil {
		return "", err
	}
	if err := l.e.store.Checkpoint(c, l.Key, l.Fence, steps); err != nil {
		return "", storeErr("checkpoint "+op, err)
	}
	l.stepsMu.Lock()
	l.steps = steps
	l.stepsMu.Unlock()
	return out, nil
}

// maxCheckpoints bounds the JSON of one task's step results: MySQL keeps
// them in a TEXT column of the record (64 KiB, migration 007), where a
// larger map fails in strict mode and is cut short otherwise.
const maxCheckpoints = 60 << 10

// checkCheckpoints refuses a map of step results the record cannot hold, as
// FINAL: retrying cannot make it fit, and the step has already run.
func checkCheckpoints(steps map[string]string) error {
	b, err := json.Marshal(steps)
	if err == nil && len(b) > maxCheckpoints {
		err = fmt.Errorf("%d step results take %d bytes, over the %d one task's record holds: keep large outputs in objects and checkpoint their keys",
			len(steps), len(b), maxCheckpoints)
	}
	if err != nil {
		return Final("checkpoints_too_large", err)
	}
	return nil
}

// KeepAlive renews the lease every third of its length until stop is called.
// The returned context is cancelled with cause ErrLeaseLost when the fence
// moved on, or when no renewal succeeded for a whole lease: past that point
// another worker may legitimately own the key.
func (l *Lease) KeepAlive(ctx context.Context) (context.Context, func()) {
	kctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(max(l.lease/3, 10*time.Millisecond))
		defer t.Stop()
		lastOK := l.e.now()
		for {
			select {
			case <-done:
				return
			case <-kctx.Done():
				return
			case <-t.C:
			}
			err := l.Renew(kctx)
			switch {
			case err == nil:
				lastOK = l.e.now()
			case errors.Is(err, ErrLeaseLost):
				l.e.o.log.WarnContext(ctx, "lease lost; stopping work", "fence", l.Fence)
				cancel(ErrLeaseLost)
				return
			case l.e.now().Sub(lastOK) >= l.lease:
				l.e.o.log.WarnContext(ctx, "lease could not be renewed for a whole lease; stopping work",
					"fence", l.Fence, "error", err.Error())
				cancel(ErrLeaseLost)
				return
			}
		}
	}()
	// stop waits for the renewer to exit, so that no renewal (and no RUNNING
	// mirror in the fast layer) lands after the terminal write that follows.
	var once sync.Once
	return kctx, func() { once.Do(func() { close(done); cancel(nil); <-exited }) }
}

// Finisher holds a SUCCEEDED record's pending finish: the work after the
// completion (publish the result, notify), done once per key. Whoever holds
// it ends it with Done or Fail; if the holder dies, the finish is claimed
// again after its lease ([Engine.ClaimFinish]) and the sweeper lists it.
type Finisher struct {
	e     *Engine
	Key   string
	Owner string
	// OriginRequestID is the request id the record keeps
	// (driver.Record.OriginRequestID): the task's, whichever delivery
	// holds the finish.
	OriginRequestID string
	try             int
	fence           int64         // the fence the finish is held at (a finish takeover moves it)
	lease           time.Duration // the finish lease's length
	taken           time.Time     // when the statement that took (or last renewed) it was sent
}

// ClaimFinish asks for key's pending finish for owner at try (the same rule
// as a claim: the holder's own later try takes it at once, a copy of the
// same try waits). The Finisher is nil unless the decision is owned; it is
// REPEAT_DONE when no finish is pending and REPEAT_OTHER while another
// holder's lease runs.
func (e *Engine) ClaimFinish(ctx context.Context, key, owner string, try int) (driver.ClaimResult, *Finisher, error) {
	lease := e.o.lease
	if left, ok := e.until(ctx); ok {
		lease = min(lease, left)
	}
	if lease <= 0 {
		return driver.ClaimResult{}, nil, Retryable("timeout", context.DeadlineExceeded)
	}
	sent := e.now()
	res, err := e.store.ClaimFinish(ctx, driver.FinishRequest{Key: key, Owner: owner, Try: try, Lease: lease})
	if err != nil {
		return driver.ClaimResult{}, nil, storeErr("claim finish", err)
	}
	codeFailedFinish(&res.Record)
	if !res.Decision.Owned() {
		return res, nil, nil
	}
	// The fast layer and the cache name the holder that completed the key
	// (or last took the finish): name this one, so that its request's
	// copies ask for the finish and the previous holder's do not
	// (docs/design.md §7).
	e.cache.forget(key)
	e.fastDo(ctx, "take finish", func(c context.Context) error {
		return e.fast.TakeFinish(c, key, owner, try, res.Record.Fence)
	})
	return res, &Finisher{e: e, Key: key, Owner: owner, OriginRequestID: res.Record.OriginRequestID, try: try,
		fence: res.Record.Fence, lease: lease, taken: sent}, nil
}

// Hold makes sure the finish is still this holder's before a side effect
// the next holder would repeat (the notify POST), and returns ctx bounded
// to end a tenth of a lease before the finish lease does: no other holder
// can take the finish over while the effect runs (docs/design.md §13).
// Once a third of the lease has passed since it was taken, Hold first
// renews it (one fenced statement); ErrLeaseLost means another holder took
// the finish over, or it is no longer pending: do not do the effect. The
// lease's end is estimated on this process's monotonic clock from before
// the statement that set it was sent, so it never falls after the store's
// own, whatever the two clocks say. (This process's clock is the engine's,
// WithClock; the context's deadline is an instant on it.)
func (f *Finisher) Hold(ctx context.Context) (context.Context, context.CancelFunc, error) {
	now := f.e.now()
	if now.Sub(f.taken) >= f.lease/3 {
		lease := f.e.o.lease
		if left, ok := f.e.until(ctx); ok {
			lease = min(lease, left)
		}
		if lease <= 0 {
			return nil, nil, Retryable("timeout", context.DeadlineExceeded)
		}
		if err := f.e.store.Renew(ctx, f.Key, f.fence, lease); err != nil {
			return nil, nil, storeErr("renew finish", err)
		}
		f.taken, f.lease = now, lease
	}
	end := f.taken.Add(f.lease - f.lease/10)
	if !f.e.now().Before(end) {
		return nil, nil, Retryable("timeout", fmt.Errorf("finish lease of %s about to end: %w", f.Key, context.DeadlineExceeded))
	}
	c, cancel := context.WithDeadline(ctx, end)
	return c, cancel, nil
}

// Done records the finish done.
func (f *Finisher) Done(ctx context.Context) error {
	c, cancel := detached(ctx)
	defer cancel()
	return storeErr("finish", f.e.store.Finish(c, f.Key, f.Owner, f.try, f.fence, nil))
}

// DoneLater records the finish done in a later batch write, shared with
// other finishes of the process (see [WithFinishBatch]): a finish of a task
// without side effects to repeat (one that only published its result) need
// not cost a statement of its own. A batch lost with the process leaves the
// finish pending: the sweeper takes it up again after its lease and grace,
// which publishes again (a no-op). Use Done when a repeat would be seen, as
// a second notification would.
func (f *Finisher) DoneLater() { f.e.marks.add(f.e, f.Key) }

// Fail records a FINAL cause as the finish failed (an operator's replay
// reopens it); a retryable one releases the finish, still pending, to the
// next holder at once (the same request's retry, a replay, or the sweeper
// after its grace).
func (f *Finisher) Fail(ctx context.Context, cause error) error {
	fail := failure(cause)
	c, cancel := detached(ctx)
	defer cancel()
	if err := f.e.store.Finish(c, f.Key, f.Owner, f.try, f.fence, &fail); err != nil {
		return storeErr("fail finish", err)
	}
	if fail.Final {
		// The fast layer and the local cache hold the SUCCEEDED answer
		// without the failure (a terminal entry at the same fence stays):
		// drop them, so the next delivery reads the failure from the store.
		f.e.cache.forget(f.Key)
		f.e.fastDo(ctx, "forget", func(c context.Context) error { return f.e.fast.Forget(c, f.Key) })
	}
	return nil
}
