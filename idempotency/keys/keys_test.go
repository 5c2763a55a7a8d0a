package keys

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/idempotency/jcs"
)

// The committed golden file was computed independently (Python's json module
// with sort_keys on ASCII-ordered member names); -update rewrites the
// expectations from this implementation, so check its diff by hand.
var update = flag.Bool("update", false, "rewrite testdata/keys.golden.json from the current implementation")

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

type goldenFields struct {
	TenantID       string          `json:"tenant_id"`
	TaskType       string          `json:"task_type"`
	Operation      string          `json:"operation"`
	Input          json.RawMessage `json:"input"`
	InputVersion   string          `json:"input_version,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

type goldenCase struct {
	Name         string       `json:"name"`
	Fields       goldenFields `json:"fields"`
	Key          string       `json:"key"`
	InputVersion string       `json:"input_version"`
	PayloadHash  string       `json:"payload_hash"`
}

func (g goldenFields) fields() Fields {
	return Fields{
		TenantID:       g.TenantID,
		TaskType:       g.TaskType,
		Operation:      g.Operation,
		Input:          g.Input,
		InputVersion:   g.InputVersion,
		IdempotencyKey: g.IdempotencyKey,
	}
}

func mustDerive(t *testing.T, f Fields) Derived {
	t.Helper()
	d, err := Derive(f)
	if err != nil {
		t.Fatalf("Derive(%+v): %v", f, err)
	}
	for name, h := range map[string]string{"key": d.Key, "payload_hash": d.PayloadHash} {
		if !hex64.MatchString(h) {
			t.Fatalf("%s %q is not 64 lowercase hex", name, h)
		}
	}
	return d
}

func TestGolden(t *testing.T) {
	path := filepath.Join("testdata", "keys.golden.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []goldenCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no golden cases")
	}
	if *update {
		for i := range cases {
			d := mustDerive(t, cases[i].Fields.fields())
			cases[i].Key, cases[i].InputVersion, cases[i].PayloadHash = d.Key, d.InputVersion, d.PayloadHash
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(cases); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			d := mustDerive(t, tc.Fields.fields())
			if d.Key != tc.Key {
				t.Errorf("key %s, want %s", d.Key, tc.Key)
			}
			if d.InputVersion != tc.InputVersion {
				t.Errorf("input_version %s, want %s", d.InputVersion, tc.InputVersion)
			}
			if d.PayloadHash != tc.PayloadHash {
				t.Errorf("payload_hash %s, want %s", d.PayloadHash, tc.PayloadHash)
			}
		})
	}
}

func base(input string) Fields {
	return Fields{TenantID: "t-1", TaskType: "summarize", Operation: "create", Input: json.RawMessage(input)}
}

// TestInputSpellingNeverChangesKey: every spelling of the same JSON value
// yields the same K, input_version and payload_hash.
func TestInputSpellingNeverChangesKey(t *testing.T) {
	want := mustDerive(t, base(`{"doc":"hello","lang":"en","n":[1,2.5,1000],"o":{"a":true,"b":null}}`))
	tests := []struct{ name, input string }{
		{"members reordered", `{"o":{"b":null,"a":true},"n":[1,2.5,1000],"lang":"en","doc":"hello"}`},
		{"indented", "{\n  \"doc\": \"hello\",\n  \"lang\": \"en\",\n  \"n\": [\n    1,\n    2.5,\n    1000\n  ],\n  \"o\": {\"a\": true, \"b\": null}\n}"},
		{"tabs and CRLF", "{\r\n\t\"lang\" :\t\"en\" ,\r\n\t\"doc\":\"hello\",\"n\":[1,2.5,1000],\"o\":{\"b\":null,\"a\":true}\r\n}"},
		{"surrounding whitespace", "  \n{\"doc\":\"hello\",\"lang\":\"en\",\"n\":[1,2.5,1000],\"o\":{\"a\":true,\"b\":null}}\n\n"},
		{"escaped characters", `{"\u0064oc":"h\u0065llo","lang":"\u0065n","n":[1,2.5,1000],"o":{"a":true,"b":null}}`},
		{"number spellings", `{"doc":"hello","lang":"en","n":[1.0,25e-1,1e3],"o":{"a":true,"b":null}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustDerive(t, base(tc.input)); got != want {
				t.Fatalf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestInputContentChangesKey(t *testing.T) {
	ref := mustDerive(t, base(`{"doc":"hello"}`))
	tests := []struct {
		name string
		f    Fields
	}{
		{"other input", base(`{"doc":"hello!"}`)},
		{"other tenant", Fields{TenantID: "t-2", TaskType: "summarize", Operation: "create", Input: json.RawMessage(`{"doc":"hello"}`)}},
		{"other task type", Fields{TenantID: "t-1", TaskType: "translate", Operation: "create", Input: json.RawMessage(`{"doc":"hello"}`)}},
		{"other operation", Fields{TenantID: "t-1", TaskType: "summarize", Operation: "update", Input: json.RawMessage(`{"doc":"hello"}`)}},
		{"explicit input_version", Fields{TenantID: "t-1", TaskType: "summarize", Operation: "create", Input: json.RawMessage(`{"doc":"hello"}`), InputVersion: "v1"}},
		{"string vs number", base(`{"doc":"1"}`)},
		{"combining vs precomposed", base(`{"doc":"e\u0301"}`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustDerive(t, tc.f); got.Key == ref.Key {
				t.Fatalf("K unchanged: %s", got.Key)
			}
		})
	}
}

func TestExplicitIdempotencyKey(t *testing.T) {
	withKey := func(tenant, input string) Fields {
		f := base(input)
		f.TenantID, f.IdempotencyKey = tenant, "order-42"
		return f
	}
	a := mustDerive(t, withKey("t-1", `{"doc":"hello"}`))

	t.Run("namespaced by tenant", func(t *testing.T) {
		b := mustDerive(t, withKey("t-2", `{"doc":"hello"}`))
		if a.Key == b.Key {
			t.Fatal("same idempotency_key under another tenant gave the same K")
		}
	})
	t.Run("input does not enter K", func(t *testing.T) {
		b := mustDerive(t, withKey("t-1", `{"doc":"goodbye"}`))
		if a.Key != b.Key {
			t.Fatalf("K changed with input: %s vs %s", a.Key, b.Key)
		}
		if a.PayloadHash == b.PayloadHash {
			t.Fatal("payload_hash unchanged although the input differs")
		}
	})
	t.Run("operation changes payload hash only", func(t *testing.T) {
		f := withKey("t-1", `{"doc":"hello"}`)
		f.Operation = "delete"
		b := mustDerive(t, f)
		if a.Key != b.Key || a.PayloadHash == b.PayloadHash {
			t.Fatalf("want same K and other payload_hash, got %+v vs %+v", a, b)
		}
	})
	t.Run("differs from content key", func(t *testing.T) {
		if c := mustDerive(t, base(`{"doc":"hello"}`)); c.Key == a.Key {
			t.Fatal("explicit key collided with content key")
		}
	})
	t.Run("payload hash equals content-keyed event", func(t *testing.T) {
		// payload_hash ignores how K was formed, so an explicit key and a
		// content key for the same work describe the same payload.
		if c := mustDerive(t, base(`{"doc":"hello"}`)); c.PayloadHash != a.PayloadHash {
			t.Fatal("payload_hash depends on idempotency_key")
		}
	})
}

func TestDeriveErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Fields)
		want   []error
		field  string
	}{
		{"no tenant", func(f *Fields) { f.TenantID = "" }, []error{ErrMissingField}, "tenant_id"},
		{"no task type", func(f *Fields) { f.TaskType = "" }, []error{ErrMissingField}, "task_type"},
		{"no operation", func(f *Fields) { f.Operation = "" }, []error{ErrMissingField}, "operation"},
		{"no input", func(f *Fields) { f.Input = nil }, []error{ErrMissingField}, "input"},
		{"blank input", func(f *Fields) { f.Input = json.RawMessage(" \n") }, []error{ErrMissingField}, "input"},
		{"null input", func(f *Fields) { f.Input = json.RawMessage(" null ") }, []error{ErrMissingField}, "input"},
		{"null input with explicit key", func(f *Fields) { f.Input, f.IdempotencyKey = json.RawMessage("null"), "k" }, []error{ErrMissingField}, "input"},
		{"invalid input", func(f *Fields) { f.Input = json.RawMessage(`{"a":`) }, []error{ErrInvalidField, jcs.ErrInvalidJSON}, "input"},
		{"duplicate member", func(f *Fields) { f.Input = json.RawMessage(`{"a":1,"a":2}`) }, []error{ErrInvalidField, jcs.ErrDuplicateKey}, "input"},
		{"duplicate member with input_version", func(f *Fields) {
			f.Input, f.InputVersion = json.RawMessage(`{"a":1,"a":2}`), "v1"
		}, []error{ErrInvalidField, jcs.ErrDuplicateKey}, "input"},
		{"lone surrogate", func(f *Fields) { f.Input = json.RawMessage(`{"a":"\ud800"}`) }, []error{ErrInvalidField, jcs.ErrInvalidString}, "input"},
		{"number overflow", func(f *Fields) { f.Input = json.RawMessage(`[1e999]`) }, []error{ErrInvalidField, jcs.ErrNumber}, "input"},
		{"invalid UTF-8 tenant", func(f *Fields) { f.TenantID = "t\xff" }, []error{ErrInvalidField}, "tenant_id"},
		{"invalid UTF-8 idempotency key", func(f *Fields) { f.IdempotencyKey = "k\xc0" }, []error{ErrInvalidField}, "idempotency_key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := base(`{"doc":"hello"}`)
			tc.mutate(&f)
			d, err := Derive(f)
			if err == nil {
				t.Fatalf("Derive succeeded: %+v", d)
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("error %v does not wrap %v", err, w)
				}
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %s", err, tc.field)
			}
			if d != (Derived{}) {
				t.Errorf("non-zero Derived on error: %+v", d)
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	a, err := Fingerprint(json.RawMessage(`{"b":[true,null],"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	// sha256 of {"a":1,"b":[true,null]}, computed with Python.
	if want := "1cc69c7fa23616ca2ec3ee70d24390a6225c8832db8a4c814c7e0e7f942f8668"; a != want {
		t.Fatalf("Fingerprint %s, want %s", a, want)
	}
	b, err := Fingerprint(json.RawMessage("{ \"a\" : 1.0 ,\n \"b\" : [ true , null ] }"))
	if err != nil || b != a {
		t.Fatalf("reformatted data: %s, %v; want %s", b, err, a)
	}
	if _, err := Fingerprint(json.RawMessage(`{"a":1,"a":1}`)); !errors.Is(err, jcs.ErrDuplicateKey) {
		t.Fatalf("duplicate member: %v", err)
	}
}

func FuzzDerive(f *testing.F) {
	f.Add("t-1", "summarize", "create", []byte(`{"doc":"hello","lang":"en"}`), "", "")
	f.Add("t-1", "summarize", "create", []byte(`{"b":[1.0,1e3,{"y":null,"x":"\u00e9"}],"a":-0}`), "", "order-42")
	f.Add("租户", "translate", "run", []byte(`["😀","\ud83d\ude00",1e21]`), "v7", "")
	f.Fuzz(func(t *testing.T, tenant, taskType, op string, input []byte, inputVersion, idemKey string) {
		fields := Fields{TenantID: tenant, TaskType: taskType, Operation: op, Input: input,
			InputVersion: inputVersion, IdempotencyKey: idemKey}
		want, err := Derive(fields)
		if err != nil {
			if !errors.Is(err, ErrMissingField) && !errors.Is(err, ErrInvalidField) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		if !hex64.MatchString(want.Key) || !hex64.MatchString(want.PayloadHash) {
			t.Fatalf("malformed hashes: %+v", want)
		}
		for _, indent := range []string{"  ", "\t", ""} {
			var buf bytes.Buffer
			if err := json.Indent(&buf, input, "\n", indent); err != nil {
				t.Fatalf("accepted input json.Indent rejects: %v", err)
			}
			fields.Input = buf.Bytes()
			got, err := Derive(fields)
			if err != nil {
				t.Fatalf("re-indented input rejected: %v\n%q", err, buf.Bytes())
			}
			if got != want {
				t.Fatalf("re-indenting changed the result:\n%q\n%+v\n%+v", buf.Bytes(), got, want)
			}
		}
	})
}

// A given input_version keeps the payload hash earlier versions stored for
// the same event (the golden value before the input's hash joined it), so
// that records in flight across the upgrade are not taken for another
// payload.
func TestLegacyPayloadHashIsTheOldOne(t *testing.T) {
	d, err := Derive(Fields{TenantID: "t-1", TaskType: "summarize", Operation: "create",
		Input: []byte(`{"doc":"hello","lang":"en"}`), InputVersion: "v7"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "da6d40d76bb609a2bfc119705e3644c4a16e96f76dd5a2906d3292b2b6251fad"; d.LegacyPayloadHash != want {
		t.Fatalf("legacy payload hash %s, want %s", d.LegacyPayloadHash, want)
	}
	derived, err := Derive(Fields{TenantID: "t-1", TaskType: "summarize", Operation: "create",
		Input: []byte(`{"doc":"hello","lang":"en"}`)})
	if err != nil || derived.LegacyPayloadHash != "" {
		t.Fatalf("a derived input_version has one payload hash: legacy %q %v", derived.LegacyPayloadHash, err)
	}
}

// TestNumbersNeverMerge: two inputs that differ only in a number a double
// cannot hold would share a key under plain RFC 8785; every derivation
// refuses such a number instead, naming where it is — the key, with or
// without an explicit idempotency_key, the fingerprint (so KEY_FALLBACK's
// key too) and the helpers.
func TestNumbersNeverMerge(t *testing.T) {
	base := Fields{TenantID: "t1", TaskType: "summarize", Operation: "summarize"}
	for _, tc := range []struct {
		name  string
		input string
		key   string
	}{
		{"content key", `{"order_id":12345678901234567890}`, ""},
		{"explicit key", `{"order_id":12345678901234567890}`, "order-1"},
		{"nested fraction", `{"lines":[{"rate":0.10000000000000000001}]}`, ""},
	} {
		f := base
		f.Input, f.IdempotencyKey = json.RawMessage(tc.input), tc.key
		_, err := Derive(f)
		if !errors.Is(err, ErrInvalidField) || !errors.Is(err, jcs.ErrNumber) ||
			!strings.Contains(err.Error(), "input.") || !strings.Contains(err.Error(), "send it as a string") {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if _, err := Fingerprint(json.RawMessage(`{"input":{},"seq":[9007199254740993]}`)); !errors.Is(err, jcs.ErrNumber) ||
		!strings.Contains(err.Error(), "data.seq[0]") {
		t.Errorf("fingerprint: %v", err)
	}
	a, errA := FromPaths([]byte(`{"data":{"order_id":12345678901234567890}}`), "data.order_id")
	b, errB := FromPaths([]byte(`{"data":{"order_id":12345678901234567891}}`), "data.order_id")
	if errA == nil || errB == nil || !errors.Is(errA, jcs.ErrNumber) {
		t.Errorf("FromPaths: %s %v, %s %v", a, errA, b, errB)
	}
	if k, err := FromPaths([]byte(`{"data":{"order_id":12345}}`), "data.order_id"); err != nil || k == "" {
		t.Errorf("FromPaths of an exact number: %q %v", k, err)
	}
	if _, err := LLMRequest("m", []any{map[string]any{"seed": uint64(12345678901234567891)}}); !errors.Is(err, jcs.ErrNumber) {
		t.Errorf("LLMRequest: %v", err)
	}
	// The spellings of one value are one key.
	var keys []string
	for _, in := range []string{`{"n":1}`, `{"n":1.0}`, `{"n":1e0}`, `{"n":10E-1}`} {
		f := base
		f.Input = json.RawMessage(in)
		d, err := Derive(f)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, d.Key)
	}
	if keys[0] != keys[1] || keys[1] != keys[2] || keys[2] != keys[3] {
		t.Errorf("one value, keys %v", keys)
	}
}

// FromPaths reads the document strictly: encoding/json alone turns every
// lone surrogate escape and invalid UTF-8 byte into U+FFFD and keeps the
// last of two members of one name, so distinct documents would share K.
func TestFromPathsRefusesWhatItWouldMerge(t *testing.T) {
	for _, tc := range []struct{ name, doc string }{
		{"lone high surrogate", `{"id":"\ud800"}`},
		{"lone low surrogate", `{"id":"\udfff"}`},
		{"invalid UTF-8", "{\"id\":\"\xff\"}"},
		{"invalid UTF-8 in a member name", "{\"id\":\"a\",\"\xfe\":1}"},
		{"repeated member name", `{"id":"a","id":"b"}`},
		{"repeated member name after unescaping", `{"id":"a","\u0069d":"b"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if k, err := FromPaths([]byte(tc.doc), "id"); err == nil {
				t.Errorf("FromPaths(%q) = %s; want an error", tc.doc, k)
			}
		})
	}
	if k, err := FromPaths([]byte(`{"id":"\ud83d\ude00"}`), "id"); err != nil || k != mustFromPaths(t, `{"id":"😀"}`) {
		t.Errorf("a surrogate pair is its character: %s %v", k, err)
	}
}

func mustFromPaths(t *testing.T, doc string) string {
	t.Helper()
	k, err := FromPaths([]byte(doc), "id")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// LLMRequest refuses strings that are not UTF-8: encoding/json writes every
// invalid byte as U+FFFD, so "hi\xff" and "hi\xfe" would be one call.
func TestLLMRequestRefusesInvalidUTF8(t *testing.T) {
	for _, tc := range []struct {
		name     string
		model    string
		messages any
	}{
		{"model", "m\xff", []string{"hi"}},
		{"message", "m", []string{"hi\xff"}},
		{"member name", "m", []map[string]string{{"ro\xfele": "user"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if k, err := LLMRequest(tc.model, tc.messages); err == nil {
				t.Errorf("LLMRequest = %s; want an error", k)
			}
		})
	}
	for _, text := range []string{"a real \ufffd is text", `a backslash and ufffd: \ufffd`, `\\\ufffd`} {
		if _, err := LLMRequest("m", []string{text}); err != nil {
			t.Errorf("valid text %q: %v", text, err)
		}
	}
}

// An input_version given as the one Derive derives is that one: the same
// key and payload hash as when it is left out (design §4), so a producer
// that starts sending it does not turn its redeliveries into mismatches.
func TestDerivedInputVersionGivenIsTheDerivedOne(t *testing.T) {
	f := Fields{TenantID: "acme", TaskType: "summarize", Operation: "summarize", Input: json.RawMessage(`{"b":2, "a":1}`)}
	omitted := mustDerive(t, f)
	f.InputVersion = omitted.InputVersion
	given := mustDerive(t, f)
	if given != omitted {
		t.Fatalf("given the derived input_version: %+v, left out: %+v", given, omitted)
	}
	f.InputVersion = "v2"
	other := mustDerive(t, f)
	if other.Key == omitted.Key || other.PayloadHash == omitted.PayloadHash || other.LegacyPayloadHash == "" {
		t.Fatalf("another input_version: %+v, derived: %+v", other, omitted)
	}
}
