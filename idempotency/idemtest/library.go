package idemtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
)

// Cases of what a library user writes against: typed results of any size,
// waiting for the result in flight, the kill switch and the local cache.

// MemBlobs is an in-memory driver.BlobStore, create-once, for tests
// and examples.
type MemBlobs struct {
	mu sync.Mutex
	m  map[string][]byte
}

// Put stores data under key once; the same bytes again succeed.
func (b *MemBlobs) Put(_ context.Context, key string, data []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string][]byte{}
	}
	if old, ok := b.m[key]; ok && string(old) != string(data) {
		return fmt.Errorf("blob %s exists with other content", key)
	}
	b.m[key] = append([]byte(nil), data...)
	return nil
}

// Get reads key.
func (b *MemBlobs) Get(_ context.Context, key string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.m[key]
	if !ok {
		return nil, fmt.Errorf("blob %s: not found", key)
	}
	return v, nil
}

type payload struct {
	Name  string   `json:"name"`
	Items []string `json:"items"`
	N     int      `json:"n"`
}

// runTyped: each T comes back as itself to a duplicate, zero and empty
// values included, and the function runs once.
func runTyped(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	check := func(name string, v any, run func(req idempotency.ClaimRequest) (any, idempotency.Outcome, error)) {
		t.Run(name, func(t *testing.T) {
			key := NewKey()
			for i, owner := range []string{"a", "b"} {
				got, out, err := run(req(key, owner))
				if err != nil || !reflect.DeepEqual(got, v) {
					t.Fatalf("delivery %d: %#v (%+v) %v, want %#v", i, got, out, err, v)
				}
				if i == 1 && out.Decision != idempotency.DecisionRepeatDone {
					t.Fatalf("duplicate decision %s", out.Decision)
				}
			}
		})
	}
	cases := []any{false, 0, "", []int{}, []int(nil), map[string]int{}, payload{}, payload{Name: "n", Items: []string{"a"}, N: 3},
		&payload{Name: "pointer"}, map[string]any{"user": json.Number("9007199254740993")}} // 2^53+1: exact, not a float64
	for _, v := range cases {
		check(fmt.Sprintf("%T(%v)", v, v), v, func(r idempotency.ClaimRequest) (any, idempotency.Outcome, error) {
			return runAs(e, r, v)
		})
	}
}

// runAs runs Run with T the dynamic type of v, counting nothing: the
// typed cases check the value that comes back.
func runAs(e *idempotency.Engine, r idempotency.ClaimRequest, v any) (any, idempotency.Outcome, error) {
	ctx := context.Background()
	switch v := v.(type) {
	case bool:
		return idempotency.Run(ctx, e, r, func(context.Context, *idempotency.Lease) (bool, error) { return v, nil })
	case int:
		return idempotency.Run(ctx, e, r, func(context.Context, *idempotency.Lease) (int, error) { return v, nil })
	case string:
		return idempotency.Run(ctx, e, r, func(context.Context, *idempotency.Lease) (string, error) { return v, nil })
	case []int:
		return idempotency.Run(ctx, e, r, func(context.Context, *idempotency.Lease) ([]int, error) { return v, nil })
	case map[string]int:
		return idempotency.Run(ctx, e, r, func(context.Context, *idempotency.Lease) (map[string]int, error) { return v, nil })
	case payload:
		return idempotency.Run(ctx, e, r, func(context.Context, *idempotency.Lease) (payload, error) { return v, nil })
	case *payload:
		return idempotency.Run(ctx, e, r, func(context.Context, *idempotency.Lease) (*payload, error) { return v, nil })
	case map[string]any:
		return idempotency.Run(ctx, e, r, func(context.Context, *idempotency.Lease) (map[string]any, error) { return v, nil })
	}
	panic(fmt.Sprintf("no case for %T", v))
}

// runLarge: a 1 MiB result is kept by reference and answered to every
// duplicate, with one execution; without a blob store it is refused FINAL
// and never runs again.
func runLarge(t *testing.T, h Harness) {
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	for _, withBlobs := range []bool{true, false} {
		t.Run(fmt.Sprintf("blob store %v", withBlobs), func(t *testing.T) {
			var opts []idempotency.Option
			if withBlobs {
				opts = append(opts, idempotency.WithBlobStore(&MemBlobs{}))
			}
			e := h.NewEngine(t, opts...)
			key := NewKey()
			var runs atomic.Int32
			for _, owner := range []string{"a", "b", "c"} {
				got, _, err := idempotency.Run(context.Background(), e, req(key, owner), func(context.Context, *idempotency.Lease) (string, error) {
					runs.Add(1)
					return big, nil
				})
				var ie *idempotency.Error
				switch {
				case withBlobs && (err != nil || got != big):
					t.Fatalf("%s: %d bytes, %v", owner, len(got), err)
				case !withBlobs && (!errors.As(err, &ie) || ie.Code != "result_too_large" || ie.Retryable()):
					t.Fatalf("%s: %v", owner, err)
				}
			}
			want(t, "executions", runs.Load(), 1)
		})
	}
}

// waitInFlight: a duplicate that meets a live lease waits for the owner's
// result and answers it; one whose wait ends first answers in progress.
func waitInFlight(t *testing.T, h Harness) {
	key := NewKey()
	owner := h.NewEngine(t)
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := owner.Do(context.Background(), req(key, "a"), func(context.Context, *idempotency.Lease) (string, error) {
			close(started)
			<-release
			return "the owner's", nil
		})
		done <- err
	}()
	<-started
	short := h.NewEngine(t, idempotency.WithWaitInFlight(100*time.Millisecond))
	if _, err := short.Do(context.Background(), req(key, "b"), never(t)); !errors.Is(err, idempotency.ErrInProgress) {
		t.Fatalf("a wait shorter than the work: %v", err)
	}
	time.AfterFunc(200*time.Millisecond, func() { close(release) })
	waiting := h.NewEngine(t, idempotency.WithWaitInFlight(5*time.Second))
	out, err := waiting.Do(context.Background(), req(key, "c"), never(t))
	if err != nil || out.Status != driver.StatusSucceeded || out.ResultRef != "the owner's" || !out.Duplicate {
		t.Fatalf("waited: %+v %v", out, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func never(t *testing.T) func(context.Context, *idempotency.Lease) (string, error) {
	return func(context.Context, *idempotency.Lease) (string, error) {
		t.Error("a duplicate ran the work")
		return "", errors.New("ran")
	}
}

// disabled: the kill switch runs the function every time and records
// nothing.
func disabled(t *testing.T, h Harness) {
	e := h.NewEngine(t, idempotency.WithDisabled())
	key := NewKey()
	var runs atomic.Int32
	for range 2 {
		out, err := e.Do(context.Background(), req(key, "a"), func(ctx context.Context, l *idempotency.Lease) (string, error) {
			runs.Add(1)
			return l.Step(ctx, "s", func(context.Context) (string, error) { return "ok", nil })
		})
		if err != nil || out.Decision != idempotency.DecisionDisabled || out.ResultRef != "ok" {
			t.Fatalf("%+v %v", out, err)
		}
	}
	want(t, "runs", runs.Load(), 2)
	if _, err := h.NewEngine(t).Get(context.Background(), key); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("a disabled engine recorded the key: %v", err)
	}
}

// localCache: a terminal answer is remembered by the instance and answered
// without asking the fast layer or the store.
func localCache(t *testing.T, h Harness) {
	var tiers []idempotency.Tier // the engine's goroutine alone calls the observer here
	e := h.NewEngine(t, idempotency.WithLocalCache(100, time.Minute),
		idempotency.WithObserver(func(_ idempotency.Decision, by idempotency.Tier) { tiers = append(tiers, by) }))
	key := NewKey()
	if _, err := e.Do(context.Background(), req(key, "a"), func(context.Context, *idempotency.Lease) (string, error) {
		return "cached", nil
	}); err != nil {
		t.Fatal(err)
	}
	res, _ := claim(t, e, req(key, "b"))
	want(t, "source", res.Source, "cache")
	want(t, "result", res.Record.ResultRef, "cached")
	other := req(key, "c")
	other.PayloadHash = "another"
	res, _ = claim(t, e, other)
	want(t, "another payload", res.Decision, idempotency.DecisionPayloadMismatch)
	// Counted as the cache's, not the fast layer's (issue 39: they were
	// fast rejections, even with no fast layer).
	st := e.Stats()
	want(t, "cache answers", st.CacheAnswers, 2)
	want(t, "fast rejects", st.FastRejects, 0)
	want(t, "store conflicts", st.StoreConflicts, 0)
	want(t, "tiers observed", fmt.Sprint(tiers), fmt.Sprint([]idempotency.Tier{idempotency.TierStore, idempotency.TierCache, idempotency.TierCache}))
}

// legacyHash: a record written under a payload's older hash answers a
// request that carries that hash as LegacyPayloadHash as a duplicate on the
// engine's local paths too — the cache (its second answer) and the wait for
// an in-flight owner — not only in the Store.
func legacyHash(t *testing.T, h Harness) {
	upgraded := func(key, owner string) idempotency.ClaimRequest {
		r := req(key, owner)
		r.PayloadHash, r.LegacyPayloadHash = "new-"+key[:8], r.PayloadHash
		return r
	}
	key := NewKey()
	if _, err := h.NewEngine(t).Do(context.Background(), req(key, "a"), func(context.Context, *idempotency.Lease) (string, error) {
		return "old", nil
	}); err != nil {
		t.Fatal(err)
	}
	cached := h.NewEngine(t, idempotency.WithLocalCache(100, time.Minute))
	for i := range 2 {
		res, _ := claim(t, cached, upgraded(key, "b"))
		if res.Decision != idempotency.DecisionRepeatDone || res.Record.ResultRef != "old" {
			t.Fatalf("duplicate %d under the new hash: %s %q (from %s)", i, res.Decision, res.Record.ResultRef, res.Source)
		}
	}

	key = NewKey()
	started, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := h.NewEngine(t).Do(context.Background(), req(key, "a"), func(context.Context, *idempotency.Lease) (string, error) {
			close(started)
			<-release
			return "the owner's", nil
		})
		done <- err
	}()
	<-started
	time.AfterFunc(200*time.Millisecond, func() { close(release) })
	out, err := h.NewEngine(t, idempotency.WithWaitInFlight(5*time.Second)).Do(context.Background(), upgraded(key, "c"), never(t))
	if err != nil || out.Status != driver.StatusSucceeded || out.ResultRef != "the owner's" || !out.Duplicate {
		t.Fatalf("waited under the new hash: %+v %v", out, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
