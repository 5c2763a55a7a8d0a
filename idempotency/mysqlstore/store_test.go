package mysqlstore_test

import (
	"context"
	"testing"

	"github.com/idemgate/idemgate/idempotency/idemtest"
	"github.com/idemgate/idemgate/idempotency/mysqlstore"
	"github.com/idemgate/idemgate/idempotency/redisfast/redistest"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

func open(t *testing.T) *mysqlstore.Store {
	t.Helper()
	s, err := mysqlstore.Open(testenv.MySQLDSN(t), mysqlstore.Options{MaxOpenConns: 32})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return s
}

func TestConformanceMySQL(t *testing.T) {
	idemtest.Run(t, idemtest.StoreOnly(open(t)))
}

func TestConformanceRedisMySQL(t *testing.T) {
	s := open(t)
	idemtest.Run(t, redistest.Harness(t, s))
}

func TestMaintenanceMySQL(t *testing.T) {
	idemtest.RunMaintenance(t, testenv.FreshMySQLStore(t))
}

func TestPurgeMySQL(t *testing.T) {
	idemtest.RunPurge(t, testenv.FreshMySQLStore(t))
}

func TestPurgeWithoutPayloadHashMySQL(t *testing.T) {
	idemtest.RunPurgeWithoutPayloadHash(t, testenv.FreshMySQLStore(t))
}

func TestMalformedTombstoneMySQL(t *testing.T) {
	for _, c := range []struct{ name, set string }{
		{"a status no purge retires", `status = 'TOMB_RUNNING'`},
		// The purge deletes tombstones by status: it must leave this one too.
		{"a finish still pending", `status = 'TOMB_SUCCEEDED', finish = 'PENDING'`},
		{"a step record", `status = 'TOMB_FAILED', parent_key = request_id`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := testenv.FreshMySQLStore(t)
			idemtest.RunMalformedTombstone(t, s, func(t *testing.T, key string) {
				if _, err := s.DB().Exec(`UPDATE idempotency_record SET `+c.set+` WHERE request_id = ?`, key); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
