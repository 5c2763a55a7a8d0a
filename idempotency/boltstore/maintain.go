package boltstore

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/keys"
)

var stats = []byte("idempotency_stats")

// Candidates lists the task records the sweeper should re-drive (see
// mysqlstore.Store.Candidates). A local store is small: a scan is fine.
func (s *Store) Candidates(ctx context.Context, limit int, grace time.Duration) ([]idempotency.Record, error) {
	now := s.now()
	var out, done []idempotency.Record
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(records)
		return b.ForEach(func(_, v []byte) error {
			var r idempotency.Record
			if err := json.Unmarshal(v, &r); err != nil || r.ParentKey != "" {
				return nil
			}
			switch {
			case r.Status == idempotency.StatusRunning && !now.Before(r.LeaseUntil):
				out = append(out, r)
			case (r.Status == idempotency.StatusFailedRetryable || r.Status == idempotency.StatusReceived) &&
				r.UpdatedAt.Before(now.Add(-grace)):
				out = append(out, r)
			case r.Status == idempotency.StatusSucceeded && r.UpdatedAt.Before(now.Add(-grace)) && r.UpdatedAt.After(now.Add(-24*time.Hour)):
				p, perr := get(b, keys.OpKey(r.Key, "publish"))
				n, nerr := get(b, keys.OpKey(r.Key, "notify"))
				unfinished := func(s idempotency.Status) bool {
					return s != idempotency.StatusSucceeded && s != idempotency.StatusFailedFinal
				}
				if perr != nil || unfinished(p.Status) || (nerr == nil && unfinished(n.Status)) {
					done = append(done, r)
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	byAge := func(rs []idempotency.Record) {
		sort.Slice(rs, func(i, j int) bool { return rs[i].UpdatedAt.Before(rs[j].UpdatedAt) })
	}
	byAge(out)
	byAge(done)
	out = append(out, done...)
	return out[:min(limit, len(out))], nil
}

// Reset prepares an audited replay (see mysqlstore.Store.Reset).
func (s *Store) Reset(ctx context.Context, key string, rp idempotency.Replay) (idempotency.Record, error) {
	var prior idempotency.Record
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(records)
		rec, err := get(b, key)
		if err != nil && !errors.Is(err, idempotency.ErrNotFound) {
			return err
		}
		prior = rec // zero when there is no record: the audit row says so
		now := s.now()
		reset := false
		if err == nil {
			if reset, err = idempotency.Resettable(rec, now); err != nil {
				return err
			}
		}
		if reset {
			rec.Status, rec.LeaseUntil, rec.UpdatedAt = idempotency.StatusReceived, time.Time{}, now
			if err := put(b, rec); err != nil {
				return err
			}
		}
		if reset || rec.Status == idempotency.StatusSucceeded {
			// Failed steps of this key start over too (after a SUCCEEDED
			// result: publish and notify).
			// bbolt forbids writes during ForEach: collect, then write.
			var failed []idempotency.Record
			if err := b.ForEach(func(k, v []byte) error {
				var st idempotency.Record
				if json.Unmarshal(v, &st) == nil && st.ParentKey == key &&
					(st.Status == idempotency.StatusFailedFinal || st.Status == idempotency.StatusFailedRetryable) {
					failed = append(failed, st)
				}
				return nil
			}); err != nil {
				return err
			}
			for _, st := range failed {
				st.Status, st.LeaseUntil, st.UpdatedAt = idempotency.StatusReceived, time.Time{}, now
				if err := put(b, st); err != nil {
					return err
				}
			}
		}
		rp.Key, rp.PriorStatus, rp.CreatedAt = key, prior.Status, now
		rb := tx.Bucket(replays)
		seq, _ := rb.NextSequence()
		v, err := json.Marshal(rp)
		if err != nil {
			return err
		}
		return rb.Put(binary.BigEndian.AppendUint64([]byte(key+"/"), seq), v)
	})
	return prior, err
}

// Replays lists the audit rows of key, oldest first.
func (s *Store) Replays(ctx context.Context, key string) ([]idempotency.Replay, error) {
	var out []idempotency.Replay
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(replays).Cursor()
		prefix := []byte(key + "/")
		for k, v := c.Seek(prefix); k != nil && len(k) >= len(prefix) && string(k[:len(prefix)]) == string(prefix); k, v = c.Next() {
			var r idempotency.Replay
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
func (s *Store) AddStats(ctx context.Context, rows []idempotency.StatRow) error {
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
func (s *Store) Stats(ctx context.Context, since time.Time) ([]idempotency.StatRow, error) {
	var out []idempotency.StatRow
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
			out = append(out, idempotency.StatRow{Minute: m, Name: name, Count: int64(binary.BigEndian.Uint64(v))})
		}
		return nil
	})
	return out, err
}
