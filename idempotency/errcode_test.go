package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/idemtest"
)

// A classified failure says its code once: in the error Do returns, in the
// record (the code is stored apart) and in what a duplicate gets back.
func TestErrorCodeSaidOnce(t *testing.T) {
	store := openBolt(t)
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
// delivery — the claim, the finish claim, Get (which the handler's
// takenOver reads) and a waiting duplicate's poll — never "unknown".
func TestFailedFinishWithoutCodeIsNamed(t *testing.T) {
	store := openBolt(t)
	eng := idempotency.New(store)
	ctx := context.Background()
	req := idempotency.ClaimRequest{Key: idemtest.NewKey(), PayloadHash: "ph", Owner: "first", FinishAfter: true}
	done := func(ctx context.Context, l *idempotency.Lease) (string, error) { return "ref", nil }
	if _, err := eng.Do(ctx, req, done); err != nil {
		t.Fatal(err)
	}
	// failWithoutCode rewrites key's record as a finished one whose finish
	// failed without a code, as migration 005 left them.
	failWithoutCode := func(key string) error {
		return rewrite(store, key, func(r *driver.Record) {
			r.Status, r.ResultRef = driver.StatusSucceeded, "ref"
			r.Finish, r.LastErrorCode, r.LastError = driver.FinishFailed, "", ""
		})
	}
	if err := failWithoutCode(req.Key); err != nil {
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
		{"duplicate that waited (WithWaitInFlight)", func() (string, error) {
			waiting := idempotency.New(store, idempotency.WithWaitInFlight(5*time.Second))
			key := idemtest.NewKey()
			if _, l, err := waiting.Claim(ctx, idempotency.ClaimRequest{Key: key, PayloadHash: "ph", Owner: "first",
				Lease: 5 * time.Second}); err != nil || l == nil {
				return "", fmt.Errorf("claim: %v", err)
			}
			go func() {
				time.Sleep(100 * time.Millisecond) // the waiter meets the live lease first
				_ = failWithoutCode(key)
			}()
			_, err := waiting.Do(ctx, idempotency.ClaimRequest{Key: key, PayloadHash: "ph", Owner: "second"}, done)
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
