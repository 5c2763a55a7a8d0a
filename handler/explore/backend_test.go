package explore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"

	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/mysqlstore"
	"github.com/idemgate/idemgate/idempotency/redisfast"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// backend is one store configuration. warp moves every durable timestamp
// back by d (to the stores, d passes); fresh empties it for the next seed.
type backend struct {
	name  string
	store driver.Maintainer
	fast  driver.FastLayer
	warp  func(w *world, d time.Duration) error
	fresh func(t *testing.T)
	evict func(key string) error // drops K's Redis entry (nil without Redis)
}

func newBackend(t *testing.T, name string) *backend {
	be := &backend{name: name}
	durableName, withRedis := strings.CutSuffix(name, "+redis")
	switch durableName {
	case "bolt":
		be.fresh = func(t *testing.T) {
			s, err := boltstore.Open(filepath.Join(t.TempDir(), "state"), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			s.DB().NoSync = true // a seed's file is thrown away
			t.Cleanup(func() { s.Close() })
			be.store = s
		}
	case "mysql":
		s := testenv.FreshMySQLStore(t)
		be.store = s
		be.fresh = func(t *testing.T) { truncate(t, s.DB()) }
	default:
		t.Fatalf("unknown store %q", name)
	}
	var rdb redis.UniversalClient
	var fast *redisfast.Layer
	if withRedis {
		prefix := testenv.RedisPrefix(t) // the test's keys, deleted when it ends
		var err error
		if rdb, err = redisfast.Dial(testenv.RedisURL(t), 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		testenv.GuardRedisKeys(t, rdb, prefix)
		if fast, err = redisfast.New(rdb, dedupTTL, redisfast.WithKeyPrefix(prefix)); err != nil {
			t.Fatal(err)
		}
		be.fast = fast
		be.evict = func(key string) error { return rdb.Del(context.Background(), fast.Key(key)).Err() }
	}
	be.warp = func(w *world, d time.Duration) error {
		if err := warpDurable(be.store, d); err != nil {
			return err
		}
		if rdb != nil {
			return warpRedis(rdb, fast, w, d)
		}
		return nil
	}
	return be
}

func truncate(t *testing.T, db *sql.DB) {
	for _, tbl := range []string{"idempotency_record", "idempotency_replay", "idempotency_stats"} {
		if _, err := db.Exec("TRUNCATE TABLE " + tbl); err != nil {
			t.Fatal(err)
		}
	}
}

func warpDurable(s driver.Maintainer, d time.Duration) error {
	switch s := s.(type) {
	case *boltstore.Store:
		return warpBolt(s.DB(), d)
	case *mysqlstore.Store:
		return warpMySQL(s.DB(), d)
	}
	return fmt.Errorf("no warp for %T", s)
}

// datetimeCols caches, per database handle, the DATETIME columns of the
// record table: the schema does not change during a run, and
// information_schema queries by the thousand have crashed MariaDB 10.11
// (a segfault freeing their temporary table) under the load of parallel runs.
var datetimeCols sync.Map // *sql.DB → []string

func recordDatetimeColumns(db *sql.DB) ([]string, error) {
	if v, ok := datetimeCols.Load(db); ok {
		return v.([]string), nil
	}
	rows, err := db.Query(`SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()
 AND TABLE_NAME = 'idempotency_record' AND DATA_TYPE = 'datetime'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	datetimeCols.Store(db, cols)
	return cols, nil
}

// warpMySQL shifts every DATETIME column of the record table.
func warpMySQL(db *sql.DB, d time.Duration) error {
	cols, err := recordDatetimeColumns(db)
	if err != nil {
		return err
	}
	var sets []string
	for _, c := range cols {
		sets = append(sets, fmt.Sprintf("%[1]s = %[1]s - INTERVAL %[2]d MICROSECOND", c, d.Microseconds()))
	}
	_, err = db.Exec("UPDATE idempotency_record SET " + strings.Join(sets, ", "))
	return err
}

// warpBolt shifts every non-zero time.Time field of every record.
func warpBolt(db *bolt.DB, d time.Duration) error {
	return db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("idempotency_record"))
		type kv struct{ k, v []byte }
		var out []kv
		err := b.ForEach(func(k, v []byte) error {
			var r driver.Record
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			rv := reflect.ValueOf(&r).Elem()
			for i := range rv.NumField() {
				if t, ok := rv.Field(i).Interface().(time.Time); ok && !t.IsZero() {
					rv.Field(i).Set(reflect.ValueOf(t.Add(-d)))
				}
			}
			nv, err := json.Marshal(r)
			out = append(out, kv{append([]byte(nil), k...), nv})
			return err
		})
		if err != nil {
			return err
		}
		for _, e := range out {
			if err := b.Put(e.k, e.v); err != nil {
				return err
			}
		}
		return nil
	})
}

// warpRedis ages the world's entries: lease ends move back, TTLs shrink.
var warpScript = redis.NewScript(`
local d = tonumber(ARGV[1])
for _, k in ipairs(KEYS) do
  local pttl = redis.call('PTTL', k)
  if pttl > 0 then
    if pttl <= d then
      redis.call('DEL', k)
    else
      redis.call('PEXPIRE', k, pttl - d)
      if redis.call('HEXISTS', k, 'lu') == 1 then redis.call('HINCRBY', k, 'lu', -d) end
    end
  end
end
return 'OK'
`)

func warpRedis(rdb redis.UniversalClient, fast *redisfast.Layer, w *world, d time.Duration) error {
	var ks []string
	for _, s := range w.specs {
		ks = append(ks, fast.Key(s.k.Key))
	}
	for _, k := range append(w.libKeys, w.storedRedisKeys()...) {
		ks = append(ks, fast.Key(k))
	}
	return warpScript.Run(context.Background(), rdb, ks, d.Milliseconds()).Err()
}
