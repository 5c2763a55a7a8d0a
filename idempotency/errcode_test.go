package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/idemtest"
)

// A classified failure says its code once: in the error Do returns, in the
// record (the code is stored apart) and in what a duplicate gets back.
func TestErrorCodeSaidOnce(t *testing.T) {
	store, err := boltstore.Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	eng := idempotency.New(store, idempotency.WithMaxAttempts(1))
	tests := []struct {
		name  string
		cause error
		want  string
	}{
		{"final", idempotency.Final("invalid_request", errors.New("input.content is empty")), "invalid_request: input.content is empty"},
		{"retryable, budget spent", idempotency.Retryable("timeout", errors.New("model took too long")), "attempts_exhausted: attempt budget spent after 1 attempts: timeout: model took too long"},
		{"from a step", idempotency.Final("invalid_request", errors.New("bad step input")), "invalid_request: bad step input"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := idempotency.ClaimRequest{Key: idemtest.NewKey(), PayloadHash: "ph", Owner: "first"}
			fn := func(ctx context.Context, l *idempotency.Lease) (string, error) { return "", tc.cause }
			if tc.name == "from a step" {
				fn = func(ctx context.Context, l *idempotency.Lease) (string, error) {
					_, err := l.Step(ctx, "check", func(context.Context) (string, error) { return "", tc.cause })
					return "", err
				}
			}
			_, err := eng.Do(context.Background(), req, fn)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("first: %v; want %q", err, tc.want)
			}
			req.Owner = "second"
			out, err := eng.Do(context.Background(), req, fn)
			if err == nil || err.Error() != tc.want || !out.Duplicate {
				t.Fatalf("duplicate: %v (%+v); want %q", err, out, tc.want)
			}
		})
	}
}

// A finish recorded FAILED without a code (migration 005 marked those of an
// earlier version so) is named finish_failed by every read that answers a
// delivery — the claim, the finish claim and Get (which the handler's
// takenOver reads) — never "unknown".
func TestFailedFinishWithoutCodeIsNamed(t *testing.T) {
	store, err := boltstore.Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	eng := idempotency.New(store)
	ctx := context.Background()
	req := idempotency.ClaimRequest{Key: idemtest.NewKey(), PayloadHash: "ph", Owner: "first", FinishAfter: true}
	done := func(ctx context.Context, l *idempotency.Lease) (string, error) { return "ref", nil }
	if _, err := eng.Do(ctx, req, done); err != nil {
		t.Fatal(err)
	}
	err = store.DB().Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("idempotency_record"))
		var r driver.Record
		if err := json.Unmarshal(b.Get([]byte(req.Key)), &r); err != nil {
			return err
		}
		r.Finish, r.LastErrorCode, r.LastError = driver.FinishFailed, "", ""
		v, err := json.Marshal(r)
		if err != nil {
			return err
		}
		return b.Put([]byte(req.Key), v)
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		code func() (string, error)
	}{
		{"get", func() (string, error) {
			rec, err := eng.Get(ctx, req.Key)
			return rec.LastErrorCode, err
		}},
		{"get now", func() (string, error) {
			rec, _, err := eng.GetNow(ctx, req.Key)
			return rec.LastErrorCode, err
		}},
		{"claim finish", func() (string, error) {
			res, _, err := eng.ClaimFinish(ctx, req.Key, "first", 1)
			return res.Record.LastErrorCode, err
		}},
		{"duplicate", func() (string, error) {
			_, err := eng.Do(ctx, idempotency.ClaimRequest{Key: req.Key, PayloadHash: "ph", Owner: "second"}, done)
			_, code := idempotency.Classify(err)
			return code, nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if code, err := tc.code(); err != nil || code != "finish_failed" {
				t.Fatalf("code %q (%v); want finish_failed", code, err)
			}
		})
	}
}
