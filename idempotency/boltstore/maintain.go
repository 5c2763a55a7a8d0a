package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/idemgate/idemgate/idempotency/driver"
)

var stats = []byte("idempotency_stats")

// Candidates lists the task records the sweeper should take up (see
// driver.Maintainer). A local store is small: a scan is fine.
func (s *Store) Candidates(ctx context.Context, limit int, grace time.Duration) ([]driver.Record, error) {
	now := s.now()
	var out []driver.Record
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(records).ForEach(func(_, v []byte) error {
			var r driver.Record
			if err := json.Unmarshal(v, &r); err != nil || r.ParentKey != "" {
				return nil
			}
			if !r.Tombstone && due(r, now, grace) { // nothing to take up in a tombstone, nor in a malformed one
				out = append(out, r)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].UpdatedAt.Before(out[j].UpdatedAt) })
	return out[:min(limit, len(out))], nil
}

// due is the sweeper's rule of driver.Maintainer.Candidates.
func due(r driver.Record, now time.Time, grace time.Duration) bool {
	if now.Before(r.SweepAfter) {
		return false
	}
	switch r.Status {
	case driver.StatusRunning:
		return !now.Before(r.LeaseUntil)
	case driver.StatusFailedRetryable, driver.StatusReceived:
		return !r.UpdatedAt.After(now.Add(-grace))
	case driver.StatusSucceeded:
		return r.Finish == driver.FinishPending && !r.LeaseUntil.After(now.Add(-grace))
	}
	return false
}

// Defer sets the record aside for d if it is still as listed.
func (s *Store) Defer(ctx context.Context, listed driver.Record, d time.Duration) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(records)
		rec, err := get(b, listed.Key)
		if err != nil || rec.Fence != listed.Fence || rec.Status != listed.Status || !rec.UpdatedAt.Equal(listed.UpdatedAt) {
			return err
		}
		rec.SweepAfter = s.now().Add(d)
		return put(b, rec)
	})
}

// Reset performs an audited operator reset (driver.ApplyReset); the
// steps it checkpointed stay.
func (s *Store) Reset(ctx context.Context, key string, rp driver.Replay) (prior, after driver.Record, err error) {
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(records)
		rec, err := get(b, key)
		if err != nil && !errors.Is(err, driver.ErrNotFound) {
			return err
		}
		now := s.now()
		prior = rec // zero when there is no record: the audit row says so
		if err == nil {
			kind, err := driver.ApplyReset(&rec, rp, now)
			if err != nil {
				return err
			}
			if kind != driver.ResetNothing {
				if err := put(b, rec); err != nil {
					return err
				}
			}
		}
		after = rec
		return audit(tx, key, prior.Status, rp, now)
	})
	return prior, after, err
}

func audit(tx *bolt.Tx, key string, prior driver.Status, rp driver.Replay, now time.Time) error {
	rp.Key, rp.PriorStatus, rp.CreatedAt = key, prior, now
	rb := tx.Bucket(replays)
	seq, _ := rb.NextSequence()
	v, err := json.Marshal(rp)
	if err != nil {
		return err
	}
	return rb.Put(binary.BigEndian.AppendUint64([]byte(key+"/"), seq), v)
}

// Replays lists the audit rows of key, oldest first.
func (s *Store) Replays(ctx context.Context, key string) ([]driver.Replay, error) {
	var out []driver.Replay
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(replays).Cursor()
		prefix := []byte(key + "/")
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var r driver.Replay
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("replay row %q: %w", k, err)
			}
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

// AddStats adds per-minute counters.
func (s *Store) AddStats(ctx context.Context, rows []driver.StatRow) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(stats)
		if err != nil {
			return err
		}
		for _, r := range rows {
			k := []byte(r.Minute.UTC().Truncate(time.Minute).Format(time.RFC3339) + "/" + r.Name)
			var n int64
			if v := b.Get(k); len(v) == 8 {
				n = int64(binary.BigEndian.Uint64(v))
			}
			if err := b.Put(k, binary.BigEndian.AppendUint64(nil, uint64(n+r.Count))); err != nil {
				return err
			}
		}
		return nil
	})
}

// Stats reads the counters from since on.
func (s *Store) Stats(ctx context.Context, since time.Time) ([]driver.StatRow, error) {
	var out []driver.StatRow
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(stats)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek([]byte(since.UTC().Truncate(time.Minute).Format(time.RFC3339))); k != nil; k, v = c.Next() {
			minute, name, _ := strings.Cut(string(k), "/")
			m, err := time.Parse(time.RFC3339, minute)
			if err != nil || len(v) != 8 {
				continue
			}
			out = append(out, driver.StatRow{Minute: m, Name: name, Count: int64(binary.BigEndian.Uint64(v))})
		}
		return nil
	})
	return out, err
}
