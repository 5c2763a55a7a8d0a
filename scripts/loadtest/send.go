package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/internal/dev/proc"
)

// Result is one request's answer (one CSV row).
type Result struct {
	Run         int
	Phase       string
	Seq         int
	Action      int
	Kind        Kind
	Target      string
	FCRequestID string
	Start       time.Duration // since the phase started
	Lag         time.Duration // paced phases: how late the delivery was sent after it was due
	Latency     time.Duration
	HTTPStatus  int
	Key         string
	Status      string
	Decision    string
	Duplicate   bool
	Attempt     int
	ResultRef   string
	Err         string
}

// Class is the latency class of an answer: "first" for a delivery that
// executed (FIRST, TAKEOVER), "duplicate" for one answered without executing,
// "error" for anything but a 200 outcome.
func (r *Result) Class() string {
	switch {
	case r.HTTPStatus != http.StatusOK || r.Err != "":
		return "error"
	case r.Duplicate:
		return "duplicate"
	}
	return "first"
}

// newClient is the one HTTP client of a run: the function's instances and the
// bare handler are hit by the same code and the same connection pool size.
func newClient(conns int, timeout time.Duration) *http.Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 3 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4 * conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &http.Client{Transport: tr, Timeout: timeout}
}

func newRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// invoke sends one event to base's /invoke with the headers FC sends and
// fills r with the answer.
func invoke(ctx context.Context, client *http.Client, base string, body []byte, r *Result) {
	r.FCRequestID = newRequestID()
	r.Target = base
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/invoke", bytes.NewReader(body))
	if err != nil {
		r.Err = err.Error()
		return
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("x-fc-request-id", r.FCRequestID)
	req.Header.Set("x-fc-function-name", "idemgate")
	req.Header.Set("x-fc-region", "cn-hangzhou")
	req.Header.Set("x-fc-account-id", "1234567890123456")
	req.Header.Set("x-fc-function-timeout", "60")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		r.Latency = time.Since(start)
		r.Err = err.Error()
		return
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	r.Latency = time.Since(start)
	r.HTTPStatus = resp.StatusCode
	if err != nil {
		r.Err = err.Error()
		return
	}
	var o handler.Outcome
	if err := json.Unmarshal(b, &o); err != nil {
		r.Err = fmt.Sprintf("answer is not JSON: %.200s", b)
		return
	}
	r.Key, r.Status, r.Decision, r.Duplicate, r.Attempt, r.ResultRef = o.IdempotencyKey, o.Status, o.Decision, o.Duplicate, o.Attempt, o.ResultRef
	if resp.StatusCode != http.StatusOK {
		r.Err = strings.TrimSpace(o.ErrorType + ": " + o.ErrorMessage)
	}
}

// PhaseResult is one phase's answers and wall time.
type PhaseResult struct {
	Name    string
	Results []Result
	Wall    time.Duration
	Slices  []Slice // what was measured around each slice (see interleave)
	charged bool    // the job named processes (Job.PIDs): Slice.CPU is theirs
}

// Slice is what was measured around one slice of a phase.
type Slice struct {
	Wall     time.Duration
	Requests int // answers (operations of an in-process floor)
	Tasks    int // of those, the executions: duplicate=false answers, or floor operations without error
	// SQL are the MySQL status deltas (nil: not probed); Foreign says why
	// another client may have been active meanwhile ("": clean).
	SQL     Counters
	Foreign string
	CPU     time.Duration // of the job's processes (Job.PIDs)
	// Procs is the CPU time of each observed process group (-observe, and
	// this program itself) during the slice; nil without -observe.
	Procs map[string]time.Duration
}

// executions counts the answers that executed a task: duplicate=false
// answers, or floor operations without error.
func executions(rs []Result) int {
	n := 0
	for i := range rs {
		r := &rs[i]
		if r.Err == "" && r.HTTPStatus == http.StatusOK && (!r.Duplicate || r.Kind == KindOp) {
			n++
		}
	}
	return n
}

// execute sends units to targets with at most c requests in flight; a burst
// holds one slot per member and its members start together, each to another
// instance (round robin). With pace > 0 the deliveries are offered at one per
// pace (open loop: a unit is due at start + pace × the deliveries before it,
// whatever the answers), for as long as the offer lasts (pace × the
// deliveries); a unit that found no free slot by then is not sent.
func execute(ctx context.Context, client *http.Client, run int, phase string, units []Unit, targets []string,
	c int, pace time.Duration, done *atomic.Int64) PhaseResult {
	total := 0
	for _, u := range units {
		total += len(u.Members)
	}
	res := make([]Result, total)
	slots := make(chan struct{}, c)
	var wg sync.WaitGroup
	start := time.Now()
	over := make(chan struct{}) // the offer ended (never, without pace)
	if pace > 0 {
		t := time.AfterFunc(time.Duration(total)*pace, func() { close(over) })
		defer t.Stop()
	}
	seq, rr := 0, 0
	for _, u := range units {
		due := time.Duration(seq) * pace
		if !waitDue(ctx, start.Add(due), over) || !takeSlots(ctx, slots, len(u.Members), over) {
			break
		}
		gate := make(chan struct{})
		lag := time.Since(start) - due
		for j, d := range u.Members {
			r := &res[seq]
			*r = Result{Run: run, Phase: phase, Seq: seq, Action: d.Action, Kind: d.Kind}
			if pace > 0 {
				r.Lag = lag
			}
			seq++
			target := targets[(rr+j)%len(targets)]
			wg.Add(1)
			go func(body []byte) {
				defer wg.Done()
				defer func() { <-slots }()
				<-gate
				r.Start = time.Since(start)
				invoke(ctx, client, target, body, r)
				done.Add(1)
			}(d.Body)
		}
		rr += len(u.Members)
		close(gate)
	}
	wg.Wait()
	wall := time.Since(start)
	return PhaseResult{Name: phase, Results: res[:seq], Wall: wall}
}

// waitDue waits until t; false if ctx or the offer ended first.
func waitDue(ctx context.Context, t time.Time, over <-chan struct{}) bool {
	if d := time.Until(t); d > 0 {
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-tm.C:
		case <-ctx.Done():
			return false
		case <-over:
			return false
		}
	}
	return ctx.Err() == nil
}

// takeSlots takes n slots, or none if ctx or the offer ends first.
func takeSlots(ctx context.Context, slots chan struct{}, n int, over <-chan struct{}) bool {
	for k := range n {
		select {
		case slots <- struct{}{}:
			continue
		case <-ctx.Done():
		case <-over:
		}
		for range k {
			<-slots
		}
		return false
	}
	return true
}

// timeOps runs op n times with c workers and times each call.
func timeOps(ctx context.Context, run int, phase string, lo, hi, c int, done *atomic.Int64, op func(ctx context.Context, i int) error) PhaseResult {
	n := hi - lo
	res := make([]Result, n)
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				r := &res[i]
				*r = Result{Run: run, Phase: phase, Seq: lo + i, Action: -1, Kind: KindOp, HTTPStatus: http.StatusOK, Duplicate: true}
				r.Start = time.Since(start)
				t := time.Now()
				err := op(ctx, lo+i)
				r.Latency = time.Since(t)
				if err != nil {
					r.Err = err.Error()
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	if k := int(next.Load()); k < n {
		res = res[:k]
	}
	return PhaseResult{Name: phase, Results: res, Wall: wall}
}

// Job is one phase of an interleaved group: run(lo, hi) performs its
// operations lo..hi-1. PIDs are the processes whose CPU time it is charged.
type Job struct {
	Name string
	N    int
	PIDs []int
	Run  func(lo, hi int, done *atomic.Int64) PhaseResult
}

// interleave runs the jobs in slices, alternating (A B, B A, A B, …), so
// that drift in the machine's load (other processes, the database's
// background flushing) falls on every job alike. Each job's wall time is the
// sum of its slices'. Around each slice it reads the MySQL counters (r.probe)
// and the CPU time of the job's processes.
func (r *runner) interleave(jobs []Job, slices int, label string) []PhaseResult {
	total := 0
	for _, j := range jobs {
		total += j.N
	}
	var done atomic.Int64
	r.prog.Start(label, total, &done)
	defer r.prog.Stop()
	out := make([]PhaseResult, len(jobs))
	for i, j := range jobs {
		out[i].Name, out[i].charged = j.Name, len(j.PIDs) > 0
	}
	for s := range slices {
		for k := range jobs {
			i := k
			if s%2 == 1 {
				i = len(jobs) - 1 - k
			}
			j := jobs[i]
			lo, hi := j.N*s/slices, j.N*(s+1)/slices
			if hi <= lo {
				continue
			}
			res, sl := r.runSlice(j, lo, hi, &done)
			for x := range res.Results {
				res.Results[x].Start += out[i].Wall
				res.Results[x].Seq = len(out[i].Results) + x
			}
			out[i].Results = append(out[i].Results, res.Results...)
			out[i].Wall += res.Wall
			out[i].Slices = append(out[i].Slices, sl)
		}
	}
	return out
}

// runSlice runs one slice of j with the probes around it. A failed probe
// leaves the slice unclean; it does not stop the run.
func (r *runner) runSlice(j Job, lo, hi int, done *atomic.Int64) (PhaseResult, Slice) {
	var perr error
	if r.probe != nil {
		perr = r.probe.begin(r.ctx)
	}
	perf := r.prof.session(j.Name) // -perf-dir: records this slice of its phase
	perf.command("enable")
	cpu0, procs0 := proc.CPUTime(j.PIDs), r.observeCPU()
	res := j.Run(lo, hi, done)
	sl := Slice{Wall: res.Wall, CPU: proc.CPUTime(j.PIDs) - cpu0, Requests: len(res.Results), Tasks: executions(res.Results)}
	perf.command("disable")
	if procs0 != nil {
		sl.Procs = r.observeCPU()
		for name, d := range procs0 {
			sl.Procs[name] -= d
		}
	}
	if r.probe != nil && perr == nil {
		sl.SQL, sl.Foreign, perr = r.probe.end(r.ctx)
	}
	if perr != nil {
		sl.SQL, sl.Foreign = nil, "probe failed: "+perr.Error()
	}
	return res, sl
}

// Names of the process groups every observed phase is charged, beside
// -observe's.
const (
	procFunction  = "function"       // the phase's instances (Job.PIDs)
	procGenerator = "load-generator" // this program: client, fakes, in-process floors
)

// observeCPU is the CPU time so far of each -observe group and of this
// program (nil without -observe).
func (r *runner) observeCPU() map[string]time.Duration {
	if len(r.o.Observe) == 0 {
		return nil
	}
	m := make(map[string]time.Duration, len(r.o.Observe)+1)
	for name, pids := range r.o.Observe {
		m[name] = proc.CPUTime(pids)
	}
	m[procGenerator] = proc.CPUTime([]int{os.Getpid()})
	return m
}
