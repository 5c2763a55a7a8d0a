package mysqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgate/idemgate/idempotency"

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

// doneBehindRedis completes a new key through an engine behind the test
// Redis with req (its Key set here) and then drops the key's Redis entry,
// removed again when the test ends; it returns the store, the harness, the
// engine and the key.
func doneBehindRedis(t *testing.T, req idempotency.ClaimRequest) (*mysqlstore.Store, idemtest.Harness, *idempotency.Engine, string) {
	s := testenv.FreshMySQLStore(t)
	h := redistest.Harness(t, s)
	e := h.NewEngine(t)
	req.Key = idemtest.NewKey()
	t.Cleanup(func() { _ = h.Fast.Forget(context.Background(), req.Key) })
	if _, err := e.Do(context.Background(), req, func(context.Context, *idempotency.Lease) (string, error) { return "ref", nil }); err != nil {
		t.Fatal(err)
	}
	if err := h.Fast.Forget(context.Background(), req.Key); err != nil { // its entry expired
		t.Fatal(err)
	}
	return s, h, e, req.Key
}

// A record migration 005 marked finish FAILED (its publish or notify step
// record of an earlier version had failed FINAL) has no error code: the
// parent's completion cleared it. Every delivery must answer it FINAL, also
// once the fast layer mirrors it, which keeps the code and not the finish
// (docs/design.md §10: FC's retries end in the dead-letter queue).
func TestAFailedFinishWithoutCodeIsFinalThroughRedis(t *testing.T) {
	req := idempotency.ClaimRequest{PayloadHash: "ph", Owner: "w", Try: -1}
	s, _, e, k := doneBehindRedis(t, req)
	req.Key = k
	ctx := context.Background()
	// As the upgrade finds it: finish FAILED, no code, nothing in Redis.
	if _, err := s.DB().Exec(`UPDATE idempotency_record SET finish = 'FAILED', last_error_code = '', last_error = ''
 WHERE request_id = ?`, k); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // the store answers first, then the fast layer's mirror of it
		req.Owner = fmt.Sprintf("dup-%d", i)
		_, err := e.Do(ctx, req, func(context.Context, *idempotency.Lease) (string, error) {
			t.Fatal("a delivery ran")
			return "", nil
		})
		if class, _ := idempotency.Classify(err); class != idempotency.ClassFinal {
			t.Fatalf("delivery %d of a key whose finish failed: %v (%s), want FINAL", i, err, class)
		}
	}
}

// A record claimed without a payload hash (the library allows it; a caller
// that starts passing one later meets such records) refuses a request that
// names a hash PAYLOAD_MISMATCH, and so must the fast layer after it: the
// store's mismatch answer must not leave a terminal entry under the
// request's hash, which would answer the next such request with the
// record's result (docs/design.md §14.7, §14.9).
func TestAMismatchWithAnUnhashedRecordStaysAMismatchThroughRedis(t *testing.T) {
	_, _, e, k := doneBehindRedis(t, idempotency.ClaimRequest{Owner: "v1", Try: -1})
	ctx := context.Background()
	for i := range 3 {
		out, err := e.Do(ctx, idempotency.ClaimRequest{Key: k, PayloadHash: "ph-v2", Owner: fmt.Sprintf("v2-%d", i), Try: -1},
			func(context.Context, *idempotency.Lease) (string, error) {
				t.Fatal("a delivery ran")
				return "", nil
			})
		if !errors.Is(err, idempotency.ErrPayloadMismatch) || out.ResultRef != "" {
			t.Fatalf("delivery %d with a payload hash: %+v %v, want payload_mismatch and no result", i, out, err)
		}
	}
}

func TestForgetMySQL(t *testing.T) {
	s := testenv.FreshMySQLStore(t)
	t.Run("Store", func(t *testing.T) { idemtest.RunForget(t, idemtest.StoreOnly(s)) })
	t.Run("Redis", func(t *testing.T) { idemtest.RunForget(t, redistest.Harness(t, s)) })
}

// GetNow answers the database's clock, not the process's: with the
// session's clock set an hour back (SET timestamp, through the DSN), a
// lease taken a moment ago still runs by the now it answers, and would
// have ended an hour ago by the process's.
func TestGetNowIsTheDatabasesClock(t *testing.T) {
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["timestamp"] = fmt.Sprintf("%d.%03d", past.Unix(), past.Nanosecond()/1e6)
	s, err := mysqlstore.Open(cfg.FormatDSN(), mysqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	eng := idempotency.New(s, idempotency.WithLease(5*time.Second))
	key := idemtest.NewKey()
	if _, l, err := eng.Claim(ctx, idempotency.ClaimRequest{Key: key, Owner: "o", PayloadHash: "ph"}); err != nil || l == nil {
		t.Fatalf("claim: %v", err)
	}
	rec, now, err := eng.GetNow(ctx, key)
	if err != nil || now.Sub(past).Abs() > time.Minute || !rec.LeaseUntil.After(now) {
		t.Fatalf("now %s (the session's clock %s), lease until %s, %v", now, past, rec.LeaseUntil, err)
	}
}
