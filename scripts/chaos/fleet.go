package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/idemgate/idemgate/internal/dev/proc"
	"github.com/idemgate/idemgate/internal/sleep"
)

// instance is one process of the function.
type instance struct {
	*proc.Instance
	name   string // i<slot>.g<generation>
	armed  bool   // IDEMGATE_FAULT=after_output
	killed bool   // by the chaos goroutine (under fleet.mu): not a crash
}

// slot is one instance position; a dead process is replaced in its slot.
type slot struct {
	idx    int
	cur    *instance
	ready  bool // initialized and not being killed: deliveries may go here
	paused bool
}

// fleet runs the instances, restarts the dead ones on a new port, and
// carries out the kills and pauses.
type fleet struct {
	bin, logDir string
	env         []string
	rnd         *lockedRand
	clock       *timeline
	logf        func(string, ...any)
	nodes       []string        // the cluster's DSNs (Options.Nodes), nil: every instance on MYSQL_DSN
	ctx         context.Context // ends at stop: a start in progress gives up
	cancel      context.CancelFunc
	wg          sync.WaitGroup

	mu          sync.Mutex
	down        map[int]bool // nodes killed: starts after it go to the next live node
	slots       []*slot
	stopping    bool
	faultsLeft  int
	kills       int
	pauses      int
	faultStarts int
	faultDeaths int
	restarts    int
	crashes     []string
}

func newFleet(bin string, env []string, logDir string, rnd *lockedRand, clock *timeline, logf func(string, ...any)) *fleet {
	ctx, cancel := context.WithCancel(context.Background())
	return &fleet{bin: bin, env: env, logDir: logDir, rnd: rnd, clock: clock, logf: logf, ctx: ctx, cancel: cancel}
}

// launch starts n supervised slots; the first start of slot 0 is armed
// with the fault when faults > 0.
func (f *fleet) launch(n, faults int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faultsLeft = faults
	for i := range n {
		s := &slot{idx: i}
		f.slots = append(f.slots, s)
		arm := i == 0 && f.faultsLeft > 0
		if arm {
			f.faultsLeft--
		}
		f.wg.Go(func() { f.supervise(s, arm) })
	}
}

// waitReady waits until n slots are ready at once.
func (f *fleet) waitReady(ctx context.Context, n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		f.mu.Lock()
		ready := 0
		for _, s := range f.slots {
			if s.ready {
				ready++
			}
		}
		crashes := slices.Clone(f.crashes)
		f.mu.Unlock()
		switch {
		case ready >= n:
			return nil
		case len(crashes) > 0:
			return fmt.Errorf("an instance failed to start: %s", crashes[0])
		case time.Now().After(deadline):
			return fmt.Errorf("only %d of %d instances initialized within %s", ready, n, limit)
		}
		if !sleep.For(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// supervise keeps a process running in s until the fleet stops.
func (f *fleet) supervise(s *slot, arm bool) {
	failures := 0
	for gen := 0; ; gen++ {
		p, err := f.start(s.idx, gen, arm)
		if err != nil {
			if f.ctx.Err() != nil {
				return
			}
			if failures++; failures >= 5 {
				f.mu.Lock()
				f.crashes = append(f.crashes, fmt.Sprintf("slot %d could not be started: %v", s.idx, err))
				f.mu.Unlock()
				return
			}
			f.logf("instance start failed (will retry): %v", err)
			sleep.For(f.ctx, 200*time.Millisecond)
			continue
		}
		failures = 0
		f.mu.Lock()
		if f.stopping {
			f.mu.Unlock()
			p.Kill()
			return
		}
		s.cur, s.ready = p, true
		f.mu.Unlock()
		f.clock.add("start %s on %s%s", p.name, p.Base, map[bool]string{true: " (armed: IDEMGATE_FAULT=after_output)"}[p.armed])

		p.Wait()
		f.mu.Lock()
		s.cur, s.ready = nil, false
		stopping := f.stopping
		switch {
		case stopping:
		case p.killed:
		case p.armed:
			f.faultDeaths++
			f.clock.add("fault %s killed itself after saving an output", p.name)
		default:
			f.crashes = append(f.crashes, fmt.Sprintf("instance %s exited on its own: %s; log %s:\n%s",
				p.name, p.Cmd.ProcessState, p.LogPath, p.Tail(1500)))
			f.clock.add("CRASH %s: %s", p.name, p.Cmd.ProcessState)
		}
		arm = false
		if !stopping {
			f.restarts++
			// Now and then the replacement is armed too, while the budget lasts.
			if f.faultsLeft > 0 && f.rnd.Float64() < 0.5 {
				f.faultsLeft--
				arm = true
			}
		}
		f.mu.Unlock()
		if stopping {
			return
		}
	}
}

// start runs one process and waits for its /initialize; it gives up when
// the fleet stops.
func (f *fleet) start(idx, gen int, armed bool) (*instance, error) {
	name := fmt.Sprintf("i%d.g%d", idx, gen)
	env := f.env
	if armed {
		env = append(slices.Clone(env), "IDEMGATE_FAULT=after_output")
	}
	if node, dsn := f.nodeFor(idx); dsn != "" {
		env = append(slices.Clone(env), "MYSQL_DSN="+dsn)
		name += fmt.Sprintf(".n%d", node)
	}
	in, err := proc.Start(f.ctx, f.bin, proc.Options{Env: env, LogPath: filepath.Join(f.logDir, name+".log"),
		RequestID: "chaos-initialize", StopGrace: 10 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if armed {
		f.mu.Lock()
		f.faultStarts++
		f.mu.Unlock()
	}
	return &instance{Instance: in, name: name, armed: armed}, nil
}

// pick returns a ready process for a delivery, waiting while none is. A
// paused process counts as ready: the platform cannot tell it is frozen.
func (f *fleet) pick(ctx context.Context) (*instance, error) {
	for {
		f.mu.Lock()
		var ready []*instance
		for _, s := range f.slots {
			if s.ready {
				ready = append(ready, s.cur)
			}
		}
		f.mu.Unlock()
		if len(ready) > 0 {
			return ready[f.rnd.IntN(len(ready))], nil
		}
		if !sleep.For(ctx, 50*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
}

// victim chooses a random running instance for a fault: nil when there is
// none or the fleet is stopping. The caller holds f.mu.
func (f *fleet) victim() *slot {
	if f.stopping {
		return nil
	}
	var running []*slot
	for _, s := range f.slots {
		if s.ready && !s.paused {
			running = append(running, s)
		}
	}
	if len(running) == 0 {
		return nil
	}
	return running[f.rnd.IntN(len(running))]
}

// claim picks a random running instance and marks its slot with mark, both
// under f.mu; nil when there is none or the fleet is stopping.
func (f *fleet) claim(mark func(s *slot)) *instance {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.victim()
	if s == nil {
		return nil
	}
	mark(s)
	return s.cur
}

// kill SIGKILLs a random running instance; its supervisor restarts it on a
// new port.
func (f *fleet) kill() {
	p := f.claim(func(s *slot) {
		s.cur.killed, s.ready = true, false
		f.kills++
	})
	if p == nil {
		return
	}
	f.clock.add("kill -9 %s", p.name)
	p.Signal(syscall.SIGKILL)
}

// pause SIGSTOPs a random running instance for d (longer than the lease),
// then SIGCONTs it; it resumes at once when ctx ends.
func (f *fleet) pause(ctx context.Context, d time.Duration) {
	var s *slot
	p := f.claim(func(v *slot) {
		s, v.paused = v, true
		f.pauses++
	})
	if p == nil {
		return
	}
	f.clock.add("SIGSTOP %s for %s", p.name, d.Round(time.Millisecond))
	p.Signal(syscall.SIGSTOP)
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-p.Exited():
	}
	t.Stop()
	p.Signal(syscall.SIGCONT)
	f.clock.add("SIGCONT %s", p.name)
	f.mu.Lock()
	s.paused = false
	f.mu.Unlock()
}

// stop ends every process: gracefully (SIGTERM: in-flight invocations
// drain) or not. It may be called more than once.
func (f *fleet) stop(graceful bool) {
	f.mu.Lock()
	f.stopping = true
	var procs []*instance
	for _, s := range f.slots {
		if s.cur != nil {
			procs = append(procs, s.cur)
		}
	}
	f.mu.Unlock()
	f.cancel() // starts in progress give up and kill what they started
	var wg sync.WaitGroup
	for _, p := range procs {
		if graceful {
			wg.Go(p.Stop) // SIGTERM: in-flight invocations drain; SIGKILL after 10 s
		} else {
			wg.Go(p.Kill)
		}
	}
	wg.Wait()
	f.wg.Wait()
}

func (f *fleet) crashList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.crashes)
}

func (f *fleet) fill(rep *Report) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rep.Kills, rep.Pauses, rep.FaultStarts, rep.FaultDeaths, rep.Restarts = f.kills, f.pauses, f.faultStarts, f.faultDeaths, f.restarts
}

// chaos kills and pauses instances at jittered intervals until ctx ends;
// it returns once every paused instance runs again.
func chaos(ctx context.Context, f *fleet, o Options, rnd *lockedRand, lease time.Duration) {
	jitter := func(d time.Duration) time.Duration { return rnd.Between(d/2, d*3/2) }
	var killC, pauseC <-chan time.Time
	if o.KillEvery > 0 {
		killC = time.After(jitter(o.KillEvery))
	}
	if o.PauseEvery > 0 {
		pauseC = time.After(jitter(o.PauseEvery))
	}
	var paused sync.WaitGroup
	defer paused.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-killC:
			f.kill()
			killC = time.After(jitter(o.KillEvery))
		case <-pauseC:
			d := rnd.Between(lease+lease/4+300*time.Millisecond, 2*lease+time.Second)
			paused.Go(func() { f.pause(ctx, d) })
			pauseC = time.After(jitter(o.PauseEvery))
		}
	}
}
