package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/keys"
)

// Powertools-style use from any FC function: derive the business key, then
// run the action through Do. The second delivery gets the stored outcome.
func ExampleEngine_Do() {
	dir, _ := os.MkdirTemp("", "idem")
	defer os.RemoveAll(dir)
	store, _ := boltstore.Open(dir, time.Second) // mysqlstore.Open(dsn, …) in production
	defer store.Close()
	eng := idempotency.New(store, idempotency.WithMaxAttempts(3))

	k, _ := keys.Derive(keys.Fields{TenantID: "t1", TaskType: "summarize", Operation: "summarize",
		Input: []byte(`{"content":"hello"}`)})
	req := idempotency.ClaimRequest{Key: k.Key, PayloadHash: k.PayloadHash, Owner: "fc-request-1"}
	charge := func(ctx context.Context, l *idempotency.Lease) (string, error) {
		fmt.Println("charging once, attempt", l.Attempt)
		return "receipt-42", nil
	}
	for _, owner := range []string{"fc-request-1", "fc-request-2"} {
		req.Owner = owner
		out, err := eng.Do(context.Background(), req, charge)
		fmt.Println(out.Status, out.Decision, out.Duplicate, out.ResultRef, err)
	}
	// Output:
	// charging once, attempt 1
	// SUCCEEDED FIRST false receipt-42 <nil>
	// SUCCEEDED REPEAT_DONE true receipt-42 <nil>
}

// A classified failure: FINAL errors are recorded at once and every later
// delivery answers the same error without running.
func ExampleEngine_Do_finalError() {
	dir, _ := os.MkdirTemp("", "idem")
	defer os.RemoveAll(dir)
	store, _ := boltstore.Open(dir, time.Second)
	defer store.Close()
	eng := idempotency.New(store)
	req := idempotency.ClaimRequest{Key: "4f1c0e0a6a3b4a27b5d8c1e2f3a4b5c6d7e8f90112233445566778899aabbccd", Owner: "r1"}
	for range 2 {
		_, err := eng.Do(context.Background(), req, func(context.Context, *idempotency.Lease) (string, error) {
			fmt.Println("calling the model")
			return "", idempotency.Final("policy_rejected", errors.New("data_inspection_failed"))
		})
		var ie *idempotency.Error
		errors.As(err, &ie)
		fmt.Println(ie.Class, ie.Code, ie.Retryable())
	}
	// Output:
	// calling the model
	// FINAL policy_rejected false
	// FINAL policy_rejected false
}

// The lower-level operations, for pipelines with checkpointed steps: a step
// runs at most once per key and is skipped when the task is resumed.
func ExampleLease_Step() {
	dir, _ := os.MkdirTemp("", "idem")
	defer os.RemoveAll(dir)
	store, _ := boltstore.Open(dir, time.Second)
	defer store.Close()
	eng := idempotency.New(store)
	ctx := context.Background()
	key := "0b1c0e0a6a3b4a27b5d8c1e2f3a4b5c6d7e8f90112233445566778899aabbccd"

	res, lease, err := eng.Claim(ctx, idempotency.ClaimRequest{Key: key, Owner: "r1"})
	if err != nil || lease == nil {
		fmt.Println("not ours:", res.Decision, err)
		return
	}
	for range 2 {
		out, _ := lease.Step(ctx, "notify", func(context.Context) (string, error) {
			fmt.Println("posting the webhook")
			return "202", nil
		})
		fmt.Println("notify:", out)
	}
	fmt.Println(lease.Complete(ctx, "result-ref"))
	// Output:
	// posting the webhook
	// notify: 202
	// notify: 202
	// <nil>
}
