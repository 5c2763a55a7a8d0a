package trace

import (
	"context"
	"errors"
	"strings"
	"testing"
)

const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestParse(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     string // the value String gives back; "" when Parse must refuse
	}{
		{"spec example", valid, valid},
		{"not sampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"},
		{"undefined flags dropped", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff", valid},
		{"optional white space", " \t" + valid + " ", valid},
		{"later version read by its first fields", "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds", valid},
		{"later version, exact length", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", valid},
		{"empty", "", ""},
		{"version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""},
		{"version 00 with more", valid + "-extra", ""},
		{"later version, extra without dash", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", ""},
		{"uppercase trace id", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", ""},
		{"uppercase version", "0A-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""},
		{"zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""},
		{"zero parent id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", ""},
		{"short trace id", "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", ""},
		{"wrong separators", "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01", ""},
		{"non-hex flags", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", ""},
		{"non-hex parent id", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba9z2b7-01", ""},
		{"header injection", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nx: y", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse(c.in)
			switch {
			case c.want == "" && !errors.Is(err, ErrInvalid):
				t.Fatalf("Parse(%q) = %v, %v; want ErrInvalid", c.in, got, err)
			case c.want != "" && err != nil:
				t.Fatalf("Parse(%q): %v", c.in, err)
			case c.want != "" && got.String() != c.want:
				t.Fatalf("Parse(%q).String() = %q, want %q", c.in, got.String(), c.want)
			}
		})
	}
}

func TestNewAndChild(t *testing.T) {
	a, b := New(), New()
	if a.TraceID == b.TraceID || a.SpanID == b.SpanID {
		t.Fatal("two new traces share an id")
	}
	if _, err := Parse(a.String()); err != nil || !a.Sampled() {
		t.Fatalf("New() = %s (sampled %v) does not parse: %v", a, a.Sampled(), err)
	}
	c := a.Child()
	if c.TraceID != a.TraceID || c.Flags != a.Flags || c.SpanID == a.SpanID {
		t.Fatalf("child %s of %s", c, a)
	}
	if got := a.TraceIDString(); len(got) != 32 || !strings.Contains(a.String(), got) {
		t.Fatalf("trace id %q of %s", got, a)
	}
}

func TestContinue(t *testing.T) {
	for _, c := range []struct {
		name, in   string
		sameTrace  bool
		replaced   bool
		wantSample bool
	}{
		{"valid: a child of it", valid, true, false, true},
		{"unsampled stays unsampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true, false, false},
		{"absent: a new trace", "", false, false, true},
		{"invalid: replaced", "00-xyz", false, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Continue(c.in)
			if (err != nil) != c.replaced {
				t.Fatalf("err = %v, want replaced %v", err, c.replaced)
			}
			in, _ := Parse(c.in)
			if (got.TraceID == in.TraceID) != c.sameTrace || got.SpanID == in.SpanID || got.Sampled() != c.wantSample {
				t.Fatalf("Continue(%q) = %s", c.in, got)
			}
			if _, err := Parse(got.String()); err != nil {
				t.Fatalf("Continue gave an invalid %s: %v", got, err)
			}
		})
	}
}

func TestFromJaeger(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"64-bit ids without leading zeros", "124ed43254b54966:e0a1b2c3d4:0:1", "00-0000000000000000124ed43254b54966-000000e0a1b2c3d4-01"},
		{"128-bit trace id", "4bf92f3577b34da6a3ce929d0e0e4736:00f067aa0ba902b7:0:0", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"},
		{"url-encoded, debug flag", "4BF92F3577B34DA6%3A00F067AA0BA902B7%3A0%3A3", "00-00000000000000004bf92f3577b34da6-00f067aa0ba902b7-01"},
		{"empty", "", ""},
		{"three fields", "1:2:1", ""},
		{"zero trace id", "0:2:0:1", ""},
		{"too long", strings.Repeat("a", 33) + ":1:0:1", ""},
		{"not hex", "xyz:1:0:1", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := FromJaeger(c.in)
			switch {
			case c.want == "" && !errors.Is(err, ErrInvalid):
				t.Fatalf("FromJaeger(%q) = %s, %v; want ErrInvalid", c.in, got, err)
			case c.want != "" && (err != nil || got.String() != c.want):
				t.Fatalf("FromJaeger(%q) = %s, %v; want %s", c.in, got, err, c.want)
			}
		})
	}
}

func TestContextRoundTrip(t *testing.T) {
	if _, ok := FromContext(context.Background()); ok {
		t.Fatal("an empty context carries a trace")
	}
	c := New()
	got, ok := FromContext(WithContext(context.Background(), c))
	if !ok || got != c {
		t.Fatalf("got %v %v", got, ok)
	}
}
