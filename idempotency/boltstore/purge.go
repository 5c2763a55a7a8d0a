package boltstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/idemgate/idemgate/idempotency/driver"
)

// Purge deletes one bounded batch of what outlived its retention (see
// driver.Maintainer) in one write transaction: bbolt serialises
// writers, so nothing can change a record between the check and the
// delete. A local store is small: it scans.
func (s *Store) Purge(ctx context.Context, r driver.PurgeRequest) (driver.PurgeReport, error) {
	var rep driver.PurgeReport
	r, err := r.Check()
	if err != nil {
		return rep, err
	}
	err = s.update(ctx, func(b *bolt.Bucket) error {
		rep = driver.PurgeReport{}
		tx := b.Tx()
		now := s.now()
		cutoff := now.Add(-r.OlderThan)
		full, err := purgeRecords(tx, cutoff, now.Add(-r.TombstonesOlderThan), r.Limit, &rep)
		if err != nil {
			return err
		}
		n, err := purgeOrphans(tx, cutoff, r.Limit)
		if err != nil {
			return err
		}
		rep.Replays += n
		full = full || n == int64(r.Limit)
		if r.StatsOlderThan > 0 {
			if rep.Stats, err = purgeStats(tx, now.Add(-r.StatsOlderThan), r.Limit); err != nil {
				return err
			}
			full = full || rep.Stats == int64(r.Limit)
		}
		rep.More = full
		if r.DryRun {
			return errDryRun // rolls the transaction back: the counts stand, nothing went
		}
		return nil
	})
	if errors.Is(err, errDryRun) {
		err = nil
	}
	return rep, err
}

// errDryRun ends a dry run's transaction without committing it.
var errDryRun = errors.New("boltstore: purge dry run")

// purgeRecords retires (driver.Retire) up to limit purgeable records older
// than cutoff, oldest first, whose steps are all older too, deleting their
// steps and their audit rows older than cutoff, and deletes up to limit
// tombstones older than tombCutoff; it reports whether it hit a limit.
func purgeRecords(tx *bolt.Tx, cutoff, tombCutoff time.Time, limit int, rep *driver.PurgeReport) (bool, error) {
	b := tx.Bucket(records)
	var due []driver.Record
	var tombs [][]byte
	steps := map[string][]string{}
	young := map[string]bool{} // parents with a step changed after cutoff
	err := b.ForEach(func(k, v []byte) error {
		var r driver.Record
		if json.Unmarshal(v, &r) != nil {
			return nil // Get reports a corrupt record; the purge leaves it
		}
		switch {
		case r.Tombstone:
			if driver.CheckTombstone(r) == nil && r.UpdatedAt.Before(tombCutoff) && len(tombs) < limit {
				tombs = append(tombs, bytes.Clone(k))
			}
		case r.ParentKey != "":
			steps[r.ParentKey] = append(steps[r.ParentKey], r.Key)
			young[r.ParentKey] = young[r.ParentKey] || !r.UpdatedAt.Before(cutoff)
		case driver.Purgeable(r) && r.UpdatedAt.Before(cutoff):
			due = append(due, r)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	due = slices.DeleteFunc(due, func(r driver.Record) bool { return young[r.Key] })
	sort.Slice(due, func(i, j int) bool { return due[i].UpdatedAt.Before(due[j].UpdatedAt) })
	full := len(due) >= limit || len(tombs) >= limit
	if rep.Tombstones, err = deleteKeys(b, tombs); err != nil {
		return false, err
	}
	for _, r := range due[:min(limit, len(due))] {
		for _, st := range steps[r.Key] {
			if err := b.Delete([]byte(st)); err != nil {
				return false, err
			}
			rep.Steps++
		}
		n, err := deleteReplays(tx, r.Key, func(rp driver.Replay) bool { return rp.CreatedAt.Before(cutoff) })
		if err != nil {
			return false, err
		}
		rep.Replays += n
		driver.Retire(&r)
		if err := put(b, r); err != nil {
			return false, err
		}
		rep.Records++
	}
	return full, nil
}

// deleteReplays deletes key's audit rows that match.
func deleteReplays(tx *bolt.Tx, key string, match func(driver.Replay) bool) (int64, error) {
	c := tx.Bucket(replays).Cursor()
	prefix := []byte(key + "/")
	var gone [][]byte
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var rp driver.Replay
		if json.Unmarshal(v, &rp) == nil && match(rp) {
			gone = append(gone, k)
		}
	}
	return deleteKeys(tx.Bucket(replays), gone)
}

// purgeOrphans deletes up to limit audit rows older than cutoff whose key
// has no record.
func purgeOrphans(tx *bolt.Tx, cutoff time.Time, limit int) (int64, error) {
	recs := tx.Bucket(records)
	var gone [][]byte
	c := tx.Bucket(replays).Cursor()
	for k, v := c.First(); k != nil && len(gone) < limit; k, v = c.Next() {
		key, _, _ := strings.Cut(string(k), "/")
		var rp driver.Replay
		if recs.Get([]byte(key)) == nil && json.Unmarshal(v, &rp) == nil && rp.CreatedAt.Before(cutoff) {
			gone = append(gone, k)
		}
	}
	return deleteKeys(tx.Bucket(replays), gone)
}

// purgeStats deletes up to limit stats rows of minutes before cutoff (keys
// start with the minute in RFC 3339, UTC: they sort by time).
func purgeStats(tx *bolt.Tx, cutoff time.Time, limit int) (int64, error) {
	b := tx.Bucket(stats)
	if b == nil {
		return 0, nil
	}
	var gone [][]byte
	c := b.Cursor()
	for k, _ := c.First(); k != nil && len(gone) < limit; k, _ = c.Next() {
		minute, _, _ := strings.Cut(string(k), "/")
		if m, err := time.Parse(time.RFC3339, minute); err == nil && !m.Before(cutoff) {
			break
		}
		gone = append(gone, k) // older, or a key Stats cannot read either
	}
	return deleteKeys(b, gone)
}

// deleteKeys deletes keys collected first: bbolt's cursors must not see
// their bucket change under them.
func deleteKeys(b *bolt.Bucket, keys [][]byte) (int64, error) {
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return 0, err
		}
	}
	return int64(len(keys)), nil
}
