package idempotency_test

import (
	"encoding/json"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/driver"
)

// openBolt opens an embedded store in a directory of t's own, closed when
// t ends.
func openBolt(t *testing.T, opts ...boltstore.Option) *boltstore.Store {
	t.Helper()
	store, err := boltstore.Open(t.TempDir(), time.Second, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// rewrite changes key's record in an embedded store behind the engine's
// back, as an earlier version or a damaged row left it.
func rewrite(store *boltstore.Store, key string, change func(*driver.Record)) error {
	return store.DB().Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("idempotency_record"))
		var r driver.Record
		if err := json.Unmarshal(b.Get([]byte(key)), &r); err != nil {
			return err
		}
		change(&r)
		v, err := json.Marshal(r)
		if err != nil {
			return err
		}
		return b.Put([]byte(key), v)
	})
}
