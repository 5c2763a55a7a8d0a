// Package resulttest is the conformance suite every result store runs (the
// local directory store, the OSS store on the fake): create-once, identical
// re-put, conflicts, metadata, and concurrent writers.
package resulttest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/ossresult"
)

// Store is the API under test, as the pipeline uses it.
type Store interface {
	PutOnce(ctx context.Context, key string, body []byte, contentType string, m ossresult.Meta) (string, error)
	Get(ctx context.Context, key string) ([]byte, ossresult.Meta, error)
	Ref(key string) string
}

// Subject is one fresh, empty store and a way to see what it holds.
type Subject struct {
	Store Store
	// Keys lists the object keys the backend holds, so the suite can prove
	// that concurrent writers left exactly one object and no debris.
	Keys func(t *testing.T) []string
	// Kind reads back the kind the backend recorded for key at write time
	// (the OSS object's idemgate-kind tag, the local metadata file's kind).
	Kind func(t *testing.T, key string) string
}

// Run runs every case, each on a fresh subject from open.
func Run(t *testing.T, open func(t *testing.T) Subject) {
	for _, c := range []struct {
		name string
		run  func(*testing.T, Subject)
	}{
		{"CreateOnceRoundTrip", createOnce},
		{"IdenticalRePutSucceeds", identicalRePut},
		{"DifferentContentConflicts", conflict},
		{"GetMissingIsNotFound", missing},
		{"InvalidKeysRefused", invalidKeys},
		{"Concurrent32SameBytes", concurrentSame},
		{"Concurrent32DifferentBytes", concurrentDifferent},
		{"KindRecordedAtWrite", kindRecorded},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, open(t)) })
	}
}

// kindRecorded: every object of the layout carries its kind from the
// moment it exists (lifecycle rules expire inputs and attempts by it); any
// other key carries none.
func kindRecorded(t *testing.T, s Subject) {
	k := NewKey()
	for _, tc := range []struct{ name, key, want string }{
		{"input", must(t)(ossresult.InputKey(k)), ossresult.KindInput},
		{"attempt", must(t)(ossresult.AttemptKey(k, 2)), ossresult.KindAttempt},
		{"approved", must(t)(ossresult.ApprovedKey(k)), ossresult.KindApproved},
		{"outside the layout", "misc/" + k, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Store.PutOnce(ctx(t), tc.key, []byte("{}"), "application/json", ossresult.Meta{IdempotencyKey: k}); err != nil {
				t.Fatal(err)
			}
			if got := s.Kind(t, tc.key); got != tc.want {
				t.Fatalf("kind of %s = %q, want %q", tc.key, got, tc.want)
			}
		})
	}
}

// NewKey returns a fresh 64-hex business key.
func NewKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// must unwraps a layout helper's answer: must(t)(ossresult.InputKey(k)).
func must(t *testing.T) func(string, error) string {
	return func(key string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return key
	}
}

func createOnce(t *testing.T, s Subject) {
	k := NewKey()
	for _, tc := range []struct {
		name, key, ctype string
		body             []byte
	}{
		{"input", must(t)(ossresult.InputKey(k)), "application/json", []byte(`{"content":"hello"}`)},
		{"attempt", must(t)(ossresult.AttemptKey(k, 1)), "application/json", []byte(`{"summary":"hi"}`)},
		{"approved", must(t)(ossresult.ApprovedKey(k)), "text/markdown; charset=utf-8", []byte("# Summary\n\nhi\n")},
		{"empty body", "misc/empty", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := ossresult.Meta{IdempotencyKey: k, RequestID: "req-" + tc.name}
			ref, err := s.Store.PutOnce(ctx(t), tc.key, tc.body, tc.ctype, m)
			if err != nil {
				t.Fatalf("PutOnce: %v", err)
			}
			if ref != s.Store.Ref(tc.key) {
				t.Fatalf("ref = %q, Ref(key) = %q", ref, s.Store.Ref(tc.key))
			}
			body, gotMeta, err := s.Store.Get(ctx(t), tc.key)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if !bytes.Equal(body, tc.body) || gotMeta != m {
				t.Fatalf("Get = %q %+v, want %q %+v", body, gotMeta, tc.body, m)
			}
		})
	}
	if got := s.Keys(t); len(got) != 4 {
		t.Fatalf("store holds %v, want 4 objects", got)
	}
}

func identicalRePut(t *testing.T, s Subject) {
	k := NewKey()
	key := must(t)(ossresult.AttemptKey(k, 7))
	body := []byte(`{"summary":"same"}`)
	first := ossresult.Meta{IdempotencyKey: k, RequestID: "req-1"}
	ref1, err := s.Store.PutOnce(ctx(t), key, body, "application/json", first)
	if err != nil {
		t.Fatal(err)
	}
	// A retry whose first answer was lost: other request id, same bytes.
	ref2, err := s.Store.PutOnce(ctx(t), key, body, "application/json", ossresult.Meta{IdempotencyKey: k, RequestID: "req-2"})
	if err != nil || ref2 != ref1 {
		t.Fatalf("re-put = %q, %v; want %q, nil", ref2, err, ref1)
	}
	if _, m, err := s.Store.Get(ctx(t), key); err != nil || m != first {
		t.Fatalf("metadata after re-put = %+v, %v; want the first writer's %+v", m, err, first)
	}
}

func conflict(t *testing.T, s Subject) {
	k := NewKey()
	key := must(t)(ossresult.ApprovedKey(k))
	if _, err := s.Store.PutOnce(ctx(t), key, []byte("first"), "text/markdown", ossresult.Meta{IdempotencyKey: k}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"other bytes", []byte("second")},
		{"same length", []byte("FIRST")},
		{"prefix", []byte("firs")},
		{"empty", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Store.PutOnce(ctx(t), key, tc.body, "text/markdown", ossresult.Meta{IdempotencyKey: k})
			if !errors.Is(err, ossresult.ErrConflict) || ossresult.Retryable(err) {
				t.Fatalf("PutOnce = %v (retryable %v), want non-retryable ErrConflict", err, ossresult.Retryable(err))
			}
		})
	}
	if body, _, err := s.Store.Get(ctx(t), key); err != nil || string(body) != "first" {
		t.Fatalf("after conflicts Get = %q, %v", body, err)
	}
}

func missing(t *testing.T, s Subject) {
	_, _, err := s.Store.Get(ctx(t), must(t)(ossresult.InputKey(NewKey())))
	if !errors.Is(err, ossresult.ErrNotFound) || ossresult.Retryable(err) {
		t.Fatalf("Get missing = %v, want non-retryable ErrNotFound", err)
	}
}

func invalidKeys(t *testing.T, s Subject) {
	for _, tc := range []struct{ name, key string }{
		{"empty", ""},
		{"leading slash", "/tasks/x"},
		{"dot dot", "tasks/../../etc/passwd"},
		{"dot", "tasks/./x"},
		{"double slash", "tasks//x"},
		{"trailing slash", "tasks/x/"},
		{"hidden segment", "tasks/.x"},
		{"metadata suffix", "tasks/x.meta.json"},
		{"control character", "tasks/x\ny"},
		{"backslash", `tasks\x`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Store.PutOnce(ctx(t), tc.key, []byte("x"), "", ossresult.Meta{})
			if !errors.Is(err, ossresult.ErrInvalid) || ossresult.Retryable(err) {
				t.Fatalf("PutOnce(%q) = %v, want ErrInvalid", tc.key, err)
			}
			if _, _, err := s.Store.Get(ctx(t), tc.key); !errors.Is(err, ossresult.ErrInvalid) {
				t.Fatalf("Get(%q) = %v, want ErrInvalid", tc.key, err)
			}
		})
	}
	_, err := s.Store.PutOnce(ctx(t), "ok/key", []byte("x"), "", ossresult.Meta{RequestID: "a\r\nX-Injected: 1"})
	if !errors.Is(err, ossresult.ErrInvalid) {
		t.Fatalf("metadata with CRLF = %v, want ErrInvalid", err)
	}
	_, err = s.Store.PutOnce(ctx(t), "ok/key", []byte("x"), "text/plain\r\nX-Injected: 1", ossresult.Meta{})
	if !errors.Is(err, ossresult.ErrInvalid) {
		t.Fatalf("content type with CRLF = %v, want ErrInvalid", err)
	}
	if got := s.Keys(t); len(got) != 0 {
		t.Fatalf("invalid writes left %v", got)
	}
}

const writers = 32

// race runs PutOnce from 32 goroutines released together; body(i) is writer i's bytes.
func race(t *testing.T, s Subject, key string, body func(i int) []byte) (refs []string, errs []error) {
	refs, errs = make([]string, writers), make([]error, writers)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range writers {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			refs[i], errs[i] = s.Store.PutOnce(context.Background(), key, body(i), "application/json",
				ossresult.Meta{IdempotencyKey: "k", RequestID: fmt.Sprintf("req-%d", i)})
		}()
	}
	start.Done()
	done.Wait()
	return refs, errs
}

func concurrentSame(t *testing.T, s Subject) {
	key := must(t)(ossresult.AttemptKey(NewKey(), 1))
	body := []byte(`{"summary":"everyone agrees"}`)
	refs, errs := race(t, s, key, func(int) []byte { return body })
	for i, err := range errs {
		if err != nil || refs[i] != s.Store.Ref(key) {
			t.Fatalf("writer %d: %q, %v", i, refs[i], err)
		}
	}
	if got := s.Keys(t); !slices.Equal(got, []string{key}) {
		t.Fatalf("store holds %v, want exactly [%s]", got, key)
	}
	if got, _, err := s.Store.Get(ctx(t), key); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("Get = %q, %v", got, err)
	}
}

func concurrentDifferent(t *testing.T, s Subject) {
	key := must(t)(ossresult.AttemptKey(NewKey(), 2))
	body := func(i int) []byte { return fmt.Appendf(nil, `{"writer":%d}`, i) }
	_, errs := race(t, s, key, body)
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("writers %d and %d both won", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, ossresult.ErrConflict):
			t.Fatalf("writer %d: %v, want ErrConflict", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer won")
	}
	got, m, err := s.Store.Get(ctx(t), key)
	if err != nil || !bytes.Equal(got, body(winner)) || m.RequestID != fmt.Sprintf("req-%d", winner) {
		t.Fatalf("Get = %q %+v, %v; want the winner %d's bytes and metadata", got, m, err, winner)
	}
	if keys := s.Keys(t); !slices.Equal(keys, []string{key}) {
		t.Fatalf("store holds %v, want exactly [%s]", keys, key)
	}
}
