package netrig

import (
	"context"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Proxy is a delaying TCP forwarder: every chunk of bytes it reads from
// either side is written to the other side Delay after it was read, so each
// direction of a connection sees the one-way latency of a link. It stands in
// for netem where the kernel has none (scripts/netrig -delay-mode proxy),
// in the server's namespace, in a process of its own so that its CPU is not
// charged to the server or to the function.
//
// Go's timers sleep at least about 1 ms on an idle Linux process (the
// runtime's poller waits in whole milliseconds), far above the 150 µs a rig
// wants; so one goroutine, locked to its OS thread with the timer slack set
// to 1 ns, sleeps with nanosleep(2) until each chunk is due and writes it.
// All chunks wait the same Delay, so they fall due in the order they were
// read: one FIFO serves every connection. The line hands each due chunk to
// its destination's writer goroutine, so that a peer slow to read holds up
// its own connection only. The program that serves a Proxy should run with
// GOMAXPROCS ≥ 2 (scripts/netrig does): the line's thread keeps its P while
// it sleeps in the syscall, and the readers must not wait for sysmon to
// take it back.
type Proxy struct {
	Delay    time.Duration
	Upstream string // the server's address, dialled per connection

	mu      sync.Mutex
	queue   []chunk
	wake    chan struct{}
	lags    []time.Duration // how late each chunk was written (sampled)
	chunks  int64
	bytes   int64
	conns   int64
	oversh  time.Duration // nanosleep's measured overshoot, subtracted from each sleep
	started chan struct{}
}

type chunk struct {
	due   time.Time
	dst   *writer
	data  []byte
	close bool // after data: half-close dst (EOF read on the other side)
}

// pair is one proxied connection: the client's side and the server's.
type pair struct {
	a, b       *net.TCPConn
	halfClosed atomic.Int32
}

// writer writes the due chunks of one side of a pair, in order.
type writer struct {
	conn *net.TCPConn
	pair *pair
	ch   chan chunk
}

func (w *writer) run() {
	for c := range w.ch {
		if len(c.data) > 0 {
			if _, err := w.conn.Write(c.data); err != nil {
				w.pair.a.Close()
				w.pair.b.Close()
			}
		}
		if c.close {
			_ = w.conn.CloseWrite()
			if w.pair.halfClosed.Add(1) == 2 {
				w.pair.a.Close()
				w.pair.b.Close()
			}
			return // the reader queues nothing after its close
		}
	}
}

// Stats is what a proxy did.
type Stats struct {
	Delay       time.Duration `json:"delay_ns"`
	Connections int64         `json:"connections"`
	Chunks      int64         `json:"chunks"`
	Bytes       int64         `json:"bytes"`
	Overshoot   time.Duration `json:"nanosleep_overshoot_ns"` // measured at start, subtracted
	// LateP50 and LateP99 are how much later than due a chunk was written,
	// over a sample of the chunks: the latency added beyond Delay.
	LateP50 time.Duration `json:"late_p50_ns"`
	LateP99 time.Duration `json:"late_p99_ns"`
}

// Serve accepts connections on ln until ctx ends, forwarding each to
// Upstream through the delay line.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	p.wake = make(chan struct{}, 1)
	p.started = make(chan struct{})
	go p.line(ctx)
	<-p.started
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go p.handle(ctx, c.(*net.TCPConn))
	}
}

// handle dials the server and starts the two readers.
func (p *Proxy) handle(ctx context.Context, client *net.TCPConn) {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", p.Upstream)
	if err != nil {
		client.Close()
		return
	}
	server := c.(*net.TCPConn)
	p.mu.Lock()
	p.conns++
	p.mu.Unlock()
	pr := &pair{a: client, b: server}
	toServer := &writer{conn: server, pair: pr, ch: make(chan chunk, 4096)}
	toClient := &writer{conn: client, pair: pr, ch: make(chan chunk, 4096)}
	go toServer.run()
	go toClient.run()
	go p.pump(client, toServer)
	go p.pump(server, toClient)
}

// pump reads src and queues each chunk for dst; at EOF or an error it
// queues dst's half-close, delayed like the data before it.
func (p *Proxy) pump(src *net.TCPConn, dst *writer) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.push(chunk{due: time.Now().Add(p.Delay), dst: dst, data: slices.Clone(buf[:n])})
		}
		if err != nil {
			p.push(chunk{due: time.Now().Add(p.Delay), dst: dst, close: true})
			return
		}
	}
}

func (p *Proxy) push(c chunk) {
	p.mu.Lock()
	p.queue = append(p.queue, c)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// pop takes the oldest chunk, waiting for one until ctx ends.
func (p *Proxy) pop(ctx context.Context) (chunk, bool) {
	for {
		p.mu.Lock()
		if len(p.queue) > 0 {
			c := p.queue[0]
			p.queue[0] = chunk{}
			p.queue = p.queue[1:]
			if len(p.queue) == 0 {
				p.queue = p.queue[:0:0] // let the backing array go
			}
			p.mu.Unlock()
			return c, true
		}
		p.mu.Unlock()
		select {
		case <-p.wake:
		case <-ctx.Done():
			return chunk{}, false
		}
	}
}

// line is the delay line: on a thread of its own with 1 ns timer slack, it
// sleeps until each chunk is due and writes it.
func (p *Proxy) line(ctx context.Context) {
	runtime.LockOSThread() // never unlocked: the thread's timer slack is changed
	const prSetTimerslack = 29
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerslack, 1, 0)
	p.oversh = calibrate()
	close(p.started)
	var n int64
	for {
		c, ok := p.pop(ctx)
		if !ok {
			return
		}
		if wait := time.Until(c.due) - p.oversh; wait > 0 {
			ts := syscall.NsecToTimespec(int64(wait))
			for syscall.Nanosleep(&ts, &ts) != nil { // EINTR: sleep the rest
			}
		}
		late := time.Since(c.due)
		c.dst.ch <- c
		n++
		p.mu.Lock()
		p.chunks++
		p.bytes += int64(len(c.data))
		if n%8 == 1 && len(p.lags) < 1<<20 {
			p.lags = append(p.lags, late)
		}
		p.mu.Unlock()
	}
}

// calibrate measures how much longer than asked a 100 µs nanosleep takes on
// this thread (the lower quartile of 50: on a busy machine the median
// includes preemptions, and subtracting those would end most sleeps early),
// so that each sleep can end on time.
func calibrate() time.Duration {
	const ask = 100 * time.Microsecond
	over := make([]time.Duration, 50)
	for i := range over {
		ts := syscall.NsecToTimespec(int64(ask))
		t := time.Now()
		_ = syscall.Nanosleep(&ts, nil)
		over[i] = time.Since(t) - ask
	}
	slices.Sort(over)
	return min(max(over[len(over)/4], 0), 80*time.Microsecond)
}

// Stats is a snapshot of what the proxy did so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Delay: p.Delay, Connections: p.conns, Chunks: p.chunks, Bytes: p.bytes, Overshoot: p.oversh}
	if len(p.lags) > 0 {
		l := slices.Clone(p.lags)
		slices.Sort(l)
		s.LateP50, s.LateP99 = l[len(l)/2], l[len(l)*99/100]
	}
	return s
}
