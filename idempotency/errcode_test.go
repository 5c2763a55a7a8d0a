package idempotency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
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
