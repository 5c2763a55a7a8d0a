package handler

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/idemgate/idemgate/idempotency"
)

// FuzzOutcome: whatever strings reach an outcome (keys, request ids, error
// messages quoting hostile input), the encoder produces valid JSON that
// decodes back to the same values, and a failure body keeps the FC shape.
func FuzzOutcome(f *testing.F) {
	f.Add("k", "SUCCEEDED", "FIRST", "oss://b/k", "req-1", "", "", 1, false)
	f.Add("", "REJECTED", "REJECTED", "", "", "malformed_event", "not valid JSON: \xff\xfe", 0, true)
	f.Add("\u2028<script>", "RUNNING", "REPEAT_OTHER", "file:///tmp/\"x\"", "a\r\nb", "timeout", "\x00\t", 7, true)
	f.Fuzz(func(t *testing.T, key, status, decision, ref, reqID, errType, errMsg string, attempt int, failed bool) {
		o := Outcome{IdempotencyKey: key, Status: status, Decision: decision, ResultRef: ref, RequestID: reqID, Attempt: attempt}
		if failed {
			o = failure(o, idempotency.Final(errType, errors.New(errMsg)))
		}
		r := reply(o, o.Failed(), o.ErrorType)
		if !json.Valid(r.Body) {
			t.Fatalf("invalid JSON: %q", r.Body)
		}
		var back Outcome
		if err := json.Unmarshal(r.Body, &back); err != nil {
			t.Fatal(err)
		}
		// encoding/json replaces invalid UTF-8 with U+FFFD; compare the valid
		// case (each string on its own: invalid pieces can join into a valid
		// whole, the seed 297ef2bb is "\xeb"+"\xae"+"\xb0").
		valid := true
		for _, s := range []string{key, status, decision, ref, reqID} {
			valid = valid && utf8.ValidString(s)
		}
		if valid && (back.IdempotencyKey != key || back.Status != o.Status ||
			back.Decision != o.Decision || back.ResultRef != ref || back.RequestID != reqID || back.Attempt != attempt) {
			t.Fatalf("round trip %+v != %+v", back, o)
		}
		if failed && (r.Status != 404 || back.ErrorType == "" && errType != "" || back.Retryable == nil) {
			t.Fatalf("failure reply %d %s", r.Status, r.Body)
		}
		if !failed && r.Status != 200 {
			t.Fatalf("success reply %d", r.Status)
		}
	})
}
