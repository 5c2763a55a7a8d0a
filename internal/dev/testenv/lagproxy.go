package testenv

import (
	"net"
	"time"
)

// Retarget makes new connections go to target; connections already relayed
// stay where they are (Cut them to move every client), as a DNS endpoint
// that moves to a promoted replica.
func (p *Proxy) Retarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

// SetLatency delays every byte relayed on connections made from now on by d
// one way, as a link between two zones does: what is in flight when the
// proxy is Cut never arrives.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// chunk is a read waiting for its delivery time.
type chunk struct {
	b  []byte
	at time.Time
}

// pipeLate is pipe with a delay: a reader queues each read with its
// delivery time, a writer writes it then; a Cut closes both ends, which
// drops what is queued.
func (p *Proxy) pipeLate(dst, src net.Conn, d time.Duration) {
	defer dst.Close()
	defer src.Close()
	q := make(chan chunk, 4096)
	defer func() {
		go func() {
			for range q {
			}
		}()
	}() // the reader ends once src is closed
	go func() {
		defer close(q)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				q <- chunk{buf[:n], time.Now().Add(d)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		time.Sleep(time.Until(c.at))
		if p.held() {
			return
		}
		if _, err := dst.Write(c.b); err != nil {
			return
		}
	}
}
