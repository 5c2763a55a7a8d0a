package explore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/handler/llm"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/ossresult"
)

// Every call a process makes to the outside goes through call: a yield
// before (where the call may be failed instead of made) and after (where it
// may be reported failed although it happened: a commit whose answer was
// lost), and nothing at all once the process is dead.
var (
	errDead     = errors.New("explore: the process is dead")
	errInjected = errors.New("explore: injected failure")
)

func call(a *actor, point string, failure error, fn func() error) error {
	if a.dead.Load() {
		return errDead
	}
	if a.yield(point, failure != nil) == fail {
		a.w.spoil(a)
		return failure
	}
	err := fn()
	a.lastCall = point
	if a.yield(point+" done", failure != nil) == fail && err == nil {
		err = failure
	}
	if err != nil {
		a.w.spoil(a)
	}
	return err
}

// storeErr is a dropped connection, as the driver reports it.
var storeErr = fmt.Errorf("%w: driver: bad connection", errInjected)

type storeW struct {
	a *actor
	s driver.Maintainer
}

func (s *storeW) w() *world { return s.a.w }

func (s *storeW) Claim(ctx context.Context, req idempotency.ClaimRequest) (r driver.ClaimResult, err error) {
	err = call(s.a, "store.Claim "+req.Key, storeErr, func() error {
		if r, err = s.s.Claim(ctx, req); err == nil && r.Decision.Owned() {
			s.w().checkBackoff(s.a, req, r)
			s.w().claimed(s.a, req.Key, r.Record.Fence, r.Decision == driver.DecisionFirst)
		} else if err == nil {
			s.w().noteCopy(s.a, req, r)
			s.w().noteMark(s.a, req, r)
		}
		if err == nil {
			s.w().claimAnswered(s.a, r.Record.LeaseOwner)
		}
		return err
	})
	return r, err
}

func (s *storeW) Renew(ctx context.Context, key string, fence int64, d time.Duration) error {
	return call(s.a, "store.Renew "+key, storeErr, func() error {
		return s.fenced("Renew", key, fence, func() error { return s.s.Renew(ctx, key, fence, d) })
	})
}

func (s *storeW) Checkpoint(ctx context.Context, key string, fence int64, steps map[string]string) error {
	return call(s.a, "store.Checkpoint "+key, storeErr, func() error {
		return s.fenced("Checkpoint", key, fence, func() error { return s.s.Checkpoint(ctx, key, fence, steps) })
	})
}

// fenced runs a write guarded by fence and checks that it landed only on
// the record's current fence, RUNNING (a renewal: or a pending finish, which
// Finisher.Hold renews) (one actor runs at a time, so the record read before
// is the one the write met).
func (s *storeW) fenced(op, key string, fence int64, write func() error) error {
	before, gerr := s.s.Get(context.Background(), key)
	err := write()
	leased := before.Status == driver.StatusRunning || op == "Renew" && driver.Leased(before)
	if err == nil && (gerr != nil || before.Fence != fence || !leased) {
		s.w().violate("%s: %s with fence %d landed on %s@%d (%v)", s.a.name, op, fence, before.Status, before.Fence, gerr)
	}
	if err == nil {
		s.w().wrote(s.a, op, key, fence)
	}
	return err
}

func (s *storeW) MarkFinished(ctx context.Context, keys []string) error {
	return call(s.a, fmt.Sprintf("store.MarkFinished %v", keys), storeErr, func() error {
		err := s.s.MarkFinished(ctx, keys)
		if err == nil {
			for _, k := range keys {
				s.w().finished(s.a, k, true)
			}
		}
		return err
	})
}

func (s *storeW) Complete(ctx context.Context, key string, fence int64, c driver.Completion) error {
	return call(s.a, "store.Complete "+key, storeErr, func() error {
		return s.fenced("Complete", key, fence, func() error { return s.s.Complete(ctx, key, fence, c) })
	})
}

func (s *storeW) ClaimFinish(ctx context.Context, req driver.FinishRequest) (r driver.ClaimResult, err error) {
	err = call(s.a, "store.ClaimFinish "+req.Key, storeErr, func() error {
		if r, err = s.s.ClaimFinish(ctx, req); err == nil && r.Decision.Owned() {
			s.w().claimedFinish(s.a, req.Key)
		}
		return err
	})
	return r, err
}

func (s *storeW) Finish(ctx context.Context, key, owner string, try int, fence int64, f *driver.Failure) error {
	return call(s.a, "store.Finish "+key, storeErr, func() error {
		err := s.s.Finish(ctx, key, owner, try, fence, f)
		if err == nil {
			s.w().finished(s.a, key, f == nil)
		}
		s.w().checkFinishRefused(s.a, key, err)
		return err
	})
}

func (s *storeW) Defer(ctx context.Context, rec driver.Record, d time.Duration) error {
	return call(s.a, "store.Defer "+rec.Key, storeErr, func() error { return s.s.Defer(ctx, rec, d) })
}

func (s *storeW) Fail(ctx context.Context, key string, fence int64, f driver.Failure) error {
	return call(s.a, "store.Fail "+key+" "+f.Code, storeErr, func() error {
		if f.Final && (f.Code == "input_missing" || f.Code == "input_unreadable") {
			s.w().checkAbandon(s.a, key, f.Code)
		}
		s.w().checkFail(s.a, key, f)
		at, sent := s.w().clock(), time.Now()
		err := s.fenced("Fail", key, fence, func() error { return s.s.Fail(ctx, key, fence, f) })
		if err == nil && !f.Final {
			s.w().failedRetryable(key, fence, at)
		}
		if err == nil {
			s.w().noteBackoff(s.a, key, f, sent)
		}
		return err
	})
}

func (s *storeW) Get(ctx context.Context, key string) (r driver.Record, err error) {
	err = call(s.a, "store.Get "+key, storeErr, func() error { r, err = s.s.Get(ctx, key); return err })
	return r, err
}

// storeW is a NowReader as every store the explorer runs is: the engine's
// GetNow (a fenced-out finish holder reading who carries its finish, the
// sweeper's input horizon, a duplicate's wait) goes to the store's own
// GetNow and its clock, as in production, through the world's failures and
// crashes. Without it the engine read the record with Get and judged it on
// its wall clock: the store's GetNow never ran here.
var _ driver.NowReader = (*storeW)(nil)

// GetNow checks that the store answered a now on the clock that stamps its
// records: the world's stores' clock is the real one (warp moves stored
// instants instead), and no instant the store stamped lies ahead of it.
func (s *storeW) GetNow(ctx context.Context, key string) (r driver.Record, now time.Time, err error) {
	nr, ok := s.s.(driver.NowReader)
	if !ok { // (none of the world's stores): what the engine does without one
		r, err = s.Get(ctx, key)
		return r, time.Now(), err
	}
	err = call(s.a, "store.GetNow "+key, storeErr, func() error {
		before := time.Now()
		r, now, err = nr.GetNow(ctx, key)
		if err == nil {
			s.w().checkStoreNow(s.a, r, now, before, time.Now())
		}
		return err
	})
	return r, now, err
}

func (s *storeW) Candidates(ctx context.Context, limit int, grace time.Duration) (r []driver.Record, err error) {
	err = call(s.a, "store.Candidates", storeErr, func() error { r, err = s.s.Candidates(ctx, limit, grace); return err })
	return r, err
}

func (s *storeW) Reset(ctx context.Context, key string, rp driver.Replay) (prior, after driver.Record, err error) {
	err = call(s.a, "store.Reset "+key, storeErr, func() error {
		before, _ := s.w().be.store.Get(ctx, key)
		replays, _ := s.w().be.store.Replays(ctx, key)
		prior, after, err = s.s.Reset(ctx, key, rp)
		s.w().checkReset(s.a, key, before)
		s.w().checkTombstoneReset(s.a, key, before, len(replays), err)
		s.w().checkResetBackoff(s.a, key)
		return err
	})
	return prior, after, err
}

func (s *storeW) Replays(ctx context.Context, key string) (r []driver.Replay, err error) {
	err = call(s.a, "store.Replays "+key, storeErr, func() error { r, err = s.s.Replays(ctx, key); return err })
	return r, err
}

func (s *storeW) Stats(ctx context.Context, since time.Time) (r []driver.StatRow, err error) {
	return s.s.Stats(ctx, since)
}

// AddStats passes through: the explorer's invariants do not read counters.
func (s *storeW) AddStats(ctx context.Context, rows []driver.StatRow) error {
	return s.s.AddStats(ctx, rows)
}

// Purge checks what it retired and deleted (one actor runs at a time, so
// the records before and after are the purge's doing): it retires to a
// tombstone only a purgeable record (driver.Purgeable) unchanged for the
// retention, and deletes only a tombstone past its age.
func (s *storeW) Purge(ctx context.Context, r driver.PurgeRequest) (rep driver.PurgeReport, err error) {
	err = call(s.a, "store.Purge", storeErr, func() error {
		w := s.w()
		before := w.records()
		rep, err = s.s.Purge(ctx, r)
		after := w.records()
		w.checkPurgeKeepsFailedFinish(s.a, before, after)
		tombAge := r.TombstonesOlderThan
		if tombAge <= 0 {
			tombAge = driver.DefaultTombstoneAge
		}
		tombAge = max(tombAge, r.OlderThan)
		for k, was := range before {
			now, kept := after[k]
			age := time.Since(was.UpdatedAt)
			switch {
			case !kept:
				w.tracef("%s deleted %s (%s, tombstone %v)", s.a.name, k, was.Status, was.Tombstone)
				// (retired and deleted in one batch when it is past both ages)
				if age < tombAge || !was.Tombstone && !driver.Purgeable(was) {
					w.violate("%s: deleted %s (%s, finish %q, tombstone %v, %s old), not a tombstone past its age", s.a.name,
						k, was.Status, was.Finish, was.Tombstone, age.Round(time.Second))
				}
			case now.Tombstone && !was.Tombstone:
				w.tracef("%s retired %s (%s)", s.a.name, k, was.Status)
				if !driver.Purgeable(was) || age < r.OlderThan {
					w.violate("%s: retired %s (%s, finish %q, %s old), not purgeable or changed within the retention", s.a.name,
						k, was.Status, was.Finish, age.Round(time.Second))
				}
			}
		}
		return err
	})
	return rep, err
}

type fastW struct {
	a *actor
	f driver.FastLayer
}

var fastErr = fmt.Errorf("%w: redis: i/o timeout", errInjected)

func (f *fastW) Claim(ctx context.Context, key, owner string, try int, ph string, lease time.Duration) (ans driver.FastAnswer, err error) {
	err = call(f.a, "redis.Claim "+key, fastErr, func() error {
		ans, err = f.f.Claim(ctx, key, owner, try, ph, lease)
		if err == nil {
			f.a.w.claimAnswered(f.a, ans.Record.LeaseOwner)
		}
		if err == nil && ans.Verdict == driver.FastRepeatOther {
			f.a.fastOther[key] = true
		}
		if err == nil && (ans.Verdict == driver.FastSucceeded || ans.Verdict == driver.FastFailedFinal) {
			f.a.w.checkFastAnswer(f.a, key, ans)
		}
		return err
	})
	return ans, err
}

func (f *fastW) Publish(ctx context.Context, rec driver.Record, left time.Duration) error {
	return call(f.a, fmt.Sprintf("redis.Publish %s %s@%d", rec.Key, rec.Status, rec.Fence), fastErr,
		func() error { return f.f.Publish(ctx, rec, left) })
}

// TakeFinish is no decision point of the world (not a call): it adds no
// order to enumerate and leaves every seed's schedule as it was. Its
// failure, Redis naming the previous holder, costs statements only
// (docs/design.md §7); redisfast's and idemtest's tests judge it.
func (f *fastW) TakeFinish(ctx context.Context, key, owner string, try int, fence int64) error {
	return f.f.TakeFinish(ctx, key, owner, try, fence)
}

func (f *fastW) Release(ctx context.Context, key, owner string) error {
	return call(f.a, "redis.Release "+key, fastErr, func() error { return f.f.Release(ctx, key, owner) })
}

// Forget is the fallback of a reset's republish that failed; if it fails
// too, the entry may answer the old state until it expires: the documented
// window, which the checks then allow.
func (f *fastW) Forget(ctx context.Context, key string) error {
	err := call(f.a, "redis.Forget "+key, fastErr, func() error { return f.f.Forget(ctx, key) })
	if err != nil {
		f.a.w.staleUntil[key] = f.a.w.now + dedupTTL
	}
	return err
}

type resultsW struct {
	a *actor
	r *ossresult.Local
}

var objErr = idempotency.Retryable("temporary_unavailable", fmt.Errorf("%w: OSS 503", errInjected))

func (r *resultsW) PutOnce(ctx context.Context, key string, body []byte, ct string, m ossresult.Meta) (ref string, err error) {
	err = call(r.a, "oss.Put "+key, objErr, func() error {
		if ref, err = r.r.PutOnce(ctx, key, body, ct, m); err == nil {
			r.a.w.objects.put(r.a, key, body)
		}
		return err
	})
	return ref, err
}

func (r *resultsW) Get(ctx context.Context, key string) (b []byte, m ossresult.Meta, err error) {
	err = call(r.a, "oss.Get "+key, objErr, func() error { b, m, err = r.r.Get(ctx, key); return err })
	return b, m, err
}

func (r *resultsW) Ref(key string) string { return r.r.Ref(key) }

// model is the scripted model, shared by every process: calls are counted
// per business key (the Idempotency-Key the pipeline sends).
type model struct {
	w       *world
	scripts map[string]script
	calls   map[string]int
	prompts map[string]string // mark → prompt
	base    map[string]int    // K → calls before its current life
}

func (m *model) complete(r llm.Request) (llm.Response, error) {
	m.calls[r.Key]++
	n := m.calls[r.Key]
	switch m.scripts[r.Key] {
	case scriptFailFirst:
		if n == 1 {
			return llm.Response{}, idempotency.Retryable("rate_limited", errors.New("429"))
		}
	case scriptFinal:
		return llm.Response{}, idempotency.Final("policy_rejected", errors.New("content policy"))
	case scriptRetryAll:
		return llm.Response{}, idempotency.Retryable("temporary_unavailable", errors.New("503"))
	}
	return llm.Response{Text: fmt.Sprintf("answer %d for %s [%s]", n, r.Key, m.mark(r.Prompt)), Model: "explore"}, nil
}

type modelW struct {
	a *actor
	m *model
}

// Complete: a crash after the call has paid for it; a failure before it
// has not (the injected error is the model's 503).
func (m *modelW) Complete(ctx context.Context, r llm.Request) (resp llm.Response, err error) {
	err = call(m.a, "model "+r.Key, idempotency.Retryable("temporary_unavailable", errInjected), func() error {
		m.a.w.checkModelCall(m.a, r)
		resp, err = m.m.complete(r)
		if class, _ := idempotency.Classify(err); class == idempotency.ClassFinal {
			m.a.modelFinal[r.Key] = true
		}
		return err
	})
	return resp, err
}

// notifier counts posts per business key.
type notifier struct {
	w       *world
	posts   map[string]int
	refused map[string]bool // the receiver refused it for good
	refuses map[string]bool // the receiver will refuse its first POST (feature notifyfinal)
}

type notifyW struct {
	a *actor
	n *notifier
}

func (n *notifyW) Post(ctx context.Context, url, key, requestID string, body []byte) error {
	w := n.a.w
	var p *post
	err := call(n.a, "notify "+key, idempotency.Retryable("temporary_unavailable", errInjected), func() error {
		if err := w.pastDeadline(ctx); err != nil {
			return err
		}
		if w.feat["notifyfinal"] && n.n.refuses[key] && !n.n.refused[key] { // the receiver refuses it once, for good
			n.n.refused[key] = true
			return idempotency.Final("notify_rejected", errors.New("the receiver answered 410"))
		}
		n.n.posts[key]++
		p = w.posted(n.a, key)
		w.checkNotification(n.a, key, requestID, body, p)
		return nil
	})
	if err != nil && p != nil {
		p.spoiled = true // made, but reported failed: a repeat is allowed
	}
	return err
}
