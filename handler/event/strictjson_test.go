package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheckStrictJSON(t *testing.T) {
	many := func(n int, dupAt int) string {
		var b strings.Builder
		b.WriteByte('{')
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			k := i
			if i == dupAt {
				k = 0
			}
			b.WriteString(`"k` + strings.Repeat("x", k) + `":1`)
		}
		b.WriteByte('}')
		return b.String()
	}
	for _, tc := range []struct {
		name    string
		body    string
		ok      bool
		dupName string
	}{
		{"object", `{"a":1,"b":[true,false,null],"c":{"d":"e"}}`, true, ""},
		{"surrounding white space", " \t\r\n{}\n", true, ""},
		{"numbers", `[0,-0,1.5,-2e10,3E+2,4e-3,123456789012345678901234567890]`, true, ""},
		{"escapes", `["\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00"]`, true, ""},
		{"same name in sibling objects", `[{"a":1},{"a":2}]`, true, ""},
		{"same name at two depths", `{"a":{"a":1}}`, true, ""},
		{"sixteen keys", many(16, -1), true, ""},
		{"forty keys", many(40, -1), true, ""},
		{"deepest allowed", strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth), true, ""},
		{"deepest allowed, objects and arrays", strings.Repeat(`{"a":[`, maxDepth/2) + strings.Repeat("]}", maxDepth/2), true, ""},
		{"many brackets, shallow", "[" + strings.Repeat("[],{},", maxDepth) + "0]", true, ""},
		{"brackets inside strings do not nest", `["` + strings.Repeat(`[{\"`, maxDepth) + `"]`, true, ""},

		{"empty", ``, false, ""},
		{"white space only", " \n", false, ""},
		{"duplicate key", `{"a":1,"a":2}`, false, "a"},
		{"duplicate key spelled with an escape", `{"a":1,"\u0061":2}`, false, "a"},
		{"duplicate after sixteen keys", many(20, 18), false, "k"},
		{"duplicate within sixteen keys", many(10, 9), false, "k"},
		{"too deep", strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1), false, ""},
		{"too deep, objects", strings.Repeat(`{"a":`, maxDepth+1) + "1" + strings.Repeat("}", maxDepth+1), false, ""},
		{"too deep and cut off", strings.Repeat("[", 100000), false, ""},
		// Refused on purpose, unlike encoding/json (see checkStrictJSON).
		{"lone high surrogate escape", `["\ud800"]`, false, ""},
		{"lone low surrogate escape", `{"k":"\udc00"}`, false, ""},
		{"reversed surrogate pair", `["\ude00\ud83d"]`, false, ""},
		{"lone surrogate escape in a key", `{"\ud800":1}`, false, ""},
		{"two values", `{} {}`, false, ""},
		{"trailing garbage", `{}x`, false, ""},
		{"trailing comma in object", `{"a":1,}`, false, ""},
		{"trailing comma in array", `[1,]`, false, ""},
		{"leading zero", `[01]`, false, ""},
		{"bare minus", `[-]`, false, ""},
		{"dot without digits", `[1.]`, false, ""},
		{"exponent without digits", `[1e+]`, false, ""},
		{"plus sign", `[+1]`, false, ""},
		{"bad escape", `["\x"]`, false, ""},
		{"short unicode escape", `["\u12"]`, false, ""},
		{"raw control character", "[\"a\tb\"]", false, ""},
		{"unterminated string", `["abc`, false, ""},
		{"single quotes", `{'a':1}`, false, ""},
		{"bad literal", `[nul]`, false, ""},
		{"key not a string", `{1:2}`, false, ""},
		{"missing colon", `{"a" 1}`, false, ""},
		{"invalid utf-8", "[\"\xff\"]", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkStrictJSON([]byte(tc.body))
			if (err == nil) != tc.ok {
				t.Fatalf("checkStrictJSON: %v, want ok=%v", err, tc.ok)
			}
			if err == nil {
				return
			}
			e := asError(err)
			if e == nil || e.Type != TypeMalformedEvent || e.Msg == "" {
				t.Fatalf("error %#v", err)
			}
			if tc.dupName != "" && (!strings.HasPrefix(e.Field, tc.dupName) || !strings.Contains(e.Msg, "repeats")) {
				t.Fatalf("want a repeated-key error naming %q, got %#v", tc.dupName, e)
			}
			if strings.Contains(tc.name, "surrogate") && !strings.Contains(e.Msg, "surrogate") {
				t.Fatalf("a surrogate error should say so: %q", e.Msg)
			}
			if strings.HasPrefix(tc.name, "too deep") && !strings.Contains(e.Msg, "nested deeper than 512") {
				t.Fatalf("a depth error should say so: %q", e.Msg)
			}
		})
	}
}

// referenceStrict is the definition checkStrictJSON implements, written with
// encoding/json's token decoder (the package's earlier implementation), plus
// the refusal of lone surrogate escapes checkStrictJSON adds on purpose.
func referenceStrict(b []byte) bool {
	if len(bytes.TrimSpace(b)) == 0 || !utf8.Valid(b) || !json.Valid(b) || loneSurrogate(b) {
		return false
	}
	type frame struct {
		object, wantKey bool
		keys            map[string]bool
	}
	var stack []*frame
	done := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // numbers beyond float64 are valid JSON
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return true
		}
		if err != nil {
			return false
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:n-1]
				done()
				continue
			}
			k := tok.(string)
			if stack[n-1].keys[k] {
				return false
			}
			stack[n-1].keys[k], stack[n-1].wantKey = true, false
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) >= maxDepth {
				return false
			}
			stack = append(stack, &frame{object: tok == json.Delim('{'), wantKey: true, keys: map[string]bool{}})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			done()
		default:
			done()
		}
	}
}

// loneSurrogate reports whether valid JSON text b holds a \u escape of a
// UTF-16 surrogate that is not a high one directly followed by a low one.
// In valid JSON every backslash starts an escape inside a string.
func loneSurrogate(b []byte) bool {
	unit := func(i int) rune {
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return -1
		}
		u, _ := strconv.ParseUint(string(b[i+2:i+6]), 16, 16)
		return rune(u)
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		switch r := unit(i); {
		case r >= 0xD800 && r < 0xDC00:
			if lo := unit(i + 6); lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 11
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		default:
			i++ // the escaped character, or the u of a \u escape
		}
	}
	return false
}

// FuzzStrictJSON: checkStrictJSON accepts exactly what the reference
// accepts, and the strict pass's split (Parse's: members, elements, and
// each event's data members) divides accepted text as json.Unmarshal does,
// refusing only an array of more than MaxBatch elements.
func FuzzStrictJSON(f *testing.F) {
	for _, s := range []string{`{"a":1,"\u0061":2}`, `[{"a":[1,{"b":null}]},"x",-0.5e3]`, `{"k":"\ud800","\ufffd":1}`,
		string(mkEvent(goodData, `"aliyunretry":3`)), `{} {}`, `{"a":{"a":{"a":1,"a":2}}}`,
		"[" + string(mkEvent(goodData, "")) + `,{"data":{"data":{"x":1}}},7]`, `{"data" : { "a" : [ ] } }`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, want := checkStrictJSON(b) == nil, referenceStrict(b)
		if got != want {
			t.Fatalf("checkStrictJSON accepts=%v, reference=%v for %q", got, want, b)
		}
		if !got {
			return
		}
		dec, err := decodeBody(b)
		if errors.Is(err, ErrBatchTooLarge) { // refused only past the limit
			var ref []json.RawMessage
			if json.Unmarshal(b, &ref) != nil || len(ref) <= MaxBatch {
				t.Fatalf("%v for %d elements", err, len(ref))
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if dec.kind == '{' {
			var ref map[string]json.RawMessage
			if err := json.Unmarshal(b, &ref); err != nil || !reflect.DeepEqual(dec.obj.members, ref) {
				t.Fatalf("members %q\nunmarshal %q (%v)", dec.obj.members, ref, err)
			}
			checkData(t, dec.obj, ref)
		}
		if dec.kind == '[' {
			var ref []json.RawMessage
			if err := json.Unmarshal(b, &ref); err != nil || len(dec.els) != len(ref) {
				t.Fatalf("%d elements\nunmarshal %q (%v)", len(dec.els), ref, err)
			}
			for i, el := range dec.els {
				if !bytes.Equal(el.raw, ref[i]) || (el.obj != nil) != (jsonKind(ref[i]) == '{') {
					t.Fatalf("element %d: %q vs %q", i, el.raw, ref[i])
				}
				if el.obj != nil {
					var m map[string]json.RawMessage
					if err := json.Unmarshal(el.raw, &m); err != nil || !reflect.DeepEqual(el.obj.members, m) {
						t.Fatalf("element %d members %q vs %q", i, el.obj.members, m)
					}
					checkData(t, el.obj, m)
				}
			}
		}
	})
}

// checkData: the strict pass split a data object as json.Unmarshal does.
func checkData(t *testing.T, obj *object, ref map[string]json.RawMessage) {
	t.Helper()
	if jsonKind(ref["data"]) != '{' {
		if obj.data != nil {
			t.Fatalf("data members %q for data %q", obj.data, ref["data"])
		}
		return
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(ref["data"], &m); err != nil || !reflect.DeepEqual(obj.data, m) {
		t.Fatalf("data members %q vs %q", obj.data, m)
	}
}

func TestStringValue(t *testing.T) {
	for _, tc := range []struct {
		name, raw, want string
		ok              bool
	}{
		{"plain", `"acme"`, "acme", true},
		{"escaped", `"a\"b\u00e9"`, "a\"bé", true},
		{"null", `null`, "", true},
		{"padded", ` "x" `, "x", true},
		{"unicode space is not JSON space", "\u00a0\"x\"", "", false},
		{"form feed before null", "\fnull", "", false},
		{"number", `12`, "", false},
		{"object", `{"a":1}`, "", false},
		{"empty raw", ``, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := stringValue(json.RawMessage(tc.raw))
			var ref string
			refOK := json.Unmarshal([]byte(tc.raw), &ref) == nil
			if got != tc.want || ok != tc.ok || ok != refOK || got != ref {
				t.Fatalf("stringValue(%s) = %q, %v; want %q, %v (json.Unmarshal: %q, %v)", tc.raw, got, ok, tc.want, tc.ok, ref, refOK)
			}
		})
	}
}
