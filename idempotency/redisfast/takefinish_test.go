package redisfast_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency/driver"
)

// TakeFinish moves a finished entry's holder to the one that took its
// finish over, compare-and-set on the fence: a late publish of the previous
// holder's fence then stays out, and no entry, another state or a fence as
// high is left as it was (docs/design.md §7).
func TestTakeFinish(t *testing.T) {
	ctx := context.Background()
	rdb, l := clientLayer(t)
	done := func(owner string, fence int64) driver.Record {
		return driver.Record{Status: driver.StatusSucceeded, Fence: fence, Attempt: 1, LeaseOwner: owner, PayloadHash: "ph",
			ResultRef: "ref"}
	}
	for _, c := range []struct {
		name      string
		entry     bool   // a SUCCEEDED entry of fence 1 by a, published before
		fence     int64  // TakeFinish's
		wantOwner string // the holder a claim's answer names after (empty: no terminal answer)
		wantFence int64
	}{
		{"a finished entry of a lower fence names the new holder", true, 2, "b", 2},
		{"a fence as high stays", true, 1, "a", 1},
		{"no entry stays none", false, 2, "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := key()
			if c.entry {
				if err := l.Publish(ctx, withKey(done("a", 1), k), 0); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.TakeFinish(ctx, k, "b", 1, c.fence); err != nil {
				t.Fatal(err)
			}
			ans, err := l.Claim(ctx, k, "c", 0, "ph", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if c.wantOwner == "" {
				if ans.Verdict != driver.FastFirst {
					t.Fatalf("no entry: %s, want FIRST (TakeFinish created one)", ans.Verdict)
				}
				if n, _ := rdb.Exists(ctx, l.Key(k)).Result(); n != 0 {
					t.Fatal("TakeFinish created an entry")
				}
				return
			}
			if ans.Verdict != driver.FastSucceeded || ans.Record.LeaseOwner != c.wantOwner || ans.Record.Fence != c.wantFence ||
				ans.Record.ResultRef != "ref" {
				t.Fatalf("after TakeFinish: %s by %q at fence %d (result %q); want SUCCEEDED by %q at %d (result ref)",
					ans.Verdict, ans.Record.LeaseOwner, ans.Record.Fence, ans.Record.ResultRef, c.wantOwner, c.wantFence)
			}
			// The previous holder's publish, late: its fence is older news.
			if err := l.Publish(ctx, withKey(done("a", 1), k), 0); err != nil {
				t.Fatal(err)
			}
			if ans, err := l.Claim(ctx, k, "c", 0, "ph", time.Minute); err != nil || ans.Record.LeaseOwner != c.wantOwner {
				t.Fatalf("after a late publish of fence 1: holder %q (%v), want %q", ans.Record.LeaseOwner, err, c.wantOwner)
			}
		})
	}
	for _, st := range []driver.Status{driver.StatusRunning, driver.StatusFailedFinal, driver.StatusFailedRetryable} {
		t.Run("a "+string(st)+" entry stays", func(t *testing.T) {
			k := key()
			rec := withKey(done("a", 1), k)
			rec.Status = st
			if err := l.Publish(ctx, rec, time.Minute); err != nil {
				t.Fatal(err)
			}
			if err := l.TakeFinish(ctx, k, "b", 1, 2); err != nil {
				t.Fatal(err)
			}
			v, err := rdb.HMGet(ctx, l.Key(k), "st", "ow", "fe").Result()
			if err != nil {
				t.Fatal(err)
			}
			if v[0] != string(st) || v[1] != "a" || v[2] != "1" {
				t.Fatalf("entry %v, want %s by a at fence 1", v, st)
			}
		})
	}
}

func withKey(r driver.Record, k string) driver.Record {
	r.Key = k
	return r
}
