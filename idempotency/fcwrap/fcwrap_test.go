package fcwrap_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aliyun/fc-runtime-go-sdk/fccontext"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/fcwrap"
	"github.com/idemgate/idemgate/idempotency/jcs"
	"github.com/idemgate/idemgate/idempotency/keys"
)

func engine(t *testing.T) *idempotency.Engine {
	t.Helper()
	s, err := boltstore.Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return idempotency.New(s, idempotency.WithLease(time.Minute))
}

func fc(requestID string, try int) context.Context {
	return fccontext.NewContext(context.Background(), &fccontext.FcContext{RequestID: requestID, RetryCount: try})
}

func orderKey(t *testing.T) fcwrap.Key[Order] {
	k, err := fcwrap.JMESPath[Order]("[tenant_id, order_id]")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// counting is a handler that counts its runs and answers with err when set.
func counting(runs *atomic.Int32, err error) func(context.Context, Order) (Receipt, error) {
	return func(_ context.Context, o Order) (Receipt, error) {
		n := runs.Add(1)
		if err != nil {
			return Receipt{}, err
		}
		return Receipt{ID: o.OrderID, Charged: o.Amount * int(n)}, nil
	}
}

func TestWrapRepeatsAnswerTheStoredResult(t *testing.T) {
	var runs atomic.Int32
	h := fcwrap.Wrap(engine(t), orderKey(t), counting(&runs, nil))
	o := Order{TenantID: "t", OrderID: "o-1", Amount: 3}
	a, err1 := h(fc("r1", 0), o)
	b, err2 := h(fc("r2", 0), o)
	if err1 != nil || err2 != nil || a != b || a.Charged != 3 || runs.Load() != 1 {
		t.Fatalf("%+v %v / %+v %v, runs %d", a, err1, b, err2, runs.Load())
	}
	// Another order is another key; the same order with another body a
	// reused key: payload_mismatch, FINAL, not run.
	if _, err := h(fc("r3", 0), Order{TenantID: "t", OrderID: "o-2", Amount: 3}); err != nil || runs.Load() != 2 {
		t.Fatalf("another order: %v, runs %d", err, runs.Load())
	}
	_, err := h(fc("r4", 0), Order{TenantID: "t", OrderID: "o-1", Amount: 4})
	var ie *idempotency.Error
	if !errors.Is(err, idempotency.ErrPayloadMismatch) || !errors.As(err, &ie) || ie.Retryable() || runs.Load() != 2 {
		t.Fatalf("reused key: %v, runs %d", err, runs.Load())
	}
}

func TestWrapPayloadJMESPath(t *testing.T) {
	var runs atomic.Int32
	payload, err := fcwrap.WithPayloadJMESPath[Order, Receipt]("order_id")
	if err != nil {
		t.Fatal(err)
	}
	h := fcwrap.Wrap(engine(t), orderKey(t), counting(&runs, nil), payload)
	a, _ := h(fc("r1", 0), Order{TenantID: "t", OrderID: "o-1", Amount: 3})
	b, err := h(fc("r2", 0), Order{TenantID: "t", OrderID: "o-1", Amount: 9})
	if err != nil || a != b || runs.Load() != 1 {
		t.Fatalf("%+v / %+v %v, runs %d", a, b, err, runs.Load())
	}
	if _, err := fcwrap.WithPayloadJMESPath[Order, Receipt]("order_id["); !errors.Is(err, keys.ErrBadExpression) {
		t.Fatalf("bad payload expression: %v", err)
	}
}

// Owner and try come from FC's context: FC retrying its own request (a
// later try) takes a live lease over at once; another request is in
// progress; a copy of the holder's own try is told to come again.
func TestWrapOwnerAndTryFromTheFCContext(t *testing.T) {
	eng := engine(t)
	release := make(chan struct{})
	running := map[string]chan struct{}{"o-1": make(chan struct{}), "o-2": make(chan struct{})}
	first := map[string]*sync.Once{"o-1": {}, "o-2": {}}
	var runs atomic.Int32
	h := fcwrap.Wrap(eng, orderKey(t), func(_ context.Context, o Order) (Receipt, error) {
		hang := false
		first[o.OrderID].Do(func() { hang = true })
		if hang { // the first try of each order hangs, as one whose instance died
			close(running[o.OrderID])
			<-release
		}
		runs.Add(1)
		return Receipt{ID: o.OrderID}, nil
	})
	done := make(chan error, 2)
	for _, id := range []string{"o-1", "o-2"} {
		go func() { _, err := h(fc("r-"+id, 0), Order{TenantID: "t", OrderID: id}); done <- err }()
		<-running[id]
	}
	o := Order{TenantID: "t", OrderID: "o-1"}
	if _, err := h(fc("r2", 0), o); !errors.Is(err, idempotency.ErrInProgress) {
		t.Fatalf("another request: %v", err)
	}
	if _, err := h(fc("r-o-2", 0), Order{TenantID: "t", OrderID: "o-2"}); !errors.Is(err, idempotency.ErrRetryLater) {
		t.Fatalf("a copy of the holder's own try: %v", err) // never acknowledged: FC delivers it again
	}
	close(release) // from here no run hangs; FC's retry of o-1 takes the live lease over
	if r, err := h(fc("r-o-1", 1), o); err != nil || r.ID != "o-1" {
		t.Fatalf("FC's retry: %+v %v, runs %d", r, err, runs.Load())
	}
	if err := <-done; err != nil && !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("a hung try: %v", err)
	}
}

func TestWrapClassifiesErrors(t *testing.T) {
	for _, c := range []struct {
		name      string
		err       error
		runsAfter int32 // after a second delivery
		code      string
		retryable bool
	}{
		{"final: recorded, answered again without running", idempotency.Final("card_declined", errors.New("declined")), 1, "card_declined", false},
		{"retryable: runs again", idempotency.Retryable("gateway_timeout", errors.New("timeout")), 2, "gateway_timeout", true},
		{"unknown: runs again within the budget", errors.New("boom"), 2, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var runs atomic.Int32
			h := fcwrap.Wrap(engine(t), orderKey(t), counting(&runs, c.err))
			o := Order{TenantID: "t", OrderID: "o-1"}
			_, err1 := h(fc("r1", 0), o)
			_, err2 := h(fc("r1", 1), o)
			var ie *idempotency.Error
			if !errors.As(err2, &ie) || ie.Retryable() != c.retryable || (c.code != "" && ie.Code != c.code) || runs.Load() != c.runsAfter {
				t.Fatalf("%v / %v, runs %d", err1, err2, runs.Load())
			}
		})
	}
}

func TestWrapRefusesWhatHasNoKey(t *testing.T) {
	var runs atomic.Int32
	h := fcwrap.Wrap(engine(t), orderKey(t), counting(&runs, nil))
	// No order_id: FC decoded {"orderId":"A-1"} and {"orderId":"B-2"} alike,
	// and [tenant_id, order_id] selects [t, ""] for both — one key for two
	// orders (B answered with A's receipt) unless "" is nothing.
	for _, o := range []Order{{TenantID: "t", Amount: 1}, {TenantID: "t", Amount: 2}} {
		_, err := h(fc("r1", 0), o)
		var ie *idempotency.Error
		if !errors.Is(err, keys.ErrNothingSelected) || !errors.As(err, &ie) || ie.Code != "invalid_request" || ie.Retryable() || runs.Load() != 0 {
			t.Fatalf("an absent string field: %v, runs %d", err, runs.Load())
		}
	}
	raw, err := fcwrap.JMESPath[json.RawMessage]("detail.order_id")
	if err != nil {
		t.Fatal(err)
	}
	hr := fcwrap.Wrap(engine(t), raw, func(context.Context, json.RawMessage) (string, error) { runs.Add(1); return "ran", nil })
	_, err = hr(fc("r2", 0), json.RawMessage(`{"detail":{}}`))
	var ie *idempotency.Error
	if !errors.As(err, &ie) || ie.Code != "invalid_request" || ie.Retryable() || !errors.Is(err, keys.ErrNothingSelected) || runs.Load() != 0 {
		t.Fatalf("selects nothing: %v, runs %d", err, runs.Load())
	}
	if _, err := fcwrap.JMESPath[Order]("nope(order_id)"); !errors.Is(err, keys.ErrBadExpression) {
		t.Fatalf("bad expression: %v", err)
	}
	for _, k := range []string{"", strings.Repeat("k", 65)} {
		bad := fcwrap.Wrap(engine(t), func(Order) (string, error) { return k, nil }, counting(&runs, nil))
		if _, err := bad(fc("r3", 0), Order{}); !errors.As(err, &ie) || ie.Code != "invalid_request" || runs.Load() != 0 {
			t.Fatalf("key of %d bytes: %v", len(k), err)
		}
	}
}

func TestWrapResponseHook(t *testing.T) {
	var runs, hooks atomic.Int32
	hookErr := errors.New("hook refused")
	h := fcwrap.Wrap(engine(t), orderKey(t), counting(&runs, nil),
		fcwrap.WithResponseHook[Order](func(_ context.Context, r Receipt, out idempotency.Outcome) (Receipt, error) {
			if hooks.Add(1) == 2 {
				return r, hookErr
			}
			if !out.Duplicate {
				t.Errorf("hook on a fresh answer: %+v", out)
			}
			r.ID = "replayed"
			return r, nil
		}))
	o := Order{TenantID: "t", OrderID: "o-1", Amount: 1}
	first, _ := h(fc("r1", 0), o)
	second, err2 := h(fc("r2", 0), o)
	_, err3 := h(fc("r3", 0), o)
	if first.ID != "o-1" || second.ID != "replayed" || err2 != nil || !errors.Is(err3, hookErr) || hooks.Load() != 2 || runs.Load() != 1 {
		t.Fatalf("%+v / %+v %v / %v, hooks %d", first, second, err2, err3, hooks.Load())
	}
}

// Cart is an event whose optional list is nil when absent.
type Cart struct {
	CartID string   `json:"cart_id"`
	Items  []string `json:"items"`
}

// What an event's key selects, case by case: a selected object may hold a
// null (a nil slice), a multi-select's members may not.
func TestWrapKeySelection(t *testing.T) {
	for _, c := range []struct {
		name, expr string
		event      Cart
		nothing    bool
	}{
		{"the whole event, a nil slice in it", "@", Cart{CartID: "c-1"}, false},
		{"a list with the nil slice as a member", "[cart_id, items]", Cart{CartID: "c-1"}, true},
		{"a list, all there", "[cart_id, items]", Cart{CartID: "c-1", Items: []string{"a"}}, false},
		{"an absent string field", "cart_id", Cart{Items: []string{"a"}}, true},
		{"a list with an absent string field", "[cart_id, items]", Cart{Items: []string{"a"}}, true},
		{"the whole event, an absent string field in it", "@", Cart{Items: []string{"a"}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			key, err := fcwrap.JMESPath[Cart](c.expr)
			if err != nil {
				t.Fatal(err)
			}
			var runs atomic.Int32
			h := fcwrap.Wrap(engine(t), key, func(context.Context, Cart) (string, error) { runs.Add(1); return "ok", nil })
			_, err = h(fc("r1", 0), c.event)
			var ie *idempotency.Error
			switch {
			case c.nothing && (!errors.Is(err, keys.ErrNothingSelected) || !errors.As(err, &ie) || ie.Retryable() || runs.Load() != 0):
				t.Fatalf("%v, runs %d: want FINAL, nothing selected", err, runs.Load())
			case !c.nothing && (err != nil || runs.Load() != 1):
				t.Fatalf("%v, runs %d", err, runs.Load())
			}
		})
	}
}

// Account is an event with an id a double cannot hold.
type Account struct {
	OrderID string `json:"order_id"`
	UserID  int64  `json:"user_id"`
}

// The number rule is for what the key and the payload select: a typed
// event's int64 over 2^53 elsewhere runs, and the default payload (the
// whole event) keeps it exact, so its neighbour is another payload.
func TestWrapNumberRuleIsForTheSelection(t *testing.T) {
	const id = 1<<53 + 1 // 9007199254740993: a double holds only its neighbour 2^53
	for _, c := range []struct {
		name, key, payload string
		refused            bool
		neighbour          error // the same order with user 2^53: what it is answered
	}{
		{"unselected, the default payload", "order_id", "", false, idempotency.ErrPayloadMismatch},
		{"unselected by both", "order_id", "order_id", false, nil},
		{"selected by the key", "user_id", "", true, nil},
		{"a member of the key", "[order_id, user_id]", "", true, nil},
		{"selected by the payload", "order_id", "[order_id, user_id]", true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			key, err := fcwrap.JMESPath[Account](c.key)
			if err != nil {
				t.Fatal(err)
			}
			var opts []fcwrap.Option[Account, string]
			if c.payload != "" {
				p, err := fcwrap.WithPayloadJMESPath[Account, string](c.payload)
				if err != nil {
					t.Fatal(err)
				}
				opts = append(opts, p)
			}
			var runs atomic.Int32
			h := fcwrap.Wrap(engine(t), key, func(context.Context, Account) (string, error) { runs.Add(1); return "ok", nil }, opts...)
			_, err = h(fc("r1", 0), Account{OrderID: "o-1", UserID: id})
			var ie *idempotency.Error
			if c.refused {
				if !errors.Is(err, jcs.ErrNumber) || !errors.As(err, &ie) || ie.Code != "invalid_request" || ie.Retryable() || runs.Load() != 0 {
					t.Fatalf("%v, runs %d: want FINAL invalid_request naming the number", err, runs.Load())
				}
				return
			}
			_, err2 := h(fc("r2", 0), Account{OrderID: "o-1", UserID: id})
			_, err3 := h(fc("r3", 0), Account{OrderID: "o-1", UserID: 1 << 53})
			if err != nil || err2 != nil || !errors.Is(err3, c.neighbour) || runs.Load() != 1 {
				t.Fatalf("%v / repeat %v / neighbour %v, runs %d", err, err2, err3, runs.Load())
			}
		})
	}
}
