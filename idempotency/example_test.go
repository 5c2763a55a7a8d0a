package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/keys"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// docs/library.md quotes this file's functions (TestLibraryGoBlocksAreQuoted
// in docs/): what runs here is what the page shows.

// The quick start (quickstart_test.go: newEngine, chargeOnce) on MySQL and
// Redis, as a function configured by MYSQL_DSN, REDIS_URL and
// REDIS_KEY_PREFIX runs it (the test MariaDB and Redis, as CI=true runs have).
func Example_quickStart() {
	dsn, drop, err := testenv.ExampleMySQL()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer drop()
	url, prefix, clean, err := testenv.ExampleRedis()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer clean()
	for k, v := range map[string]string{"MYSQL_DSN": dsn, "REDIS_URL": url, "REDIS_KEY_PREFIX": prefix} {
		os.Setenv(k, v)
		defer os.Unsetenv(k)
	}
	ctx := context.Background()
	eng, err := newEngine(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	order := map[string]any{"order_id": "o-9", "amount": 1200}
	for _, fcRequestID := range []string{"fc-req-1", "fc-req-2"} { // a delivery, then a duplicate
		out, err := chargeOnce(ctx, eng, "acme", order, fcRequestID, 0)
		fmt.Println(out.Decision, out.ResultRef, err)
	}
	// Output:
	// charging o-9
	// FIRST receipt-o-9 <nil>
	// REPEAT_DONE receipt-o-9 <nil>
}

// chargeCard is the quick start's side effect.
func chargeCard(_ context.Context, input map[string]any) (string, error) {
	fmt.Println("charging", input["order_id"])
	return fmt.Sprint("receipt-", input["order_id"]), nil
}

// what says what to do with an error of Do.
func what(err error) string {
	var ie *idempotency.Error
	switch {
	case err == nil:
		return "done"
	case errors.Is(err, idempotency.ErrInProgress): // someone else is on it (and will be retried if it dies)
		return "in progress"
	case errors.Is(err, idempotency.ErrRetryLater): // deliver again later; acknowledging it could lose the work
		return "retry later"
	case errors.Is(err, idempotency.ErrPayloadMismatch): // a reused key with another body: a client bug
		return "payload mismatch"
	case errors.Is(err, idempotency.ErrStoreUnavailable): // retry later: nothing ran
		return "store unavailable"
	case errors.As(err, &ie) && !ie.Retryable(): // FINAL: ie.Code is stored and answered to every duplicate
		return "final " + ie.Code
	}
	return "retryable" // within the attempt budget
}

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
		fmt.Println(ie.Class, ie.Code, ie.Retryable(), what(err))
	}
	// Output:
	// calling the model
	// FINAL policy_rejected false final policy_rejected
	// FINAL policy_rejected false final policy_rejected
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

// reserveAndCharge claims req once and checkpoints each step: a retry after
// a crash resumes after the last checkpoint.
func reserveAndCharge(ctx context.Context, eng *idempotency.Engine, req idempotency.ClaimRequest) error {
	res, lease, err := eng.Claim(ctx, req)
	if err != nil {
		return err
	}
	if lease == nil {
		return fmt.Errorf("not ours: %s", res.Decision) // a duplicate, or in progress
	}
	ctx, stop := lease.KeepAlive(ctx) // renews; ctx ends with ErrLeaseLost if the fence moved on
	defer stop()
	ids, err := lease.Step(ctx, "reserve", reserveStock) // once per key; skipped when the task resumes
	if err != nil {
		_, _ = lease.Fail(ctx, err)
		return err
	}
	receipt, err := lease.Step(ctx, "charge", func(ctx context.Context) (string, error) { return chargeReserved(ctx, ids) })
	if err != nil {
		_, _ = lease.Fail(ctx, err)
		return err
	}
	return lease.Complete(ctx, receipt)
}

func reserveStock(context.Context) (string, error) {
	fmt.Println("reserving")
	return "res-1", nil
}

func chargeReserved(_ context.Context, ids string) (string, error) {
	fmt.Println("charging", ids)
	return "receipt-" + ids, nil
}

// Steps under KeepAlive: the second delivery finds the key done.
func ExampleLease_KeepAlive() {
	dir, _ := os.MkdirTemp("", "idem")
	defer os.RemoveAll(dir)
	store, _ := boltstore.Open(dir, time.Second)
	defer store.Close()
	eng := idempotency.New(store)
	req := idempotency.ClaimRequest{Key: keys.FromFingerprint("order-11"), Owner: "r1"}
	fmt.Println(reserveAndCharge(context.Background(), eng, req))
	req.Owner = "r2"
	fmt.Println(reserveAndCharge(context.Background(), eng, req))
	// Output:
	// reserving
	// charging res-1
	// <nil>
	// not ours: REPEAT_DONE
}

// chargeAndNotify completes the key, then its finish: the work that must
// follow a success once per key (notify, publish).
func chargeAndNotify(ctx context.Context, eng *idempotency.Engine, req idempotency.ClaimRequest) (idempotency.Outcome, error) {
	req.FinishAfter = true // Do completes with the finish pending
	var lease *idempotency.Lease
	out, err := eng.Do(ctx, req, func(ctx context.Context, l *idempotency.Lease) (string, error) {
		lease = l
		return "receipt-12", nil
	})
	if err != nil || lease == nil {
		return out, err // a duplicate: the holder finishes (past its lease, ClaimFinish or the sweeper does)
	}
	f := lease.Finisher()
	if err := notify(ctx, out.ResultRef); err != nil {
		return out, errors.Join(err, f.Fail(ctx, err)) // FINAL: recorded; retryable: released to the next holder
	}
	return out, f.Done(ctx) // or f.DoneLater(): batched, where a repeat would be harmless
}

func notify(_ context.Context, ref string) error {
	fmt.Println("notifying", ref)
	return nil
}

// A finish after Do: the notification is sent once, by the delivery that
// completed the key, and the record says the finish is done.
func ExampleLease_Finisher() {
	dir, _ := os.MkdirTemp("", "idem")
	defer os.RemoveAll(dir)
	store, _ := boltstore.Open(dir, time.Second)
	defer store.Close()
	eng := idempotency.New(store)
	ctx := context.Background()
	req := idempotency.ClaimRequest{Key: keys.FromFingerprint("order-12")}
	for _, owner := range []string{"r1", "r2"} {
		req.Owner = owner
		out, err := chargeAndNotify(ctx, eng, req)
		fmt.Println(out.Decision, out.ResultRef, err)
	}
	rec, _ := eng.Get(ctx, req.Key)
	fmt.Println("finish", rec.Finish, rec.Finish == driver.FinishDone)
	// Output:
	// notifying receipt-12
	// FIRST receipt-12 <nil>
	// REPEAT_DONE receipt-12 <nil>
	// finish DONE true
}
