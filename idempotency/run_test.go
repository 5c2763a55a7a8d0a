package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/idemtest"
	"github.com/idemgate/idemgate/ossresult"
)

type withHidden struct {
	Shown  string `json:"shown"`
	hidden string
}

type named string

func (n named) String() string { return string(n) }

type withInterface struct {
	Name fmt.Stringer `json:"name"`
}

// runTwice runs fn through Run for two deliveries of one key and returns
// both answers and how often fn ran.
func runTwice[T any](t *testing.T, fn func() T) (first, repeat T, err1, err2 error, runs int32) {
	t.Helper()
	store, err := boltstore.Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	eng := idempotency.New(store)
	req := idempotency.ClaimRequest{Key: idemtest.NewKey(), PayloadHash: "ph", Owner: "first"}
	var n atomic.Int32
	do := func(context.Context, *idempotency.Lease) (T, error) { n.Add(1); return fn(), nil }
	first, _, err1 = idempotency.Run(context.Background(), eng, req, do)
	req.Owner = "second"
	repeat, _, err2 = idempotency.Run(context.Background(), eng, req, do)
	return first, repeat, err1, err2, n.Load()
}

// Every delivery, the first included, gets the T the stored JSON decodes
// back to: a number in an any stays exact, a field JSON drops is dropped
// for the first caller too, and a T that does not decode back is refused
// FINAL before it is stored, not answered once and unreadable after.
func TestRunAnswersEveryCallerAlike(t *testing.T) {
	big := json.Number("9007199254740993") // 2^53+1: a float64 holds only 2^53
	for _, c := range []struct {
		name string
		run  func(t *testing.T) (first, repeat any, err1, err2 error, runs int32)
		want any
		code string // else: both deliveries this FINAL error
	}{
		{"an any holding a number over 2^53", func(t *testing.T) (any, any, error, error, int32) {
			return runTwice(t, func() any { return int64(1<<53 + 1) })
		}, big, ""},
		{"a map of any holding a number over 2^53", func(t *testing.T) (any, any, error, error, int32) {
			return runTwice(t, func() map[string]any { return map[string]any{"user": uint64(1<<53 + 1)} })
		}, map[string]any{"user": big}, ""},
		{"a struct with a field JSON drops", func(t *testing.T) (any, any, error, error, int32) {
			return runTwice(t, func() withHidden { return withHidden{Shown: "s", hidden: "h"} })
		}, withHidden{Shown: "s"}, ""},
		{"a struct with an interface field", func(t *testing.T) (any, any, error, error, int32) {
			return runTwice(t, func() withInterface { return withInterface{Name: named("n")} })
		}, nil, "result_unencodable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			first, repeat, err1, err2, runs := c.run(t)
			if c.code == "" && (err1 != nil || err2 != nil || !reflect.DeepEqual(first, c.want) || !reflect.DeepEqual(repeat, c.want)) || runs != 1 {
				t.Fatalf("first %#v %v, repeat %#v %v, runs %d; want %#v", first, err1, repeat, err2, runs, c.want)
			}
			for _, err := range []error{err1, err2} {
				var ie *idempotency.Error
				if c.code != "" && (!errors.As(err, &ie) || ie.Code != c.code || ie.Retryable()) {
					t.Fatalf("%v / %v: want FINAL %s for both", err1, err2, c.code)
				}
			}
		})
	}
}

// A result too large for the record goes to the blob store under any valid
// key — one that is no valid object key included — and fn runs once.
func TestRunStoresLargeResultsUnderAnyKey(t *testing.T) {
	for _, c := range []struct{ name, key string }{
		{"backslash", `ACME\order-1`},
		{"double slash", "orders//1"},
		{"dot segment", "tenant/.1"},
		{"parent segment", "../x"},
		{"trailing slash", "a/"},
		{"a file and a directory", "a/fence-1.json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			store, err := boltstore.Open(t.TempDir(), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { store.Close() })
			local, err := ossresult.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			eng := idempotency.New(store, idempotency.WithBlobStore(ossresult.Blobs(local)))
			big := strings.Repeat("x", 4096)
			var runs atomic.Int32
			for try := range 3 {
				req := idempotency.ClaimRequest{Key: c.key, PayloadHash: "ph", Owner: "req-1", Try: try}
				got, _, err := idempotency.Run(context.Background(), eng, req, func(context.Context, *idempotency.Lease) (string, error) {
					runs.Add(1)
					return big, nil
				})
				if err != nil || got != big {
					t.Fatalf("try %d: %d bytes, %v", try, len(got), err)
				}
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("fn ran %d times", n)
			}
		})
	}
}

// A result whose JSON is not valid UTF-8 (a json.RawMessage passes any
// bytes) goes to the blob store, which holds bytes, and is answered as it
// was; without one it is FINAL result_unencodable, fn run once.
func TestRunKeepsResultsThatAreNotText(t *testing.T) {
	raw := json.RawMessage("\"caf\xe9\"")
	for _, c := range []struct {
		name  string
		blobs bool
		code  string
	}{
		{"with a blob store", true, ""},
		{"without one", false, "result_unencodable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			store, err := boltstore.Open(t.TempDir(), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { store.Close() })
			var opts []idempotency.Option
			if c.blobs {
				local, err := ossresult.NewLocal(t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				opts = append(opts, idempotency.WithBlobStore(ossresult.Blobs(local)))
			}
			eng := idempotency.New(store, opts...)
			runs := 0
			for try := range 2 {
				req := idempotency.ClaimRequest{Key: "raw-1", PayloadHash: "ph", Owner: "req-1", Try: try}
				got, _, err := idempotency.Run(context.Background(), eng, req, func(context.Context, *idempotency.Lease) (json.RawMessage, error) {
					runs++
					return raw, nil
				})
				var ie *idempotency.Error
				switch {
				case c.code == "" && (err != nil || string(got) != string(raw)):
					t.Fatalf("try %d: %q %v", try, got, err)
				case c.code != "" && (!errors.As(err, &ie) || ie.Code != c.code || ie.Retryable()):
					t.Fatalf("try %d: %v, want FINAL %s", try, err, c.code)
				}
			}
			if runs != 1 {
				t.Fatalf("fn ran %d times", runs)
			}
		})
	}
}
