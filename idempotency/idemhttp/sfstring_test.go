package idemhttp

import (
	"errors"
	"strings"
	"testing"
)

func TestParseKey(t *testing.T) {
	long := strings.Repeat("a", MaxKeyLength)
	cases := []struct {
		name    string
		lines   []string
		want    string
		present bool
		err     error
	}{
		{"absent", nil, "", false, nil},
		{"uuid", []string{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`}, "8e03978e-40d5-43e8-bc93-6894a57f9324", true, nil},
		{"ows around", []string{" \t\"k\" "}, "k", true, nil},
		{"escapes", []string{`"a\"b\\c"`}, `a"b\c`, true, nil},
		{"space inside", []string{`"a b"`}, "a b", true, nil},
		{"longest", []string{`"` + long + `"`}, long, true, nil},
		{"parameters ignored", []string{`"k";a;b=1;c=?0;d="x";e=tok/x:y;f=:aGk=:;g=-1.5`}, "k", true, nil},
		{"parameter after spaces", []string{`"k"; a=1`}, "k", true, nil},
		{"token, not a string", []string{`8e03978e`}, "", true, ErrKeyMalformed},
		{"empty string", []string{`""`}, "", true, ErrKeyEmpty},
		{"empty field", []string{``}, "", true, ErrKeyMalformed},
		{"too long", []string{`"` + long + `a"`}, "", true, ErrKeyTooLong},
		{"two lines", []string{`"a"`, `"b"`}, "", true, ErrKeyRepeated},
		{"a list", []string{`"a", "b"`}, "", true, ErrKeyMalformed},
		{"unterminated", []string{`"abc`}, "", true, ErrKeyMalformed},
		{"bad escape", []string{`"a\nb"`}, "", true, ErrKeyMalformed},
		{"trailing backslash", []string{`"a\`}, "", true, ErrKeyMalformed},
		{"control byte", []string{"\"a\x01b\""}, "", true, ErrKeyMalformed},
		{"non-ASCII", []string{"\"caf\xc3\xa9\""}, "", true, ErrKeyMalformed},
		{"tab inside", []string{"\"a\tb\""}, "", true, ErrKeyMalformed},
		{"garbage after", []string{`"a"b`}, "", true, ErrKeyMalformed},
		{"upper-case parameter key", []string{`"a";B=1`}, "", true, ErrKeyMalformed},
		{"parameter without key", []string{`"a";=1`}, "", true, ErrKeyMalformed},
		{"parameter value missing", []string{`"a";b=`}, "", true, ErrKeyMalformed},
		{"integer too long", []string{`"a";b=1234567890123456`}, "", true, ErrKeyMalformed},
		{"decimal fraction too long", []string{`"a";b=1.2345`}, "", true, ErrKeyMalformed},
		{"decimal without fraction", []string{`"a";b=1.`}, "", true, ErrKeyMalformed},
		{"bad boolean", []string{`"a";b=?2`}, "", true, ErrKeyMalformed},
		{"bad byte sequence", []string{`"a";b=:a*b:`}, "", true, ErrKeyMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, present, err := ParseKey(c.lines)
			if got != c.want || present != c.present || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
				t.Fatalf("ParseKey(%q) = %q, %v, %v; want %q, %v, %v", c.lines, got, present, err, c.want, c.present, c.err)
			}
		})
	}
}

func TestFormatKey(t *testing.T) {
	for _, k := range []string{"k", `a"b\c`, "with space", strings.Repeat("z", MaxKeyLength)} {
		s, err := FormatKey(k)
		if err != nil {
			t.Fatal(err)
		}
		if got, _, err := ParseKey([]string{s}); err != nil || got != k {
			t.Fatalf("%q → %s → %q %v", k, s, got, err)
		}
	}
	for _, k := range []string{"", "é", "a\nb", strings.Repeat("z", MaxKeyLength+1)} {
		if _, err := FormatKey(k); err == nil {
			t.Fatalf("FormatKey(%q) accepted", k)
		}
	}
}

// FuzzParseKey: never a panic; an accepted value is printable ASCII within
// the bound and formats back to a field that parses to the same key.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{`"k"`, `"a\"b"`, `"k";a=1.5;b=?1`, `tok`, `""`, `"a`, `"k";b=:aGk=:`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, field string) {
		k, _, err := ParseKey([]string{field})
		if err != nil {
			return
		}
		if k == "" || len(k) > MaxKeyLength {
			t.Fatalf("accepted %q from %q", k, field)
		}
		s, err := FormatKey(k)
		if err != nil {
			t.Fatalf("accepted %q from %q, which cannot be formatted: %v", k, field, err)
		}
		if back, _, err := ParseKey([]string{s}); err != nil || back != k {
			t.Fatalf("%q → %q → %q %v", field, k, back, err)
		}
	})
}
