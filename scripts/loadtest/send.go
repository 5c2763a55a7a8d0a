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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/internal/dev/progress"
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
}

// execute sends units to targets with at most c requests in flight; a burst
// holds one slot per member and its members start together, each to another
// instance (round robin).
func execute(ctx context.Context, client *http.Client, run int, phase string, units []Unit, targets []string,
	c int, done *atomic.Int64) PhaseResult {
	total := 0
	for _, u := range units {
		total += len(u.Members)
	}
	res := make([]Result, total)
	slots := make(chan struct{}, c)
	var wg sync.WaitGroup
	start := time.Now()
	seq, rr := 0, 0
dispatch:
	for _, u := range units {
		for range u.Members {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				break dispatch
			}
		}
		gate := make(chan struct{})
		for j, d := range u.Members {
			r := &res[seq]
			*r = Result{Run: run, Phase: phase, Seq: seq, Action: d.Action, Kind: d.Kind}
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
				*r = Result{Run: run, Phase: phase, Seq: lo + i, Action: -1, Kind: "op", HTTPStatus: http.StatusOK, Duplicate: true}
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
// operations lo..hi-1.
type Job struct {
	Name string
	N    int
	Run  func(lo, hi int, done *atomic.Int64) PhaseResult
}

// interleave runs the jobs in slices, alternating (A B, B A, A B, …), so
// that drift in the machine's load (other processes, the database's
// background flushing) falls on every job alike. Each job's wall time is the
// sum of its slices'.
func interleave(jobs []Job, slices int, prog *progress.Bar, label string) []PhaseResult {
	total := 0
	for _, j := range jobs {
		total += j.N
	}
	var done atomic.Int64
	prog.Start(label, total, &done)
	defer prog.Stop()
	out := make([]PhaseResult, len(jobs))
	for i, j := range jobs {
		out[i].Name = j.Name
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
			r := j.Run(lo, hi, &done)
			for x := range r.Results {
				r.Results[x].Start += out[i].Wall
				r.Results[x].Seq = len(out[i].Results) + x
			}
			out[i].Results = append(out[i].Results, r.Results...)
			out[i].Wall += r.Wall
		}
	}
	return out
}
