package event

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse checks that Parse never panics, that every error is an *Error with
// a Type, and that what it returns is consistent (nothing silently dropped).
// Seeds: testdata/fuzz/FuzzParse plus the sample bodies in testdata/events.
func FuzzParse(f *testing.F) {
	samples, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "events", "*.json"))
	for _, p := range samples {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"specversion":"1.0","id":"x","source":"s","type":"t","data_base64":"e30="}`))

	f.Fuzz(func(t *testing.T, body []byte) {
		inv, err := Parse(body)
		if err != nil {
			e, ok := err.(*Error)
			if !ok || e == nil {
				t.Fatalf("error %v is %T, not *Error", err, err)
			}
			if e.Type == "" || e.Msg == "" {
				t.Fatalf("error without Type or Msg: %#v", e)
			}
			if !IsFinal(err) || !errors.Is(err, &Error{Type: e.Type}) {
				t.Fatalf("error not FINAL / not matched by its type: %#v", e)
			}
		}
		if inv == nil {
			if err == nil {
				t.Fatal("nil Invocation without an error")
			}
			return
		}
		switch inv.Kind {
		case KindSingle, KindBatch:
			if len(inv.Tasks)+len(inv.Rejected) != inv.Size {
				t.Fatalf("%d tasks + %d rejected != size %d", len(inv.Tasks), len(inv.Rejected), inv.Size)
			}
			if (err == nil) != (len(inv.Rejected) == 0) {
				t.Fatalf("err %v with %d rejections", err, len(inv.Rejected))
			}
			if inv.Kind == KindSingle && inv.Size != 1 {
				t.Fatalf("single event of size %d", inv.Size)
			}
			if inv.Kind == KindBatch && (inv.BatchErr == nil) != (err == nil) {
				t.Fatalf("BatchErr %v, err %v", inv.BatchErr, err)
			}
			for _, r := range inv.Rejected {
				if r == nil || r.Type == "" {
					t.Fatalf("empty rejection %#v", r)
				}
			}
			for _, task := range inv.Tasks {
				if task.TenantID == "" || task.TaskType == "" || task.Operation == "" ||
					jsonKind(task.Input) != '{' || jsonKind(task.Data) != '{' || task.EventID == "" || task.EventSource == "" {
					t.Fatalf("accepted an incomplete task %+v", task)
				}
			}
		case KindTimer:
			if (inv.Timer == nil) == (err == nil) {
				t.Fatalf("timer %+v with err %v", inv.Timer, err)
			}
		case KindFailureDestination:
			if (inv.Failure == nil) == (err == nil) {
				t.Fatalf("failure %+v with err %v", inv.Failure, err)
			}
			if err == nil {
				if _, oerr := inv.Original(); oerr != nil {
					if _, ok := oerr.(*Error); !ok {
						t.Fatalf("Original error %T", oerr)
					}
				}
			}
		default:
			t.Fatalf("unknown kind %q", inv.Kind)
		}
	})
}
