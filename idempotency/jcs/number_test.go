package jcs

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// appendNumber appends what Canonicalize writes for the finite double f, so
// the RFC 8785 Appendix B vectors in jcs_test.go check the number form the
// package really produces (jsontext's): f is written in Go's shortest
// round-tripping form and canonicalized as a JSON text.
func appendNumber(out []byte, f float64) []byte {
	c, err := Canonicalize(strconv.AppendFloat(nil, f, 'g', -1, 64))
	if err != nil {
		panic(err)
	}
	return append(out, c...)
}

// TestNumberErrorPath: a refused number says where it is, as a field path
// a caller can put after the field's own name.
func TestNumberErrorPath(t *testing.T) {
	tests := []struct{ in, path, canonical string }{
		{`12345678901234567890`, ``, `12345678901234567000`},
		{`{"order_id":12345678901234567891}`, `.order_id`, `12345678901234567000`},
		{`{"items":[{"qty":1},{"qty":9007199254740993}]}`, `.items[1].qty`, `9007199254740992`},
		{`{"a b":[[0,1e-400]]}`, `["a b"][0][1]`, `0`},
		{`{"9":{"é":0.10000000000000000001}}`, `["9"].é`, `0.1`},
		{`{"x":1e999}`, `.x`, ``},
	}
	for _, tc := range tests {
		_, err := Canonicalize([]byte(tc.in))
		var ne *NumberError
		if !errors.As(err, &ne) || ne.Path != tc.path || ne.Canonical != tc.canonical || ne.Overflow != (tc.canonical == "") {
			t.Errorf("%s: %#v (%v); want path %q, canonical %q", tc.in, ne, err, tc.path, tc.canonical)
			continue
		}
		if msg := ne.Describe("input"); !strings.HasPrefix(msg, "input"+tc.path+": ") || !strings.Contains(msg, "send it as a string") {
			t.Errorf("%s: %s", tc.in, msg)
		}
	}
}

// TestNumberRuleAgainstRat holds the number rule to an exact reading of
// the literals (math/big): Canonicalize accepts a number exactly when its
// value is the value of what it writes, and refuses every other one.
func TestNumberRuleAgainstRat(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 8785))
	for range 50000 {
		lit := randomNumber(r)
		out, err := Canonicalize([]byte(lit))
		in, ok := new(big.Rat).SetString(lit)
		if !ok {
			t.Fatalf("big.Rat cannot read %q", lit)
		}
		switch {
		case err == nil:
			got, _ := new(big.Rat).SetString(string(out))
			if got.Cmp(in) != 0 {
				t.Fatalf("%s accepted as %s: another value", lit, out)
			}
		case errors.Is(err, ErrNumber):
			f, _ := strconv.ParseFloat(lit, 64)
			if !math.IsInf(f, 0) {
				if nearest, _ := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64)); nearest.Cmp(in) == 0 {
					t.Fatalf("%s refused, but RFC 8785 writes it exactly: %v", lit, err)
				}
			}
		default:
			t.Fatalf("%s: %v", lit, err)
		}
	}
}

// randomNumber writes a JSON number literal biased to the edges: long
// digit strings, powers of two, large and small exponents, zeros.
func randomNumber(r *rand.Rand) string {
	var b strings.Builder
	if r.IntN(3) == 0 {
		b.WriteByte('-')
	}
	switch r.IntN(4) {
	case 0: // a double's own shortest form, or its digits with a tail
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			f = 1
		}
		s := strconv.FormatFloat(math.Abs(f), 'e', -1, 64)
		if r.IntN(2) == 0 {
			mant, exp, _ := strings.Cut(s, "e")
			if !strings.Contains(mant, ".") {
				mant += "."
			}
			s = mant + strconv.Itoa(r.IntN(10)) + "e" + exp
		}
		b.WriteString(s)
		return b.String()
	case 1: // an integer around a power of two
		n := new(big.Int).Lsh(big.NewInt(1), uint(r.IntN(80)))
		n.Add(n, big.NewInt(int64(r.IntN(5)-2)))
		b.WriteString(n.Abs(n).String())
		return b.String()
	}
	digits := 1 + r.IntN(25)
	b.WriteByte(byte('1' + r.IntN(9)))
	for range digits - 1 {
		b.WriteByte(byte('0' + r.IntN(10)))
	}
	if r.IntN(2) == 0 {
		b.WriteString("." + strconv.Itoa(r.IntN(1000)))
	}
	if r.IntN(2) == 0 {
		b.WriteString("e" + strconv.Itoa(r.IntN(700)-350))
	}
	return b.String()
}
