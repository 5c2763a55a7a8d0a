package driver_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/idemtest"
)

// memStore is a complete driver.Store kept in a map: what a custom store
// (DynamoDB, Tablestore, PostgreSQL…) implements. The state machine is
// driver's, so it decides every claim as mysqlstore and boltstore do; the
// store's own part is atomicity (here one mutex) and its clock.
type memStore struct {
	mu   sync.Mutex
	recs map[string]driver.Record
}

func newMemStore() *memStore { return &memStore{recs: map[string]driver.Record{}} }

// load copies a record out (its Steps map included), so no caller shares
// the stored one.
func (s *memStore) load(key string) (driver.Record, bool) {
	r, ok := s.recs[key]
	r.Steps = maps.Clone(r.Steps)
	return r, ok
}

func (s *memStore) save(r driver.Record) { r.Steps = maps.Clone(r.Steps); s.recs[r.Key] = r }

func (s *memStore) Claim(_ context.Context, req driver.ClaimRequest) (driver.ClaimResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	rec, ok := s.load(req.Key)
	if !ok {
		rec = driver.NewRecord(req, now)
		s.save(rec)
		return driver.ClaimResult{Decision: driver.DecisionFirst, Record: rec, LeaseLeft: req.Lease, Source: "memory"}, nil
	}
	d, act := driver.Decide(rec, req, now)
	if act != driver.ActNone {
		driver.Apply(&rec, act, req, now)
		s.save(rec)
	}
	res := driver.ClaimResult{Decision: d, Record: rec, Source: "memory", Salvage: act == driver.ActSalvage}
	if rec.Status == driver.StatusRunning && rec.LeaseUntil.After(now) {
		res.LeaseLeft = rec.LeaseUntil.Sub(now)
	}
	return res, nil
}

// guarded changes the record only while key is RUNNING at fence: the
// fence is what keeps a worker that lost its lease from writing.
func (s *memStore) guarded(key string, fence int64, change func(*driver.Record, time.Time)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.load(key)
	if !ok || rec.Fence != fence || rec.Status != driver.StatusRunning {
		return driver.ErrLeaseLost
	}
	now := time.Now()
	change(&rec, now)
	rec.UpdatedAt, rec.SweepAfter = now, time.Time{}
	s.save(rec)
	return nil
}

func (s *memStore) Renew(_ context.Context, key string, fence int64, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.load(key)
	if !ok || rec.Fence != fence || !driver.Leased(rec) {
		return driver.ErrLeaseLost
	}
	rec.LeaseUntil = time.Now().Add(d)
	s.save(rec)
	return nil
}

func (s *memStore) Checkpoint(_ context.Context, key string, fence int64, steps map[string]string) error {
	return s.guarded(key, fence, func(r *driver.Record, _ time.Time) { r.Steps = steps })
}

func (s *memStore) Complete(_ context.Context, key string, fence int64, c driver.Completion) error {
	return s.guarded(key, fence, func(r *driver.Record, now time.Time) {
		r.Status, r.ResultRef, r.LeaseUntil, r.LastErrorCode, r.LastError = driver.StatusSucceeded, c.ResultRef, time.Time{}, "", ""
		r.Finish = driver.FinishNone
		if c.FinishLease > 0 {
			r.Finish, r.LeaseUntil, r.LeaseTry = driver.FinishPending, now.Add(c.FinishLease), max(r.LeaseTry, c.Try) // a copy's mark stays
		}
	})
}

func (s *memStore) Fail(_ context.Context, key string, fence int64, f driver.Failure) error {
	return s.guarded(key, fence, func(r *driver.Record, now time.Time) {
		r.Status, r.RetryAfter = driver.StatusFailedRetryable, time.Time{}
		if f.Final {
			r.Status = driver.StatusFailedFinal
		} else if f.RetryAfter > 0 {
			r.RetryAfter = now.Add(f.RetryAfter)
		}
		r.LastErrorCode, r.LastError, r.LeaseUntil = f.Code, f.Message, time.Time{}
	})
}

func (s *memStore) ClaimFinish(_ context.Context, req driver.FinishRequest) (driver.ClaimResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.load(req.Key)
	if !ok {
		return driver.ClaimResult{}, driver.ErrNotFound
	}
	res, write := driver.ApplyFinish(&rec, req, time.Now())
	res.Source = "memory"
	if write {
		s.save(rec)
	}
	return res, nil
}

func (s *memStore) Finish(_ context.Context, key, owner string, _ int, fence int64, f *driver.Failure) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.load(key)
	if !ok || rec.Status != driver.StatusSucceeded || rec.Finish != driver.FinishPending ||
		rec.LeaseOwner != owner || rec.Fence != fence {
		return driver.ErrLeaseLost
	}
	now := time.Now()
	switch {
	case f == nil:
		rec.Finish, rec.LeaseUntil = driver.FinishDone, time.Time{}
	case f.Final:
		rec.Finish, rec.LeaseUntil, rec.LastErrorCode, rec.LastError = driver.FinishFailed, time.Time{}, f.Code, f.Message
	default: // released: claimable at once
		rec.LeaseUntil = now
	}
	rec.UpdatedAt = now
	s.save(rec)
	return nil
}

func (s *memStore) MarkFinished(_ context.Context, keys []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		if rec, ok := s.load(k); ok && rec.Status == driver.StatusSucceeded && rec.Finish == driver.FinishPending {
			rec.Finish, rec.LeaseUntil, rec.UpdatedAt = driver.FinishDone, time.Time{}, time.Now()
			s.save(rec)
		}
	}
	return nil
}

func (s *memStore) Get(_ context.Context, key string) (driver.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec, ok := s.load(key); ok {
		return rec, nil
	}
	return driver.Record{}, driver.ErrNotFound
}

// The custom store passes the conformance suite every store must pass.
func TestMemStoreConformance(t *testing.T) {
	idemtest.Run(t, idemtest.StoreOnly(newMemStore()))
}

// A custom store: implement driver.Store with driver's state machine,
// prove it with idemtest.Run (TestMemStoreConformance above), hand it to
// idempotency.New.
func Example_customStore() {
	eng := idempotency.New(newMemStore())
	req := idempotency.ClaimRequest{Key: "order-7:charge", PayloadHash: "h1", Owner: "delivery-1"}
	for _, owner := range []string{"delivery-1", "delivery-2"} {
		req.Owner = owner
		out, err := eng.Do(context.Background(), req, func(context.Context, *idempotency.Lease) (string, error) {
			fmt.Println("charging")
			return "receipt-9", nil
		})
		fmt.Println(out.Decision, out.ResultRef, err)
	}
	// Output:
	// charging
	// FIRST receipt-9 <nil>
	// REPEAT_DONE receipt-9 <nil>
}
