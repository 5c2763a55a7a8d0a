package progress

import (
	"bytes"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

func TestWriter(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cases := []struct {
		name, mode string
		want       bool // f returned
		err        bool
	}{
		{"on draws anywhere", "on", true, false},
		{"auto skips a file", "auto", false, false},
		{"off never draws", "off", false, false},
		{"anything else is a usage error", "yes", false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := Writer(c.mode, f)
			if (err != nil) != c.err || (w != nil) != c.want {
				t.Fatalf("Writer(%q) = %v, %v", c.mode, w, err)
			}
		})
	}
}

func TestBar(t *testing.T) {
	var b bytes.Buffer
	var n atomic.Int64
	bar := New(&b)
	bar.Start("phase", 10, &n)
	n.Store(5)
	bar.Stop()
	if got := b.String(); !strings.Contains(got, "5/10") || !strings.Contains(got, "phase") || !strings.HasSuffix(got, "\n") {
		t.Fatalf("bar drew %q", got)
	}
	var none *Bar // a nil bar is silent
	none.Start("x", 1, &n)
	none.Stop()
}
