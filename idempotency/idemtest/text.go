package idemtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
)

// failureText: a failure is recorded whatever its message holds. A message
// cut at the record's bound in the middle of a character, or an error text
// holding invalid UTF-8 (a wrapped response body), is invalid UTF-8, which
// MySQL refuses (1366): the failure would not be recorded, and the key
// would wait out its lease on every attempt. The record keeps valid text.
func failureText(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	for _, c := range []struct{ name, code, msg string }{
		{"cut mid-character", "upstream", strings.Repeat("x", 999) + "订单 failed"},
		{"an invalid byte", "upstream", "upstream said \xff\xfe"},
		{"a NUL", "upstream", "upstream said \x00"},
		{"a long code", strings.Repeat("c", 100), "upstream failed"},
		{"a code with an invalid byte", "up\xff", "upstream failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := NewKey()
			_, err := e.Do(context.Background(), req(key, "a"), func(context.Context, *idempotency.Lease) (string, error) {
				return "", idempotency.Retryable(c.code, errors.New(c.msg))
			})
			if err == nil {
				t.Fatal("no error")
			}
			rec := get(t, e, key)
			want(t, "status", rec.Status, driver.StatusFailedRetryable)
			if !utf8.ValidString(rec.LastError) || !strings.Contains(rec.LastError, c.msg[:10]) ||
				!utf8.ValidString(rec.LastErrorCode) || !strings.HasPrefix(rec.LastErrorCode, c.code[:2]) {
				t.Fatalf("last error %q %q", rec.LastErrorCode, rec.LastError)
			}
			var ie *idempotency.Error
			if !errors.As(err, &ie) || ie.Code != rec.LastErrorCode { // the first answer says what every repeat will
				t.Fatalf("answered code %q, recorded %q", ie.Code, rec.LastErrorCode)
			}
		})
	}
}

// metaText: the record's text fields follow one rule on every store:
// invalid UTF-8 in one (a library caller's tenant), or more characters than
// MySQL's column holds, is FINAL invalid_request before any store sees it —
// MySQL refused the first with 1366, a retryable "store unavailable" on
// every try, and the second FINAL, where bbolt kept both.
func metaText(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	for _, c := range []struct {
		name string
		edit func(*driver.Meta)
	}{
		{"tenant_id", func(m *driver.Meta) { m.TenantID = "t\xff" }},
		{"task_type", func(m *driver.Meta) { m.TaskType = "s\xff" }},
		{"operation", func(m *driver.Meta) { m.Operation = "o\xff" }},
		{"origin request id", func(m *driver.Meta) { m.OriginRequestID = "r\xff" }},
		{"event id", func(m *driver.Meta) { m.EventID = "e\xff" }},
		{"tenant_id over 128 characters", func(m *driver.Meta) { m.TenantID = strings.Repeat("t", 129) }},
		{"traceparent over 55 characters", func(m *driver.Meta) { m.TraceParent = strings.Repeat("0", 56) }},
		{"event id over 255 characters", func(m *driver.Meta) { m.EventID = strings.Repeat("é", 256) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := req(NewKey(), "a")
			c.edit(&r.Meta)
			_, err := e.Do(context.Background(), r, func(context.Context, *idempotency.Lease) (string, error) {
				t.Error("ran with a refused field")
				return "", nil
			})
			var ie *idempotency.Error
			if !errors.As(err, &ie) || ie.Code != "invalid_request" || ie.Retryable() {
				t.Fatalf("%v, want FINAL invalid_request", err)
			}
		})
	}
}

// resultText: a result that is not valid UTF-8 is FINAL result_not_utf8,
// recorded once — the work is done, and MySQL would refuse to record it on
// every try, so fn would run on every delivery.
func resultText(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	key := NewKey()
	runs := 0
	for _, owner := range []string{"a", "b"} {
		_, err := e.Do(context.Background(), req(key, owner), func(context.Context, *idempotency.Lease) (string, error) {
			runs++
			return "ref-\xff", nil
		})
		var ie *idempotency.Error
		if !errors.As(err, &ie) || ie.Code != "result_not_utf8" || ie.Retryable() {
			t.Fatalf("%s: %v, want FINAL result_not_utf8", owner, err)
		}
	}
	want(t, "runs", runs, 1)
	want(t, "status", get(t, e, key).Status, driver.StatusFailedFinal)
}

// stepName: a step name that is not valid UTF-8 is refused before its fn
// runs — checkpointed as JSON it would come back another name, and a
// resumed lease would run the step again.
func stepName(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	ran := false
	_, err := e.Do(context.Background(), req(NewKey(), "a"), func(ctx context.Context, l *idempotency.Lease) (string, error) {
		return l.Step(ctx, "charge-\xff", func(context.Context) (string, error) {
			ran = true
			return "charged", nil
		})
	})
	var ie *idempotency.Error
	if !errors.As(err, &ie) || ie.Code != "invalid_request" || ie.Retryable() || ran {
		t.Fatalf("%v (ran %v), want FINAL invalid_request before the step runs", err, ran)
	}
}

// auditText: a replay's or forget's audit text follows the claim's rule —
// MySQL refused invalid UTF-8 there with a retryable "store unavailable"
// — and the record is left as it was.
func auditText(t *testing.T, h Harness) {
	e := h.NewEngine(t)
	key := NewKey()
	if _, err := e.Do(context.Background(), req(key, "a"), func(context.Context, *idempotency.Lease) (string, error) {
		return "", idempotency.Final("bad", errors.New("refused"))
	}); err == nil {
		t.Fatal("no error")
	}
	for _, rp := range []driver.Replay{{Reason: "r\xff", Operator: "o"}, {Reason: "r", Operator: "o\xff"}} {
		if _, _, err := e.Reset(context.Background(), key, rp); !errors.Is(err, driver.ErrInvalid) {
			t.Fatalf("reset %+v: %v, want driver.ErrInvalid", rp, err)
		}
		if _, err := e.Forget(context.Background(), key, rp); !errors.Is(err, driver.ErrInvalid) {
			t.Fatalf("forget %+v: %v, want driver.ErrInvalid", rp, err)
		}
	}
	rec := get(t, e, key)
	want(t, "status", rec.Status, driver.StatusFailedFinal)
	want(t, "fence", rec.Fence, 1)
}
