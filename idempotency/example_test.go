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

// The lower-level operations, for pipelines with checkpointed steps: a
// step's result is recorded once per key, and the step is skipped when the
// task is resumed.
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

// The typed form: the result is stored as JSON and every later delivery
// gets the same value back, a zero value included. Results larger than a
// record holds go to a blob store (WithBlobStore).
func ExampleRun() {
	dir, _ := os.MkdirTemp("", "idem")
	defer os.RemoveAll(dir)
	store, _ := boltstore.Open(dir, time.Second)
	defer store.Close()
	eng := idempotency.New(store)

	type Quote struct {
		Price    int      `json:"price"`
		Warnings []string `json:"warnings"`
	}
	req := idempotency.ClaimRequest{Key: keys.FromFingerprint("quote-for-cart-17"), Owner: "r1"}
	for _, owner := range []string{"r1", "r2"} {
		req.Owner = owner
		q, out, err := idempotency.Run(context.Background(), eng, req, func(context.Context, *idempotency.Lease) (Quote, error) {
			fmt.Println("pricing")
			return Quote{Price: 0, Warnings: []string{}}, nil // a free cart: zero, empty, and still the answer
		})
		fmt.Printf("%s %+v %v\n", out.Decision, q, err)
	}
	// Output:
	// pricing
	// FIRST {Price:0 Warnings:[]} <nil>
	// REPEAT_DONE {Price:0 Warnings:[]} <nil>
}

// A duplicate that meets a live lease can wait for the owner's result
// instead of being answered "in progress" (ErrInProgress).
func ExampleWithWaitInFlight() {
	dir, _ := os.MkdirTemp("", "idem")
	defer os.RemoveAll(dir)
	store, _ := boltstore.Open(dir, time.Second)
	defer store.Close()
	eng := idempotency.New(store, idempotency.WithWaitInFlight(5*time.Second))
	req := idempotency.ClaimRequest{Key: keys.Window("daily-report", time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), 24*time.Hour)}

	started := make(chan struct{})
	first := make(chan idempotency.Outcome)
	go func() {
		r := req
		r.Owner = "r1"
		out, _ := eng.Do(context.Background(), r, func(context.Context, *idempotency.Lease) (string, error) {
			close(started)
			time.Sleep(200 * time.Millisecond) // the report takes a while
			return "report-2026-11-30", nil
		})
		first <- out
	}()
	<-started
	r := req
	r.Owner = "r2" // the double click, while r1 still runs
	out, err := eng.Do(context.Background(), r, func(context.Context, *idempotency.Lease) (string, error) {
		fmt.Println("never runs")
		return "", nil
	})
	fmt.Println("duplicate:", out.Decision, out.ResultRef, err)
	fmt.Println("first:", (<-first).Decision)
	// Output:
	// duplicate: REPEAT_DONE report-2026-11-30 <nil>
	// first: FIRST
}

// The kill switch for tests and local runs: the function runs every time
// and nothing is claimed or recorded (IDEMPOTENCY_DISABLED=true in the
// template, refused where IDEMGATE_ENV=production).
func ExampleWithDisabled() {
	dir, _ := os.MkdirTemp("", "idem")
	defer os.RemoveAll(dir)
	store, _ := boltstore.Open(dir, time.Second)
	defer store.Close()
	eng := idempotency.New(store, idempotency.WithDisabled())
	req := idempotency.ClaimRequest{Key: keys.FromFingerprint("any"), Owner: "r1"}
	for range 2 {
		out, _ := eng.Do(context.Background(), req, func(context.Context, *idempotency.Lease) (string, error) {
			fmt.Println("runs")
			return "x", nil
		})
		fmt.Println(out.Decision)
	}
	// Output:
	// runs
	// DISABLED
	// runs
	// DISABLED
}
