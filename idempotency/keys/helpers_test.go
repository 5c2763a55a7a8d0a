package keys

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// The golden keys were computed apart from this package (Python's
// json.dumps(sort_keys=True, separators=(",", ":")) is RFC 8785 for these
// documents, then sha256).
func TestHelpersGolden(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "helpers.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name, Helper, Action, Model, Fingerprint, Key string
		Doc                                           json.RawMessage
		Paths                                         []string
		Time                                          time.Time
		Seconds                                       int
		Messages                                      any
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			var got string
			var err error
			switch c.Helper {
			case "paths":
				got, err = FromPaths(c.Doc, c.Paths...)
			case "window":
				got = Window(c.Action, c.Time, time.Duration(c.Seconds)*time.Second)
			case "llm":
				got, err = LLMRequest(c.Model, c.Messages)
			case "fingerprint":
				got = FromFingerprint(c.Fingerprint)
			}
			if err != nil || got != c.Key {
				t.Fatalf("%s %v, want %s", got, err, c.Key)
			}
		})
	}
}

func TestFromPaths(t *testing.T) {
	doc := []byte(`{"data":{"order_id":"o-42","n":null,"items":[{"sku":"a"}]}}`)
	cases := []struct {
		name  string
		doc   string
		paths []string
		err   error
	}{
		{"missing member", string(doc), []string{"data.nope"}, ErrNoSuchPath},
		{"null value", string(doc), []string{"data.n"}, ErrNoSuchPath},
		{"index out of range", string(doc), []string{"data.items.3.sku"}, ErrNoSuchPath},
		{"negative index", string(doc), []string{"data.items.-1.sku"}, ErrNoSuchPath},
		{"through a string", string(doc), []string{"data.order_id.x"}, ErrNoSuchPath},
		{"not JSON", `{`, []string{"data"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := FromPaths([]byte(c.doc), c.paths...)
			if err == nil || (c.err != nil && !errors.Is(err, c.err)) {
				t.Fatalf("err %v, want %v", err, c.err)
			}
		})
	}
	a, _ := FromPaths([]byte(`{"data":{"b":2,"a":1}}`), "data.a", "data.b")
	b, _ := FromPaths([]byte(`{"data": {"a": 1, "b": 2, "c": 3}}`), "data.b", "data.a")
	if a != b {
		t.Fatal("member order, white space, unselected fields or path order changed the key")
	}
}

func TestWindowAndLLM(t *testing.T) {
	day := 24 * time.Hour
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if Window("d", t0, day) != Window("d", t0.Add(23*time.Hour), day) || Window("d", t0, day) == Window("d", t0.Add(day), day) {
		t.Fatal("the window index is wrong")
	}
	if Window("d", t0, day) == Window("d", t0, time.Hour) || Window("d", t0, day) == Window("e", t0, day) {
		t.Fatal("the window size or the action does not enter the key")
	}
	x, _ := LLMRequest("m", []map[string]string{{"role": "user", "content": "hi"}})
	y, _ := LLMRequest("m", []any{map[string]any{"content": "hi", "role": "user"}})
	z, _ := LLMRequest("other", []any{map[string]any{"content": "hi", "role": "user"}})
	if x != y || x == z {
		t.Fatal("LLMRequest is not canonical or ignores the model")
	}
}

func TestExplicitIsDerivesKey(t *testing.T) {
	d, err := Derive(Fields{TenantID: "acme", TaskType: "summarize", Operation: "summarize", Input: json.RawMessage(`{"a":1}`),
		IdempotencyKey: "order-42"})
	if err != nil {
		t.Fatal(err)
	}
	if k, err := Explicit("acme", "order-42"); err != nil || k != d.Key {
		t.Fatalf("Explicit %s %v, Derive %s", k, err, d.Key)
	}
	for _, c := range [][2]string{{"", "k"}, {"t", ""}, {"t\xff", "k"}} {
		if _, err := Explicit(c[0], c[1]); err == nil {
			t.Fatalf("Explicit(%q, %q) accepted", c[0], c[1])
		}
	}
}

func TestHTTPRequestScopes(t *testing.T) {
	base, err := HTTPRequest("acme", "POST", "POST /orders", "k")
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range [][4]string{{"globex", "POST", "POST /orders", "k"}, {"acme", "PATCH", "POST /orders", "k"},
		{"acme", "POST", "POST /refunds", "k"}, {"acme", "POST", "POST /orders", "k2"}} {
		if k, _ := HTTPRequest(other[0], other[1], other[2], other[3]); k == base {
			t.Fatalf("%q derives the same key", other)
		}
	}
	if _, err := HTTPRequest("a\xff", "POST", "/", "k"); err == nil {
		t.Fatal("invalid UTF-8 accepted")
	}
}

// Window's action that is not valid UTF-8 never merges two keys (JCS would
// write both as U+FFFD), and a valid one keeps its key.
func TestWindowOfInvalidUTF8StaysApart(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	for _, c := range []struct {
		name string
		a, b string
	}{
		{"two invalid bytes", Window("a\xff", t0, time.Hour), Window("a\xfe", t0, time.Hour)},
		{"invalid against U+FFFD", Window("a\xff", t0, time.Hour), Window("a\uFFFD", t0, time.Hour)},
		{"invalid against its hex", Window("a\xff", t0, time.Hour), Window("61ff", t0, time.Hour)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.a == c.b {
				t.Fatalf("one key %s for two distinct actions", c.a)
			}
		})
	}
	want := hashStrings("action", "a", "window", "472222", "window_seconds", "3600")
	if got := Window("a", t0, time.Hour); got != want {
		t.Fatalf("a valid action's key changed: %s, want %s", got, want)
	}
}

// Window's keys stay what they were for every time UnixNano can hold from
// the epoch on (a changed key would run each scheduled job again after an
// upgrade); before the epoch the window is floored, so the windows either
// side of it are two, and beyond 1678–2262 the index no longer wraps.
func TestWindowKeepsItsKeys(t *testing.T) {
	window := func(idx, seconds string) string {
		return hashStrings("action", "job", "window", idx, "window_seconds", seconds)
	}
	for _, c := range []struct {
		name, at string
		size     time.Duration
		key      string
	}{
		// Pinned: the keys Window gave before it floored.
		{"the epoch", "1970-01-01T00:00:00Z", 24 * time.Hour, "3cb405b33ed5ac545cd1cbc24cef2da8193818bff6fbb5e0b2345f77e2ece26b"},
		{"a day", "2026-12-01T00:00:00Z", 24 * time.Hour, "02725f3ff8154b1d9982e94ba8a754edfcd7361f6c18088ef6086ced1de86856"},
		{"a day's last nanosecond", "2026-11-30T23:59:59.999999999Z", 24 * time.Hour, "e3e312363c227835a7207e1e35120e6196e8f7651d6d495283f7106ccc838830"},
		{"a second", "2024-02-29T12:34:56.789Z", time.Second, "21016209a34d0e95a89837647f312f55eef684f9f75e0a433aaae95df614425e"},
		{"a quarter second", "2024-02-29T12:34:56.789Z", 250 * time.Millisecond, "ba44046107ba893f4ae35d915d5bed6de28ec2e06499735b177c35894412f6fb"},
		{"90 minutes, in another zone", "2024-02-29T12:34:56.789+08:00", 90 * time.Minute, "2c10d598acf568dfcca8648711c69a8b333d57bd0518d51555ca3151a57bb0d1"},
		{"7 seconds", "2001-09-09T01:46:40Z", 7 * time.Second, "8e7366cbe802bd04c635b30e447280f3af925437bf3af8996d39b6db00f71362"},
		{"UnixNano's last hour", "2262-04-11T23:47:16.854775807Z", time.Hour, "b4e363dede245b728a9cbaf1b8eb4dcf2c885c244cd25bdee7ada081e2a5ba63"},
		{"UnixNano's last nanosecond", "2262-04-11T23:47:16.854775807Z", time.Nanosecond, "a6cdf58504a30f5a2351cbd2e8858a4d121ba47b673796ceb53037ec2f8200cb"},
		// Floored: the window before the epoch is -1, not the epoch's 0.
		{"the day before the epoch", "1969-12-31T23:59:59Z", 24 * time.Hour, window("-1", "86400")},
		{"a nanosecond before the epoch", "1969-12-31T23:59:59.999999999Z", time.Second, window("-1", "1")},
		{"an hour before the epoch, half past", "1969-12-31T22:30:00Z", time.Hour, window("-2", "3600")},
		// Beyond UnixNano: the index of the day, not a wrapped count.
		{"the year 2300", "2300-01-01T12:00:00Z", 24 * time.Hour, window("120530", "86400")},
		{"the year 1600", "1600-01-01T12:00:00Z", 24 * time.Hour, window("-135140", "86400")},
		{"the year 2300 in nanoseconds", "2300-01-01T00:00:00.5Z", time.Nanosecond, window("10413792000500000000", "0.000000001")},
	} {
		t.Run(c.name, func(t *testing.T) {
			at, err := time.Parse(time.RFC3339Nano, c.at)
			if err != nil {
				t.Fatal(err)
			}
			if got := Window("job", at, c.size); got != c.key {
				t.Fatalf("Window(%s, %v) = %s, want %s", c.at, c.size, got, c.key)
			}
		})
	}
}

// The window size is written exactly: sizes a nanosecond apart are two
// windows at any size, and every size a float64's shortest form wrote
// exactly (at most 15 significant digits) keeps the text, so its keys.
func TestWindowSizeIsExact(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b time.Duration
	}{
		{"past 2^53 ns", 1 << 53, 1<<53 + 1},
		{"past 2^62 ns", 1 << 62, 1<<62 + 1},
		{"a nanosecond", time.Nanosecond, 2 * time.Nanosecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			if Window("d", time.Unix(0, 0), c.a) == Window("d", time.Unix(0, 0), c.b) {
				t.Fatalf("sizes %d and %d ns derive one key", c.a, c.b)
			}
		})
	}
	for _, d := range []time.Duration{time.Nanosecond, 1500 * time.Microsecond, time.Second, 90 * time.Second, 24 * time.Hour,
		30 * 24 * time.Hour, 365 * 24 * time.Hour, 123456789012345, 999999999999999, 1e15 - 1, 10 * 365 * 24 * time.Hour} {
		if got, was := exactSeconds(d), strconv.FormatFloat(d.Seconds(), 'f', -1, 64); got != was {
			t.Errorf("%d ns: %s, a float64 wrote %s (its keys would change)", d, got, was)
		}
	}
}
