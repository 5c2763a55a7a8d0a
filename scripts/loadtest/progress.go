package main

import (
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"
)

// Progress draws one bar per phase on a terminal. A nil *Progress draws
// nothing.
type Progress struct {
	w    io.Writer
	stop chan struct{}
	done chan struct{}
}

// NewProgress returns a bar writing to w, or nil when w is nil.
func NewProgress(w io.Writer) *Progress {
	if w == nil {
		return nil
	}
	return &Progress{w: w}
}

// Start draws the bar of phase every 200 ms until Stop.
func (p *Progress) Start(phase string, total int, count *atomic.Int64) {
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

func (p *Progress) draw(phase string, n, total int, el time.Duration) {
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
func (p *Progress) Stop() {
	if p == nil || p.stop == nil {
		return
	}
	close(p.stop)
	<-p.done
	p.stop = nil
}
