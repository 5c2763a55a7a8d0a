// Package progress draws a progress bar for the long tools (scripts/loadtest,
// scripts/chaos, scripts/coldstart) when their stderr is a terminal.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// Bar draws one bar per phase. A nil *Bar draws nothing.
type Bar struct {
	w    io.Writer
	stop chan struct{}
	done chan struct{}
}

// New returns a bar writing to w, or nil when w is nil.
func New(w io.Writer) *Bar {
	if w == nil {
		return nil
	}
	return &Bar{w: w}
}

// Start draws the bar of phase every 200 ms until Stop: count of total done.
func (p *Bar) Start(phase string, total int, count *atomic.Int64) {
	if p == nil {
		return
	}
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	start := time.Now()
	go func() {
		defer close(p.done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				p.draw(phase, int(count.Load()), total, time.Since(start))
				fmt.Fprint(p.w, "\n")
				return
			case <-t.C:
				p.draw(phase, int(count.Load()), total, time.Since(start))
			}
		}
	}()
}

func (p *Bar) draw(phase string, n, total int, el time.Duration) {
	const width = 30
	fill := 0
	if total > 0 {
		fill = min(width, n*width/total)
	}
	rate := 0.0
	if s := el.Seconds(); s > 0 {
		rate = float64(n) / s
	}
	fmt.Fprintf(p.w, "\r%-18s [%s%s] %7d/%-7d %8.0f/s %6.1fs ", phase, strings.Repeat("#", fill),
		strings.Repeat(".", width-fill), n, total, rate, el.Seconds())
}

// Stop ends the current bar.
func (p *Bar) Stop() {
	if p == nil || p.stop == nil {
		return
	}
	close(p.stop)
	<-p.done
	p.stop = nil
}

// FlagUsage is the usage text of a -progress flag read by Writer.
const FlagUsage = "progress bar on stderr: auto (only when stderr is a terminal), on, off"

// Writer resolves a -progress flag value: f for "on", and for "auto" when f
// is a terminal; nil for "off".
func Writer(mode string, f *os.File) (io.Writer, error) {
	switch mode {
	case "on":
		return f, nil
	case "auto":
		if IsTerminal(f) {
			return f, nil
		}
		return nil, nil
	case "off":
		return nil, nil
	}
	return nil, fmt.Errorf("-progress: want auto, on or off, got %q", mode)
}

// IsTerminal reports whether f is a character device (a terminal).
func IsTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
