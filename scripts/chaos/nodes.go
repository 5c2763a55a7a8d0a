package main

import (
	"context"
	"errors"
	"time"

	"github.com/go-sql-driver/mysql"
)

// NodeKill ends one node of a multi-writer cluster (Options.Nodes) At into
// the stream, as a crash: Kill ends node Node and returns once it is gone.
// Instances that started on it keep failing their store calls (a retryable
// answer, FC retries elsewhere) until the chaos recycles them; every
// instance started after it goes to the next live node, as a load balancer
// in front of the cluster would send it.
type NodeKill struct {
	At   time.Duration
	Node int
	Kill func()
}

// nodeDSNs gives each node's DSN the run's database.
func nodeDSNs(nodes []string, db string) ([]string, error) {
	var out []string
	for _, n := range nodes {
		cfg, err := mysql.ParseDSN(n)
		if err != nil {
			return nil, errors.New("nodes: not a go-sql-driver DSN")
		}
		cfg.DBName = db
		out = append(out, cfg.FormatDSN())
	}
	return out, nil
}

// nodeFor is the node slot idx starts on: its own (idx mod the nodes), or
// the next live one after that was killed; "" without nodes.
func (f *fleet) nodeFor(idx int) (int, string) {
	if len(f.nodes) == 0 {
		return 0, ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n := idx % len(f.nodes)
	for range f.nodes {
		if !f.down[n] {
			break
		}
		n = (n + 1) % len(f.nodes)
	}
	return n, f.nodes[n]
}

// killNode carries out o.NodeKill once, unless ctx ends first.
func (r *runner) killNode(ctx context.Context, rep *Report) {
	nk := r.o.NodeKill
	t := time.NewTimer(nk.At)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	r.fleet.mu.Lock()
	if r.fleet.down == nil {
		r.fleet.down = map[int]bool{}
	}
	r.fleet.down[nk.Node] = true
	r.fleet.mu.Unlock()
	r.clock.add("kill -9 database node %d", nk.Node)
	nk.Kill()
	r.clock.add("database node %d is gone", nk.Node)
	rep.NodeKills++ // read after the chaos goroutines ended
}
