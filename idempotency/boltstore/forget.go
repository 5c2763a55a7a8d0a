package boltstore

import (
	"context"
	"encoding/json"

	bolt "go.etcd.io/bbolt"

	"github.com/idemgate/idemgate/idempotency/driver"
)

var _ driver.Forgetter = (*Store)(nil)

// Forget evicts key's record (driver.ApplyForget) and its step records, and
// writes the audit row, in one transaction.
func (s *Store) Forget(ctx context.Context, key string, rp driver.Replay) (prior, after driver.Record, err error) {
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(records)
		rec, err := get(b, key)
		if err != nil {
			return err
		}
		now := s.now()
		prior = rec
		if err := driver.ApplyForget(&rec, rp, now); err != nil {
			return err
		}
		if err := put(b, rec); err != nil {
			return err
		}
		if err := deleteSteps(b, key); err != nil {
			return err
		}
		after = rec
		return audit(tx, key, prior.Status, rp, now)
	})
	return prior, after, err
}

// deleteSteps deletes the step records of parent (a scan: the embedded store
// is one process's).
func deleteSteps(b *bolt.Bucket, parent string) error {
	var steps [][]byte
	err := b.ForEach(func(k, v []byte) error {
		var r driver.Record
		if json.Unmarshal(v, &r) == nil && r.ParentKey == parent {
			steps = append(steps, append([]byte(nil), k...))
		}
		return nil
	})
	for _, k := range steps {
		if err == nil {
			err = b.Delete(k)
		}
	}
	return err
}
