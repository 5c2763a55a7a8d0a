package jcs

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// The committed golden file was produced independently (V8's JSON.parse and
// JSON.stringify with UTF-16 key sorting); -update rewrites it from this
// implementation and so should only be used after checking the diff by hand.
var update = flag.Bool("update", false, "rewrite testdata/golden.json from the current implementation")

type goldenCase struct {
	Name      string `json:"name"`
	Input     string `json:"input"`
	Canonical string `json:"canonical"`
	// Refused "number": the input holds a number whose exact value its
	// canonical form (V8's, kept for reference) does not keep, which this
	// package refuses (exact.go).
	Refused string `json:"refused,omitempty"`
}

func loadGolden(t testing.TB) []goldenCase {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []goldenCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

func TestGolden(t *testing.T) {
	cases := loadGolden(t)
	if len(cases) == 0 {
		t.Fatal("no golden cases")
	}
	if *update {
		for i := range cases {
			if cases[i].Refused != "" {
				continue
			}
			got, err := Canonicalize([]byte(cases[i].Input))
			if err != nil {
				t.Fatalf("%s: %v", cases[i].Name, err)
			}
			cases[i].Canonical = string(got)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(cases); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", "golden.json"), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tc.Input))
			if tc.Refused != "" {
				var ne *NumberError
				if !errors.Is(err, ErrNumber) || !errors.As(err, &ne) {
					t.Fatalf("Canonicalize = %q, %v; want a *NumberError", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Canonicalize: %v", err)
			}
			if string(got) != tc.Canonical {
				t.Fatalf("got  %q\nwant %q", got, tc.Canonical)
			}
			again, err := Canonicalize(got)
			if err != nil || !bytes.Equal(again, got) {
				t.Fatalf("not idempotent: %q, %v", again, err)
			}
		})
	}
}

func TestCanonicalize(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"sorts members", `{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{"strips whitespace", " [ 1 ,\t2 ,\r\n3 ] ", `[1,2,3]`},
		{"integer float", `1.0`, `1`},
		{"exponent to integer", `1e3`, `1000`},
		{"negative zero", `-0`, `0`},
		{"1e21 exponential", `1e21`, `1e+21`},
		{"1e20 plain", `1e20`, `100000000000000000000`},
		{"1e-7 exponential", `1e-7`, `1e-7`},
		{"1e-6 plain", `0.000001`, `0.000001`},
		{"denormal min", `5e-324`, `5e-324`},
		{"2^53 exactly", `9007199254740992`, `9007199254740992`},
		{"2^68 as RFC 8785 writes it", `295147905179352830000`, `295147905179352830000`},
		{"0.1 is 0.1", `0.1`, `0.1`},
		{"1e23", `1E+23`, `1e+23`},
		{"one spelt with zeros", `1.000e-0`, `1`},
		{"negative zero fraction", `-0.000e99999999999`, `0`},
		{"16 digits exact", `1234567890123456`, `1234567890123456`},
		{"17 digits, its own shortest form", `0.30000000000000004`, `0.30000000000000004`},
		{"0.1+0.2", `0.30000000000000004`, `0.30000000000000004`},
		{"upper-case exponent", `2E-3`, `0.002`},
		{"html not escaped", `"<>&\u003c"`, `"<>&<"`},
		{"u2028 not escaped", `"\u2028"`, "\"\u2028\""},
		{"del not escaped", `"\u007f"`, "\"\x7f\""},
		{"control lowercase hex", `"\u001F\u000B"`, `"\u001f\u000b"`},
		{"solidus unescaped", `"\/"`, `"/"`},
		{"non-BMP escape decoded", `"\uD83D\uDE00"`, `"😀"`},
		{"utf16 order: U+FB33 after emoji", `{"\ufb33":1,"\ud83d\ude00":2}`, "{\"\U0001F600\":2,\"\uFB33\":1}"},
		{"utf16 order: U+E000 after emoji", `{"\ue000":1,"\ud800\udc00":2}`, "{\"\U00010000\":2,\"\ue000\":1}"},
		{"empty key sorts first", `{"a":1,"":2}`, `{"":2,"a":1}`},
		{"nested sort", `{"z":{"b":[{"d":1,"c":2}],"a":0}}`, `{"z":{"a":0,"b":[{"c":2,"d":1}]}}`},
		{"same name in sibling objects", `[{"a":1},{"a":2}]`, `[{"a":1},{"a":2}]`},
		{"same name at different depth", `{"a":{"a":1}}`, `{"a":{"a":1}}`},
		{"raw U+FFFD accepted", "\"\uFFFD\"", "\"\uFFFD\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tc.in))
			if err != nil {
				t.Fatalf("Canonicalize(%q): %v", tc.in, err)
			}
			if string(got) != tc.want {
				t.Fatalf("Canonicalize(%q)\n got  %q\n want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestCanonicalizeErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"empty", ``, ErrInvalidJSON},
		{"only whitespace", "  \n", ErrInvalidJSON},
		{"unterminated object", `{"a":1`, ErrInvalidJSON},
		{"unterminated array", `[1,2`, ErrInvalidJSON},
		{"trailing comma array", `[1,]`, ErrInvalidJSON},
		{"trailing comma object", `{"a":1,}`, ErrInvalidJSON},
		{"missing colon", `{"a" 1}`, ErrInvalidJSON},
		{"non-string name", `{1:2}`, ErrInvalidJSON},
		{"single quotes", `'a'`, ErrInvalidJSON},
		{"leading zero", `01`, ErrInvalidJSON},
		{"negative leading zero", `-01`, ErrInvalidJSON},
		{"bare minus", `-`, ErrInvalidJSON},
		{"plus sign", `+1`, ErrInvalidJSON},
		{"dot without digits", `1.`, ErrInvalidJSON},
		{"leading dot", `.5`, ErrInvalidJSON},
		{"empty exponent", `1e`, ErrInvalidJSON},
		{"signed empty exponent", `1e+`, ErrInvalidJSON},
		{"NaN literal", `NaN`, ErrInvalidJSON},
		{"Infinity literal", `-Infinity`, ErrInvalidJSON},
		{"hex number", `0x10`, ErrInvalidJSON},
		{"truncated literal", `tru`, ErrInvalidJSON},
		{"literal wrong case", `Null`, ErrInvalidJSON},
		{"trailing value", `{} {}`, ErrInvalidJSON},
		{"trailing garbage", `1 x`, ErrInvalidJSON},
		{"trailing bracket", `[1]]`, ErrInvalidJSON},
		{"byte order mark", "\xef\xbb\xbf{}", ErrInvalidJSON},
		{"unterminated string", `"abc`, ErrInvalidJSON},
		{"raw tab in string", "\"a\tb\"", ErrInvalidJSON},
		{"raw newline in string", "\"a\nb\"", ErrInvalidJSON},
		{"bad escape", `"\x41"`, ErrInvalidJSON},
		{"short unicode escape", `"\u12"`, ErrInvalidJSON},
		{"non-hex unicode escape", `"\u12g4"`, ErrInvalidJSON},
		{"invalid utf-8 byte", "\"\xff\"", ErrInvalidString},
		{"truncated utf-8", "\"\xe2\x82\"", ErrInvalidString},
		{"overlong utf-8", "\"\xc0\xaf\"", ErrInvalidString},
		{"utf-8 encoded surrogate", "\"\xed\xa0\x80\"", ErrInvalidString},
		{"invalid utf-8 in name", "{\"\xff\":1}", ErrInvalidString},
		{"lone high surrogate", `"\ud800"`, ErrInvalidString},
		{"lone low surrogate", `"\udc00"`, ErrInvalidString},
		{"high surrogate then text", `"\ud800x"`, ErrInvalidString},
		{"high surrogate then BMP escape", `"\ud800\u0041"`, ErrInvalidString},
		{"two high surrogates", `"\ud83d\ud83d"`, ErrInvalidString},
		{"reversed pair", `"\ude00\ud83d"`, ErrInvalidString},
		{"lone surrogate in name", `{"\ud800":1}`, ErrInvalidString},
		{"overflow", `1e400`, ErrNumber},
		{"negative overflow", `-1e400`, ErrNumber},
		{"just above max double", `1.7976931348623159e308`, ErrNumber},
		{"overflow nested", `{"a":[1,2e308]}`, ErrNumber},
		{"huge exponent", `1e99999999999`, ErrNumber},
		{"2^53+1", `9007199254740993`, ErrNumber},
		{"20-digit integer", `12345678901234567890`, ErrNumber},
		{"20-digit integer after a string ending in an escaped backslash", `{"a":"x\\","n":12345678901234567890}`, ErrNumber},
		{"20-digit integer after an escaped quote", `["\"",12345678901234567890]`, ErrNumber},
		{"2^63 in full", `9223372036854775808`, ErrNumber},
		{"0.1 and a tail", `0.10000000000000000001`, ErrNumber},
		{"0.1 as the double holds it", `0.1000000000000000055511151231257827021181583404541015625`, ErrNumber},
		{"underflow", `1e-400`, ErrNumber},
		{"underflow negative", `-2.5e-324`, ErrNumber},
		{"subnormal written long", `4.9406564584124654e-324`, ErrNumber},
		{"duplicate name", `{"a":1,"a":2}`, ErrDuplicateKey},
		{"duplicate same value", `{"a":1,"b":0,"a":1}`, ErrDuplicateKey},
		{"duplicate via escape", `{"a":1,"\u0061":2}`, ErrDuplicateKey},
		{"duplicate non-BMP via escape", `{"😀":1,"\ud83d\ude00":2}`, ErrDuplicateKey},
		{"duplicate nested", `[{"x":{"k":1,"k":1}}]`, ErrDuplicateKey},
		{"too deep arrays", strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), ErrTooDeep},
		{"too deep objects", strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1), ErrTooDeep},
		{"too deep unterminated", strings.Repeat("[", 100000), ErrTooDeep},
	}
	sentinels := []error{ErrInvalidJSON, ErrInvalidString, ErrNumber, ErrDuplicateKey, ErrTooDeep}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tc.in))
			if err == nil {
				t.Fatalf("Canonicalize(%q) = %q, want error %v", tc.in, got, tc.want)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Canonicalize(%q) error %v, want %v", tc.in, err, tc.want)
			}
			// Exactly one sentinel, so classification is unambiguous.
			for _, s := range sentinels {
				if s != tc.want && errors.Is(err, s) {
					t.Fatalf("error %v also matches %v", err, s)
				}
			}
		})
	}
}

func TestMaxDepthBoundary(t *testing.T) {
	arrays := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	if got, err := Canonicalize([]byte(arrays)); err != nil || string(got) != arrays {
		t.Fatalf("depth %d arrays: %q, %v", MaxDepth, got, err)
	}
	objects := strings.Repeat(`{"a":`, MaxDepth-1) + "[0]" + strings.Repeat("}", MaxDepth-1)
	if got, err := Canonicalize([]byte(objects)); err != nil || string(got) != objects {
		t.Fatalf("depth %d objects: %q, %v", MaxDepth, got, err)
	}
}

// TestNumberRFC8785AppendixB checks the IEEE-754 bit patterns listed in
// RFC 8785 Appendix B against the serializations the RFC gives.
func TestNumberRFC8785AppendixB(t *testing.T) {
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tc := range tests {
		f := math.Float64frombits(tc.bits)
		if got := string(appendNumber(nil, f)); got != tc.want {
			t.Errorf("%016x: got %s, want %s", tc.bits, got, tc.want)
		}
	}
}

// TestCompareUTF16 checks the transcoding-free comparison against a literal
// UTF-16 comparison on random strings biased towards the ranges where UTF-8
// and UTF-16 order disagree.
func TestCompareUTF16(t *testing.T) {
	pool := []rune{'a', 'b', 0x7f, 0x80, 0xd7ff, 0xe000, 0xfb33, 0xffff, 0x10000, 0x1f600, 0x10ffff}
	r := rand.New(rand.NewPCG(7, 8))
	gen := func() string {
		rs := make([]rune, r.IntN(4))
		for i := range rs {
			rs[i] = pool[r.IntN(len(pool))]
		}
		return string(rs)
	}
	sign := func(x int) int { return min(max(x, -1), 1) }
	for range 20000 {
		a, b := gen(), gen()
		want := slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		if got := sign(compareUTF16(a, b)); got != want {
			t.Fatalf("compareUTF16(%q, %q) = %d, want %d", a, b, got, want)
		}
	}
}

func TestMarshal(t *testing.T) {
	type inner struct {
		Z int     `json:"z"`
		A float64 `json:"a"`
	}
	v := struct {
		HTML  string          `json:"html"`
		Inner inner           `json:"inner"`
		Raw   json.RawMessage `json:"raw"`
		Map   map[string]any  `json:"map"`
	}{
		HTML:  "<a href='x'>&</a>\u2028",
		Inner: inner{Z: 1, A: 1e21},
		Raw:   json.RawMessage(`{"y": 1.0, "x": [1e3]}`),
		Map:   map[string]any{"\u20ac": true, "\U0001F600": nil, "b": "c"},
	}
	got, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\"html\":\"<a href='x'>&</a>\u2028\",\"inner\":{\"a\":1e+21,\"z\":1},\"map\":{\"b\":\"c\",\"€\":true,\"😀\":null},\"raw\":{\"x\":[1000],\"y\":1}}"
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}

	if _, err := Marshal(json.RawMessage(`{"a":1,"a":2}`)); !errors.Is(err, ErrDuplicateKey) {
		t.Fatalf("duplicate in RawMessage: %v, want ErrDuplicateKey", err)
	}
	if _, err := Marshal(math.NaN()); err == nil {
		t.Fatal("Marshal(NaN) succeeded")
	}
	if _, err := Marshal(make(chan int)); err == nil {
		t.Fatal("Marshal(chan) succeeded")
	}
}

func FuzzCanonicalize(f *testing.F) {
	for _, tc := range loadGolden(f) {
		f.Add([]byte(tc.Input))
	}
	sentinels := []error{ErrInvalidJSON, ErrInvalidString, ErrNumber, ErrDuplicateKey, ErrTooDeep}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		if err != nil {
			if !slices.ContainsFunc(sentinels, func(s error) bool { return errors.Is(err, s) }) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		if !json.Valid(in) {
			t.Fatalf("accepted input encoding/json rejects: %q", in)
		}
		if !json.Valid(out) {
			t.Fatalf("output is not valid JSON: %q", out)
		}
		if !utf8.Valid(out) {
			t.Fatalf("output is not valid UTF-8: %q", out)
		}
		again, err := Canonicalize(out)
		if err != nil {
			t.Fatalf("canonical output rejected: %v\n%q", err, out)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("not idempotent:\n1st %q\n2nd %q", out, again)
		}
		// Round trip through encoding/json: decoding the canonical form and
		// marshalling it again must land on the same bytes.
		var v any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("encoding/json rejects output: %v\n%q", err, out)
		}
		re, err := Marshal(v)
		if err != nil {
			t.Fatalf("Marshal of decoded output: %v", err)
		}
		if !bytes.Equal(re, out) {
			t.Fatalf("Marshal(Unmarshal(out)) differs:\nout %q\nre  %q", out, re)
		}
		// Differential: having accepted the input, it has none of the
		// ambiguities encoding/json resolves silently, so its decoding of
		// the original text must canonicalize to the same bytes too.
		var w any
		if err := json.Unmarshal(in, &w); err != nil {
			t.Fatalf("encoding/json rejects accepted input: %v\n%q", err, in)
		}
		if re, err := Marshal(w); err != nil || !bytes.Equal(re, out) {
			t.Fatalf("encoding/json reading differs:\nout %q\nre  %q (%v)", out, re, err)
		}
	})
}

// AppendStringObject must produce exactly what Marshal produces for the same
// map: the keys package hashes its output, so any difference would move
// every business key.
func TestAppendStringObjectMatchesMarshal(t *testing.T) {
	for _, tc := range []struct {
		name string
		kv   []string
	}{
		{"empty", nil},
		{"key document", []string{"tenant_id", "acme", "task_type", "summarize", "input_version", "sha256:ab", "operation", "summarize"}},
		{"escapes", []string{"q\"uote", "back\\slash", "ctl", "\x00\x1f\n\t\b\f\r", "html", "<&>\u2028"}},
		{"utf16 order", []string{"\ue000", "private use", "\U0001F600", "astral", "a", "ascii", "é", "latin"}},
		{"more than eight", []string{"j", "1", "i", "2", "h", "3", "g", "4", "f", "5", "e", "6", "d", "7", "c", "8", "b", "9", "a", "10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string]string{}
			for i := 0; i+1 < len(tc.kv); i += 2 {
				m[tc.kv[i]] = tc.kv[i+1]
			}
			want, err := Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if got := AppendStringObject(nil, tc.kv...); string(got) != string(want) {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
		})
	}
}

func FuzzAppendStringObject(f *testing.F) {
	f.Add("tenant_id", "acme", "idempotency_key", "order-1", "x", "\u2028")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, v3 string) {
		kv := []string{k1, v1, k2, v2, k3, v3}
		for _, s := range kv {
			if !utf8.ValidString(s) {
				return
			}
		}
		if k1 == k2 || k1 == k3 || k2 == k3 {
			return
		}
		want, err := Marshal(map[string]string{k1: v1, k2: v2, k3: v3})
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendStringObject(nil, kv...); string(got) != string(want) {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	})
}
