package fcwrap_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/aliyun/fc-runtime-go-sdk/fccontext"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/fcwrap"
	"github.com/idemgate/idemgate/idempotency/mysqlstore"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

type Order struct {
	TenantID string `json:"tenant_id"`
	OrderID  string `json:"order_id"`
	Amount   int    `json:"amount"`
}

type Receipt struct {
	ID      string `json:"id"`
	Charged int    `json:"charged"`
}

// charge is a user's own FC handler, with no idempotency code in it.
func charge(ctx context.Context, o Order) (Receipt, error) {
	fmt.Println("charging", o.OrderID)
	return Receipt{ID: "rcpt-" + o.OrderID, Charged: o.Amount}, nil
}

// demo delivers one order three times, as FC may: the handler runs once,
// the repeats get the stored Receipt. (docs/library.md quotes it.)
func demo(store driver.Store) error {
	// The lines that make charge idempotent:
	eng := idempotency.New(store)
	key, err := fcwrap.JMESPath[Order]("[tenant_id, order_id]") // or fcwrap.Key[Order](func(o Order) (string, error) {…})
	if err != nil {
		return err
	}
	handler := fcwrap.Wrap(eng, key, charge) // charge: func(context.Context, Order) (Receipt, error); fc.Start(handler) in main

	for i, requestID := range []string{"fc-req-1", "fc-req-1", "fc-req-2"} {
		ctx := fccontext.NewContext(context.Background(), &fccontext.FcContext{RequestID: requestID, RetryCount: i})
		r, err := handler(ctx, Order{TenantID: "acme", OrderID: "o-7", Amount: 1200})
		fmt.Println(r.ID, r.Charged, err)
	}
	return nil
}

func ExampleWrap() {
	dir, _ := os.MkdirTemp("", "fcwrap")
	defer os.RemoveAll(dir)
	store, _ := boltstore.Open(dir, time.Second)
	defer store.Close()
	if err := demo(store); err != nil {
		fmt.Println(err)
	}
	// Output:
	// charging o-7
	// rcpt-o-7 1200 <nil>
	// rcpt-o-7 1200 <nil>
	// rcpt-o-7 1200 <nil>
}

// The same on MySQL (it needs the test MariaDB, as CI=true runs have).
func ExampleWrap_mySQL() {
	dsn, drop, err := testenv.ExampleMySQL()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer drop()
	store, _ := mysqlstore.Open(dsn, mysqlstore.Options{})
	defer store.Close()
	if _, err := store.Migrate(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	if err := demo(store); err != nil {
		fmt.Println(err)
	}
	// Output:
	// charging o-7
	// rcpt-o-7 1200 <nil>
	// rcpt-o-7 1200 <nil>
	// rcpt-o-7 1200 <nil>
}

// A response hook marks what was replayed rather than produced now.
func ExampleWithResponseHook() {
	dir, _ := os.MkdirTemp("", "fcwrap")
	defer os.RemoveAll(dir)
	store, _ := boltstore.Open(dir, time.Second)
	defer store.Close()
	eng := idempotency.New(store)
	key := fcwrap.Key[Order](func(o Order) (string, error) { return o.TenantID + ":" + o.OrderID, nil })
	handler := fcwrap.Wrap(eng, key, charge, fcwrap.WithResponseHook[Order](func(_ context.Context, r Receipt, out idempotency.Outcome) (Receipt, error) {
		r.ID += " (replayed, " + string(out.Decision) + ")"
		return r, nil
	}))
	for range 2 {
		r, err := handler(context.Background(), Order{TenantID: "acme", OrderID: "o-8", Amount: 5})
		fmt.Println(r.ID, err)
	}
	// Output:
	// charging o-8
	// rcpt-o-8 <nil>
	// rcpt-o-8 (replayed, REPEAT_DONE) <nil>
}

// wrapByAmount is charge wrapped so that a repeat must match only the
// order's amount: another amount under the same key is refused.
func wrapByAmount(eng *idempotency.Engine, key fcwrap.Key[Order]) (func(context.Context, Order) (Receipt, error), error) {
	payload, err := fcwrap.WithPayloadJMESPath[Order, Receipt]("amount") // an option, and an error for a bad expression
	if err != nil {
		return nil, err
	}
	return fcwrap.Wrap(eng, key, charge, payload), nil
}

// The payload a repeat must match, narrowed to the amount.
func ExampleWithPayloadJMESPath() {
	dir, _ := os.MkdirTemp("", "fcwrap")
	defer os.RemoveAll(dir)
	store, _ := boltstore.Open(dir, time.Second)
	defer store.Close()
	key, _ := fcwrap.JMESPath[Order]("[tenant_id, order_id]")
	handler, err := wrapByAmount(idempotency.New(store), key)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, amount := range []int{1200, 1200, 900} {
		r, err := handler(context.Background(), Order{TenantID: "acme", OrderID: "o-10", Amount: amount})
		fmt.Printf("%q %v\n", r.ID, errors.Is(err, idempotency.ErrPayloadMismatch))
	}
	// Output:
	// charging o-10
	// "rcpt-o-10" false
	// "rcpt-o-10" false
	// "" true
}
