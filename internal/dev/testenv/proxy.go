package testenv

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP relay in front of a real server, so that a test can make the
// server vanish (Cut: connections reset) or hang (Block: bytes stop flowing)
// in the middle of an operation, then come back (Restore).
type Proxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	blocked bool
	cut     bool
	gate    *sync.Cond
	latency time.Duration // each byte's delay one way (SetLatency)
}

// NewProxy listens on a free loopback port and relays to target.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.gate = sync.NewCond(&p.mu)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the address clients should dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.mu.Unlock()
		go p.relay(c)
	}
}

func (p *Proxy) relay(c net.Conn) {
	p.mu.Lock()
	target, latency := p.target, p.latency
	p.mu.Unlock()
	s, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.cut { // cut while dialing
		p.mu.Unlock()
		c.Close()
		s.Close()
		return
	}
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	p.mu.Unlock()
	pipe := p.pipe
	if latency > 0 {
		pipe = func(dst, src net.Conn) { p.pipeLate(dst, src, latency) }
	}
	go pipe(s, c)
	pipe(c, s)
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if p.held() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // EOF or a cut: either way the relay ends
			return
		}
	}
}

// held waits while the proxy is blocked and says whether it was cut.
func (p *Proxy) held() (cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.blocked && !p.cut {
		p.gate.Wait()
	}
	return p.cut
}

// Block stops relaying: calls in flight and new ones hang.
func (p *Proxy) Block() {
	p.mu.Lock()
	p.blocked = true
	p.mu.Unlock()
}

// Cut resets every connection and refuses new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
	p.gate.Broadcast()
	p.mu.Unlock()
}

// Restore relays again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.blocked, p.cut = false, false
	p.gate.Broadcast()
	p.mu.Unlock()
}

// Close stops the proxy.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Cut()
}
