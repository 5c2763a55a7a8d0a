package handler_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/internal/dev/testenv"
	"github.com/idemgate/idemgate/ossresult"
)

// recheckRefused finds input.json missing on the first read of every pair
// and refuses the second: each sweep's read finds the input missing, and
// the re-check it makes once it holds the key is refused (an object store
// denying the read).
type recheckRefused struct {
	handler.ResultStore
	reads atomic.Int32
}

func (r *recheckRefused) Get(ctx context.Context, key string) ([]byte, ossresult.Meta, error) {
	if strings.HasSuffix(key, "/input.json") && r.reads.Add(1)%2 == 0 {
		return nil, ossresult.Meta{}, fmt.Errorf("%w: oss 403 AccessDenied", ossresult.ErrPermission)
	}
	return r.ResultStore.Get(ctx, key)
}

// maxRechecks is handler's cap on re-checks that cannot read input.json.
const maxRechecks = 24

// A record without input.json whose re-check keeps failing (issue 38) was
// taken over and released every hour for good. It is given up FINAL
// input_unreadable at the cap's re-check, every one before it leaving the
// key retryable (input_unread, its count in the message) with one claim
// each; a claim of another between two re-checks starts the count again.
func TestSweeperGivesUpAnInputNoRecheckCanRead(t *testing.T) {
	t.Run("embedded", func(t *testing.T) {
		var ahead atomic.Int64 // the store's clock, moved past the input horizon at each sweep
		dir := t.TempDir()
		s, err := boltstore.Open(filepath.Join(dir, "state"), time.Second,
			boltstore.WithClock(func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		recheckCap(t, s, dir, func() { ahead.Add(int64(2 * time.Hour)) })
	})
	t.Run("mysql", func(t *testing.T) {
		s := testenv.FreshMySQLStore(t)
		recheckCap(t, s, t.TempDir(), func() {
			if _, err := s.DB().Exec(`UPDATE idempotency_record SET updated_at = updated_at - INTERVAL 2 HOUR,
 sweep_after = sweep_after - INTERVAL 2 HOUR, lease_until = lease_until - INTERVAL 2 HOUR`); err != nil {
				t.Fatal(err)
			}
		})
	})
}

func recheckCap(t *testing.T, store driver.Maintainer, dir string, pastHorizon func()) {
	ctx := context.Background()
	rg := newRigOn(t, store, dir, &model{}, idempotency.WithLease(200*time.Millisecond))
	base, _ := rg.p.Results(ctx, handler.Credentials{})
	rg.p.Results = func(context.Context, handler.Credentials) (handler.ResultStore, error) {
		return &recheckRefused{ResultStore: base}, nil
	}
	d := diesBeforeItsInput(t, rg, summarizeData("its input never read again"))
	sweep := func() driver.Record {
		t.Helper()
		pastHorizon()
		if _, err := rg.p.Sweep(ctx, handler.Meta{}, handler.SweepOptions{}); err != nil {
			t.Fatal(err)
		}
		rec, err := store.Get(ctx, d.Key)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	unread := func(rec driver.Record, n int, fence int64) {
		t.Helper()
		if rec.Status != driver.StatusFailedRetryable || rec.LastErrorCode != "input_unread" || rec.Fence != fence ||
			!strings.HasPrefix(rec.LastError, fmt.Sprintf("re-check %d of %d at fence %d:", n, maxRechecks, fence)) {
			t.Fatalf("after re-check %d: %s@%d %s %q; want FAILED_RETRYABLE@%d input_unread, re-check %d", n, rec.Status,
				rec.Fence, rec.LastErrorCode, rec.LastError, fence, n)
		}
	}
	fence := int64(1)
	for n := 1; n <= 3; n++ {
		fence++
		unread(sweep(), n, fence)
	}
	// FC's later try takes the key over between two re-checks, and dies.
	if _, l, err := rg.p.Engine.Claim(ctx, idempotency.ClaimRequest{Key: d.Key, PayloadHash: d.PayloadHash, Owner: "r1",
		Try: 1, MaxAttempts: 3}); err != nil || l == nil {
		t.Fatalf("FC's later try: %v", err)
	}
	time.Sleep(250 * time.Millisecond)
	fence += 2
	unread(sweep(), 1, fence) // counted again from the first
	for n := 2; n < maxRechecks; n++ {
		fence++
		unread(sweep(), n, fence)
	}
	rec := sweep()
	if rec.Status != driver.StatusFailedFinal || rec.LastErrorCode != "input_unreadable" || rec.Fence != fence+1 ||
		!strings.Contains(rec.LastError, "--dlq") {
		t.Fatalf("at the cap: %s@%d %s %q; want FAILED_FINAL@%d input_unreadable naming the replay", rec.Status, rec.Fence,
			rec.LastErrorCode, rec.LastError, fence+1)
	}
	if rep, err := rg.p.Sweep(ctx, handler.Meta{}, handler.SweepOptions{}); err != nil || rep.Scanned != 0 {
		t.Fatalf("a sweep after the key was given up: %+v %v; want nothing listed", rep, err)
	}
	if after, _ := store.Get(ctx, d.Key); after.Fence != rec.Fence {
		t.Fatalf("the key given up was claimed again: fence %d → %d", rec.Fence, after.Fence)
	}
}
