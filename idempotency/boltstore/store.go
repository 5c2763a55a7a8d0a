// Package boltstore is the embedded durable store for runs without servers
// (MYSQL_DSN unset): one bbolt file under STATE_DIR. bbolt serialises write
// transactions, so a claim is decided and written atomically; the file
// survives restarts. It keeps the driver.Store contract for goroutines
// of one process; bbolt's file lock keeps a second process out (it waits, then
// fails with a clear error) — several processes need MySQL.
package boltstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/idemgate/idemgate/idempotency/driver"
)

var (
	records = []byte("idempotency_record")
	replays = []byte("idempotency_replay")
)

// Store implements driver.Store on a bbolt file.
type Store struct {
	db  *bolt.DB
	now func() time.Time
}

var (
	_ driver.Store     = (*Store)(nil)
	_ driver.NowReader = (*Store)(nil)
)

// Option configures a Store.
type Option func(*Store)

// WithClock makes now the store's clock (default time.Now; nil keeps it), on which it
// stamps and compares leases as a database does on its own: a test of a
// process whose clock is not the store's.
func WithClock(now func() time.Time) Option {
	return func(s *Store) {
		if now != nil {
			s.now = now
		}
	}
}

// ErrLocked: another process holds the store's file (bbolt's file lock).
// Nothing was read or written; the store is unavailable to this process
// until that one exits.
var ErrLocked = errors.New("boltstore: locked")

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// FileName is the database file inside STATE_DIR.
const FileName = "idempotency.db"

// Open opens (creating) dir/idempotency.db, waiting up to lockWait for another
// process that holds it.
func Open(dir string, lockWait time.Duration, opts ...Option) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("boltstore: state dir: %w", err)
	}
	path := filepath.Join(dir, FileName)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockWait})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("%w: %s is held by %s, still after %s (the embedded store serves one process at a time: "+
				"stop that one, or give this command another STATE_DIR, or use MYSQL_DSN for several)", ErrLocked, absPath(path),
				holderOf(path), lockWait)
		}
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{records, replays} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("boltstore: init: %w", err)
	}
	s := &Store{db: db, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

// DB exposes the bbolt handle (operators' tools, tests).
func (s *Store) DB() *bolt.DB { return s.db }

func get(b *bolt.Bucket, key string) (driver.Record, error) {
	v := b.Get([]byte(key))
	if v == nil {
		return driver.Record{}, driver.ErrNotFound
	}
	var r driver.Record
	if err := json.Unmarshal(v, &r); err != nil {
		return r, fmt.Errorf("boltstore: record %s is corrupt: %w", key, err)
	}
	return r, driver.CheckTombstone(r)
}

// getIf reads key for a guarded write: ErrLeaseLost unless it exists and
// holds.
func getIf(b *bolt.Bucket, key string, holds func(driver.Record) bool) (driver.Record, error) {
	rec, err := get(b, key)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		return rec, driver.ErrLeaseLost
	case err != nil:
		return rec, err
	case !holds(rec):
		return rec, driver.ErrLeaseLost
	}
	return rec, nil
}

func put(b *bolt.Bucket, r driver.Record) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return b.Put([]byte(r.Key), v)
}

// Get reads one record.
func (s *Store) Get(ctx context.Context, key string) (driver.Record, error) {
	var r driver.Record
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		r, err = get(tx.Bucket(records), key)
		return err
	})
	return r, err
}

// GetNow reads one record and the store's now (driver.NowReader).
func (s *Store) GetNow(ctx context.Context, key string) (driver.Record, time.Time, error) {
	r, err := s.Get(ctx, key)
	return r, s.now(), err
}

// Claim inserts or decides a takeover inside one write transaction. A claim
// that writes nothing (a terminal record, another owner's live lease, another
// payload: most duplicates) is answered from a read transaction first, which
// bbolt runs beside others and ends without a commit or an fsync; a committed
// state read there is the state at that point, as the write transaction
// would have seen it. Any other claim decides again in the write transaction.
func (s *Store) Claim(ctx context.Context, req driver.ClaimRequest) (driver.ClaimResult, error) {
	if res, ok, err := s.peek(ctx, req); err != nil || ok {
		return res, err
	}
	var res driver.ClaimResult
	err := s.update(ctx, func(b *bolt.Bucket) (err error) {
		res, err = claim(b, req, s.now())
		return err
	})
	return res, err
}

// peek decides req on the committed record in a read transaction; ok is
// false when the claim must write (no record yet, or a takeover).
func (s *Store) peek(ctx context.Context, req driver.ClaimRequest) (res driver.ClaimResult, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return res, false, err
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		rec, err := get(tx.Bucket(records), req.Key)
		if errors.Is(err, driver.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		now := s.now()
		if d, act := driver.Decide(rec, req, now); act == driver.ActNone {
			res, ok = answer(d, act, rec, now), true
		}
		return nil
	})
	return res, ok, err
}

func claim(b *bolt.Bucket, req driver.ClaimRequest, now time.Time) (driver.ClaimResult, error) {
	rec, err := get(b, req.Key)
	if errors.Is(err, driver.ErrNotFound) {
		rec = driver.NewRecord(req, now)
		return driver.ClaimResult{Decision: driver.DecisionFirst, Record: rec, LeaseLeft: req.Lease,
			Source: "embedded"}, put(b, rec)
	}
	if err != nil {
		return driver.ClaimResult{}, err
	}
	d, act := driver.Decide(rec, req, now)
	if act != driver.ActNone {
		driver.Apply(&rec, act, req, now)
		if err := put(b, rec); err != nil {
			return driver.ClaimResult{}, err
		}
	}
	return answer(d, act, rec, now), nil
}

// answer is the result of decision d (and act) on rec as it now stands.
func answer(d driver.Decision, act driver.Action, rec driver.Record, now time.Time) driver.ClaimResult {
	res := driver.ClaimResult{Decision: d, Record: rec, Source: "embedded", Salvage: act == driver.ActSalvage}
	if rec.Status == driver.StatusRunning && rec.LeaseUntil.After(now) {
		res.LeaseLeft = rec.LeaseUntil.Sub(now)
	}
	return res
}

func (s *Store) update(ctx context.Context, fn func(b *bolt.Bucket) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return fn(tx.Bucket(records)) })
}

// guarded applies mutate to the record when it is RUNNING with fence.
func (s *Store) guarded(ctx context.Context, key string, fence int64, mutate func(*driver.Record, time.Time)) error {
	return s.fenced(ctx, key, fence, func(r driver.Record) bool { return r.Status == driver.StatusRunning }, mutate)
}

// fenced applies mutate to the record when it is at fence and held says so.
func (s *Store) fenced(ctx context.Context, key string, fence int64, held func(driver.Record) bool,
	mutate func(*driver.Record, time.Time)) error {
	return s.update(ctx, func(b *bolt.Bucket) error {
		rec, err := getIf(b, key, func(r driver.Record) bool { return r.Fence == fence && held(r) })
		if err != nil {
			return err
		}
		now := s.now()
		mutate(&rec, now)
		rec.UpdatedAt, rec.SweepAfter = now, time.Time{} // a deferral was made for the record as listed
		return put(b, rec)
	})
}

// Checkpoint records the step results under the fence.
func (s *Store) Checkpoint(ctx context.Context, key string, fence int64, steps map[string]string) error {
	return s.guarded(ctx, key, fence, func(r *driver.Record, _ time.Time) { r.Steps = steps })
}

// MarkFinished records the pending finishes of keys done, in one
// transaction.
func (s *Store) MarkFinished(ctx context.Context, keys []string) error {
	return s.update(ctx, func(b *bolt.Bucket) error {
		now := s.now()
		for _, k := range keys {
			rec, err := get(b, k)
			if errors.Is(err, driver.ErrNotFound) || (err == nil &&
				(rec.Status != driver.StatusSucceeded || rec.Finish != driver.FinishPending)) {
				continue
			}
			if err != nil {
				return err
			}
			rec.Finish, rec.LeaseUntil, rec.UpdatedAt = driver.FinishDone, time.Time{}, now
			if err := put(b, rec); err != nil {
				return err
			}
		}
		return nil
	})
}

// Renew extends the lease held at fence (a task's or a pending finish's)
// by d from now.
func (s *Store) Renew(ctx context.Context, key string, fence int64, d time.Duration) error {
	return s.fenced(ctx, key, fence, driver.Leased, func(r *driver.Record, now time.Time) { r.LeaseUntil = now.Add(d) })
}

// Complete records SUCCEEDED, with a finish pending under the completing
// owner when c asks for one.
func (s *Store) Complete(ctx context.Context, key string, fence int64, c driver.Completion) error {
	return s.guarded(ctx, key, fence, func(r *driver.Record, now time.Time) {
		r.Status, r.ResultRef, r.LeaseUntil, r.LastErrorCode, r.LastError = driver.StatusSucceeded, c.ResultRef, time.Time{}, "", ""
		r.Finish = driver.FinishNone
		if c.FinishLease > 0 {
			// A copy's mark (driver.ActMarkTry) stays: FC's retry of the
			// copy must not count as the holder's later try.
			r.Finish, r.LeaseUntil, r.LeaseTry = driver.FinishPending, now.Add(c.FinishLease), max(r.LeaseTry, c.Try)
		}
	})
}

// ClaimFinish takes over a pending finish, or marks a copy's try (driver.ApplyFinish).
func (s *Store) ClaimFinish(ctx context.Context, req driver.FinishRequest) (driver.ClaimResult, error) {
	var res driver.ClaimResult
	err := s.update(ctx, func(b *bolt.Bucket) error {
		rec, err := get(b, req.Key)
		if err != nil {
			return err
		}
		var write bool
		res, write = driver.ApplyFinish(&rec, req, s.now())
		res.Source = "embedded"
		if !write {
			return nil
		}
		return put(b, rec)
	})
	return res, err
}

// Finish ends the pending finish held by owner under fence (every finish
// claim moves the fence; try may have been marked past by a copy).
func (s *Store) Finish(ctx context.Context, key, owner string, _ int, fence int64, f *driver.Failure) error {
	return s.update(ctx, func(b *bolt.Bucket) error {
		rec, err := getIf(b, key, func(r driver.Record) bool {
			return r.Status == driver.StatusSucceeded && r.Finish == driver.FinishPending && r.LeaseOwner == owner && r.Fence == fence
		})
		if err != nil {
			return err
		}
		now := s.now()
		switch {
		case f == nil:
			rec.Finish, rec.LeaseUntil, rec.UpdatedAt = driver.FinishDone, time.Time{}, now
		case f.Final:
			rec.Finish, rec.LeaseUntil, rec.UpdatedAt = driver.FinishFailed, time.Time{}, now
			rec.LastErrorCode, rec.LastError = f.Code, f.Message
		default: // released: still pending, claimable at once, and behind the sweeper's other work
			rec.LeaseUntil, rec.UpdatedAt = now, now
		}
		return put(b, rec)
	})
}

// Fail records a classified failure.
func (s *Store) Fail(ctx context.Context, key string, fence int64, f driver.Failure) error {
	return s.guarded(ctx, key, fence, func(r *driver.Record, now time.Time) {
		r.Status, r.RetryAfter = driver.StatusFailedRetryable, time.Time{}
		if f.Final {
			r.Status = driver.StatusFailedFinal
		} else if f.RetryAfter > 0 {
			r.RetryAfter = now.Add(f.RetryAfter)
		}
		r.LastErrorCode, r.LastError, r.LeaseUntil = f.Code, f.Message, time.Time{}
	})
}
