package boltstore_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/idemtest"
	"github.com/idemgate/idemgate/idempotency/redisfast/redistest"
)

func open(t *testing.T, dir string) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformanceEmbedded(t *testing.T) {
	idemtest.Run(t, idemtest.StoreOnly(open(t, t.TempDir())))
}

func TestConformanceRedisEmbedded(t *testing.T) {
	s := open(t, t.TempDir())
	idemtest.Run(t, redistest.Harness(t, s))
}

// The embedded store survives a restart: a completed key is still answered,
// a lease still held is still respected.
func TestSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := boltstore.Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	done, live := idemtest.NewKey(), idemtest.NewKey()
	e := idempotency.New(s)
	if _, err := e.Do(ctx, idempotency.ClaimRequest{Key: done, Owner: "a"}, func(context.Context, *idempotency.Lease) (string, error) {
		return "ref", nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, l, err := e.Claim(ctx, idempotency.ClaimRequest{Key: live, Owner: "a"}); err != nil || l == nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := open(t, dir)
	e2 := idempotency.New(s2)
	res, l, err := e2.Claim(ctx, idempotency.ClaimRequest{Key: done, Owner: "b"})
	if err != nil || l != nil || res.Decision != idempotency.DecisionRepeatDone || res.Record.ResultRef != "ref" {
		t.Fatalf("after restart: %+v %v", res, err)
	}
	res, l, err = e2.Claim(ctx, idempotency.ClaimRequest{Key: live, Owner: "b"})
	if err != nil || l != nil || res.Decision != idempotency.DecisionRepeatOther {
		t.Fatalf("live lease after restart: %+v %v", res, err)
	}
}

// A second opener waits for the file lock, then fails with a message that
// says what to do.
func TestSecondOpenerGetsClearError(t *testing.T) {
	dir := t.TempDir()
	open(t, dir)
	_, err := boltstore.Open(dir, 100*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "MYSQL_DSN") {
		t.Fatalf("err = %v", err)
	}
}

func TestMaintenanceEmbedded(t *testing.T) {
	idemtest.RunMaintenance(t, open(t, t.TempDir()))
}

func TestPurgeEmbedded(t *testing.T) {
	idemtest.RunPurge(t, open(t, t.TempDir()))
}

func TestPurgeWithoutPayloadHashEmbedded(t *testing.T) {
	idemtest.RunPurgeWithoutPayloadHash(t, open(t, t.TempDir()))
}

func TestMalformedTombstoneEmbedded(t *testing.T) {
	s := open(t, t.TempDir())
	idemtest.RunMalformedTombstone(t, s, func(t *testing.T, key string) {
		// A tombstone that says RUNNING: no purge writes one.
		editRecord(t, s, key, func(r map[string]any) { r["tombstone"], r["status"] = true, "RUNNING" })
	})
}

// editRecord rewrites key's stored record as edit changes its JSON fields.
func editRecord(t *testing.T, s *boltstore.Store, key string, edit func(map[string]any)) {
	t.Helper()
	err := s.DB().Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("idempotency_record"))
		var r map[string]any
		if err := json.Unmarshal(b.Get([]byte(key)), &r); err != nil {
			return err
		}
		edit(r)
		v, _ := json.Marshal(r)
		return b.Put([]byte(key), v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A claim that writes nothing commits nothing (issue #24): the duplicates of
// a finished key, another owner's live lease and another payload are
// answered from read transactions, while a first claim and a takeover still
// commit. bbolt counts the pages every commit writes, a commit of nothing
// included (its meta page).
func TestClaimsThatWriteNothingCommitNothing(t *testing.T) {
	s := open(t, t.TempDir())
	ctx := context.Background()
	e := idempotency.New(s)
	done, live := idemtest.NewKey(), idemtest.NewKey()
	if _, err := e.Do(ctx, idempotency.ClaimRequest{Key: done, Owner: "a", PayloadHash: "ph"},
		func(context.Context, *idempotency.Lease) (string, error) { return "ref", nil }); err != nil {
		t.Fatal(err)
	}
	if _, l, err := e.Claim(ctx, idempotency.ClaimRequest{Key: live, Owner: "a", PayloadHash: "ph",
		Lease: 300 * time.Millisecond}); err != nil || l == nil {
		t.Fatal(err)
	}
	writes := func() int64 { st := s.DB().Stats(); return st.TxStats.GetWrite() }
	cases := []struct {
		name  string
		req   idempotency.ClaimRequest
		want  idempotency.Decision
		write bool
	}{
		{"duplicate of a finished key", idempotency.ClaimRequest{Key: done, Owner: "b", PayloadHash: "ph"}, idempotency.DecisionRepeatDone, false},
		{"another payload", idempotency.ClaimRequest{Key: done, Owner: "b", PayloadHash: "other"}, idempotency.DecisionPayloadMismatch, false},
		{"another owner's live lease", idempotency.ClaimRequest{Key: live, Owner: "b", PayloadHash: "ph"}, idempotency.DecisionRepeatOther, false},
		{"first claim", idempotency.ClaimRequest{Key: idemtest.NewKey(), Owner: "b", PayloadHash: "ph"}, idempotency.DecisionFirst, true},
		{"takeover of the expired lease", idempotency.ClaimRequest{Key: live, Owner: "c", PayloadHash: "ph"}, idempotency.DecisionTakeover, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.want == idempotency.DecisionTakeover {
				time.Sleep(400 * time.Millisecond) // the live lease runs out
			}
			before := writes()
			res, _, err := e.Claim(ctx, c.req)
			if err != nil || res.Decision != c.want {
				t.Fatalf("decision %s (%v), want %s", res.Decision, err, c.want)
			}
			if wrote := writes() > before; wrote != c.write {
				t.Fatalf("committed pages: %t, want %t", wrote, c.write)
			}
		})
	}
}

func TestForgetEmbedded(t *testing.T) {
	s := open(t, t.TempDir())
	t.Run("Store", func(t *testing.T) { idemtest.RunForget(t, idemtest.StoreOnly(s)) })
	t.Run("Redis", func(t *testing.T) { idemtest.RunForget(t, redistest.Harness(t, s)) })
}

// A mark in lease_try alone, as a file an earlier version wrote holds it
// (no mark_owner, mark_try), outlives a retryable failure.
func TestAMarkInTheLeaseAloneOutlivesAFailure(t *testing.T) {
	s := open(t, t.TempDir())
	idemtest.RunMarkInTheLeaseAlone(t, s, func(t *testing.T, key string) {
		editRecord(t, s, key, func(r map[string]any) { r["lease_try"] = 2 })
	})
}
