package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/idempotency/keys"
	"github.com/idemgate/idemgate/internal/sleep"
)

// Delivery kinds: how a delivery relates to the key's first one.
const (
	kindOriginal    = "original"
	kindSameReq     = "same-request"  // the same event under the same FC request id (at-least-once queue)
	kindNewReq      = "new-request"   // the same event under a new FC request id (EventBridge redelivery)
	kindDoubleSub   = "double-submit" // a new event (new id) with the same data
	fcMaxRetries    = 3               // FC async default
	maxInFlight     = 64              // concurrent invocations, so MariaDB's connections suffice
	drainLimit      = 2 * time.Minute // how long deliveries under way may go on past the cap
	invokeTimeout   = 30 * time.Second
	functionTimeout = "30"
)

type delivery struct {
	n       int // index within the key
	kind    string
	event   int  // which event of the key (double submits are new events)
	req     int  // which FC request id of the key
	burst   bool // starts together with an earlier delivery of the key
	body    []byte
	fcReqID string
	at      time.Duration
}

type keyPlan struct {
	idx        int
	key        string // K, derived here as the function derives it
	explicit   bool   // the events carry an explicit idempotency_key
	deliveries []*delivery
}

// makePlan draws the deliveries of every key: on average o.Deliveries each,
// spread over the first 60% of the stream, some in concurrent bursts.
func makePlan(runID string, o Options, rnd *lockedRand) ([]*keyPlan, error) {
	spread := o.Duration * 6 / 10
	plans := make([]*keyPlan, o.Keys)
	for i := range plans {
		input, _ := json.Marshal(map[string]any{"content": fmt.Sprintf(
			"Chaos run %s, document %d: at-most-once delivery of asynchronous tasks under duplicates and crashes.", runID, i)})
		data := map[string]any{"tenant_id": "chaos", "task_type": "summarize", "operation": "summarize",
			"input": json.RawMessage(input), "request_id": fmt.Sprintf("up-%s-%d", runID, i)}
		p := &keyPlan{idx: i, explicit: i%5 == 4}
		f := keys.Fields{TenantID: "chaos", TaskType: "summarize", Operation: "summarize", Input: input}
		if p.explicit { // the explicit-key derivation path, too
			data["idempotency_key"] = fmt.Sprintf("order-%s-%d", runID, i)
			f.IdempotencyKey = data["idempotency_key"].(string)
		}
		d, err := keys.Derive(f)
		if err != nil {
			return nil, err
		}
		p.key = d.Key
		n := 1
		if o.Deliveries > 1 {
			n += rnd.IntN(2*(o.Deliveries-1) + 1) // 1 … 2·avg−1: mean avg
		}
		events := 1
		for j := range n {
			dv := &delivery{n: j, kind: kindOriginal, at: rnd.Between(0, spread)}
			eventNo, reqNo := 0, j
			if j > 0 {
				switch r := rnd.Float64(); {
				case r < 0.3:
					dv.kind, reqNo = kindSameReq, 0
				case r < 0.65:
					dv.kind = kindNewReq
				default:
					dv.kind, eventNo = kindDoubleSub, events
					events++
				}
				if rnd.Float64() < 0.3 { // a burst: together with an earlier delivery
					dv.burst, dv.at = true, p.deliveries[rnd.IntN(j)].at
				}
			}
			dv.event, dv.req = eventNo, reqNo
			dv.fcReqID = fmt.Sprintf("fc-%s-%d-%d", runID, i, reqNo)
			dv.body = eventBody(fmt.Sprintf("ev-%s-%d-%d", runID, i, eventNo), data)
			p.deliveries = append(p.deliveries, dv)
		}
		plans[i] = p
	}
	return plans, nil
}

// eventBody is an EventBridge CloudEvent carrying data.
func eventBody(id string, data map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"id": id, "source": "idemgate.chaos", "specversion": "1.0",
		"type": "idemgate:Task:Submitted", "time": time.Now().UTC().Format(time.RFC3339), "datacontenttype": "application/json",
		"aliyunaccountid": "1234567890123456", "aliyuneventbusname": "default", "aliyunregionid": "cn-hangzhou", "data": data})
	return b
}

// keyTally is what the deliveries of one key saw.
type keyTally struct {
	ok, dead, unsent, abandoned int
	succeededRefs               map[string]bool // result_ref of every SUCCEEDED answer
	wrongKey                    []string        // answers naming another key
	trace                       []string        // every try, for the report of a violation
}

// tally collects the stream's figures.
type tally struct {
	mu                                          sync.Mutex
	tries, retries, answered, dups, running     int
	executions                                  int
	failures                                    map[string]int
	deadExhausted, deadFinal, unsent, abandoned int
	keys                                        []keyTally
	settled                                     atomic.Int64 // deliveries that ended, for the progress bar
}

func newTally(keys int) *tally {
	t := &tally{failures: map[string]int{}, keys: make([]keyTally, keys)}
	for i := range t.keys {
		t.keys[i].succeededRefs = map[string]bool{}
	}
	return t
}

func (t *tally) fill(rep *Report) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rep.Tries, rep.FCRetries, rep.Answered, rep.Duplicates, rep.InProgress = t.tries, t.retries, t.answered, t.dups, t.running
	rep.Executions, rep.Failures = t.executions, t.failures
	rep.DeadExhausted, rep.DeadFinal, rep.Unsent, rep.Abandoned = t.deadExhausted, t.deadFinal, t.unsent, t.abandoned
	rep.DeadLetters = t.deadExhausted + t.deadFinal
}

var invokeClient = &http.Client{
	Timeout: invokeTimeout,
	// A fresh connection per invocation: a connection error then always
	// means the instance died, never a stale pooled connection.
	Transport: &http.Transport{DisableKeepAlives: true},
}

// stream sends every delivery at its time and simulates FC's async retries:
// a connection error (the instance died), a retryable 404 or any other
// non-answer is delivered again — same body, same x-fc-request-id,
// x-fc-retry-count+1 — to a random live instance, up to three times; then it
// is a dead letter, as is a FINAL failure at once. A delivery not started
// when capCtx ends is never sent; one under way goes on with its retries, as
// FC's would, until runCtx ends.
func stream(capCtx, runCtx context.Context, f *fleet, plans []*keyPlan, rnd *lockedRand, clock *timeline, t *tally) {
	sem := make(chan struct{}, maxInFlight)
	start := time.Now()
	var wg sync.WaitGroup
	for _, p := range plans {
		for _, d := range p.deliveries {
			wg.Go(func() {
				if !sleep.For(capCtx, time.Until(start.Add(d.at))) {
					t.settle(p, d, "unsent", clock)
					return
				}
				deliver(runCtx, f, t, p, d, sem, rnd, clock)
			})
		}
	}
	wg.Wait()
}

func deliver(ctx context.Context, f *fleet, t *tally, p *keyPlan, d *delivery, sem chan struct{}, rnd *lockedRand, clock *timeline) {
	for retry := 0; ; retry++ {
		inst, err := f.pick(ctx)
		if err != nil {
			t.settle(p, d, "abandoned", clock)
			return
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			t.settle(p, d, "abandoned", clock)
			return
		}
		status, hdr, body, err := invoke(ctx, inst.Base, d, retry)
		<-sem
		if ctx.Err() != nil {
			t.settle(p, d, "abandoned", clock)
			return
		}
		var o handler.Outcome
		if err == nil {
			_ = json.Unmarshal(body, &o)
		}
		what, again := t.record(p, d, retry, inst.name, status, hdr, o, err, clock)
		if !again {
			t.settle(p, d, what, clock)
			return
		}
		if retry == fcMaxRetries {
			t.settle(p, d, "exhausted", clock)
			return
		}
		// FC backs off between retries; shortened here to keep runs short.
		if !sleep.For(ctx, rnd.Between(100*time.Millisecond, 300*time.Millisecond)<<retry) {
			t.settle(p, d, "abandoned", clock)
			return
		}
	}
}

func invoke(ctx context.Context, base string, d *delivery, retry int) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/invoke", bytes.NewReader(d.body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("x-fc-request-id", d.fcReqID)
	req.Header.Set("x-fc-retry-count", fmt.Sprint(retry))
	req.Header.Set("x-fc-function-name", "idemgate")
	req.Header.Set("x-fc-region", "cn-hangzhou")
	req.Header.Set("x-fc-account-id", "1234567890123456")
	req.Header.Set("x-fc-function-timeout", functionTimeout)
	resp, err := invokeClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header, b, nil
}

// record counts one try and decides whether FC would deliver again.
func (t *tally) record(p *keyPlan, d *delivery, retry int, inst string, status int, hdr http.Header, o handler.Outcome, err error, clock *timeline) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := &t.keys[p.idx]
	t.tries++
	if retry > 0 {
		t.retries++
	}
	if err == nil && o.IdempotencyKey != "" && o.IdempotencyKey != p.key {
		k.wrongKey = append(k.wrongKey, fmt.Sprintf("%s answered key %s", inst, o.IdempotencyKey))
	}
	if err == nil && o.IdempotencyKey != "" && !o.Duplicate && o.Decision != "" && o.Decision != handler.DecisionRejected {
		t.executions++
	}
	var what string
	again := false
	switch {
	case err != nil:
		t.failures["connection"]++
		what, again = "no answer: "+shortErr(err), true
	case status == http.StatusOK:
		t.answered++
		if o.Duplicate {
			t.dups++
		}
		if o.Status == "RUNNING" {
			t.running++
		}
		if o.Status == "SUCCEEDED" {
			k.succeededRefs[o.ResultRef] = true
		}
		what = fmt.Sprintf("200 %s %s dup=%t attempt=%d %s", o.Status, o.Decision, o.Duplicate, o.Attempt, refTail(o.ResultRef))
	case status == http.StatusNotFound && hdr.Get("x-fc-status") == "404":
		typ := o.ErrorType
		if typ == "" {
			typ = "unknown"
		}
		t.failures[typ]++
		again = o.Retryable == nil || *o.Retryable
		what = fmt.Sprintf("404 %s retryable=%t %s %s attempt=%d", typ, again, o.Status, o.Decision, o.Attempt)
	default:
		t.failures[fmt.Sprintf("http_%d", status)]++
		what, again = fmt.Sprintf("HTTP %d", status), true
	}
	k.trace = append(k.trace, fmt.Sprintf("%s d%d %s%s ev%d fc%d retry=%d → %s: %s", clock.since(), d.n, d.kind,
		map[bool]string{true: "(burst)"}[d.burst], d.event, d.req, retry, inst, what))
	return what, again
}

// settle records how a delivery ended: answered, a dead letter, or cut by
// the duration cap.
func (t *tally) settle(p *keyPlan, d *delivery, how string, clock *timeline) {
	t.settled.Add(1)
	t.mu.Lock()
	defer t.mu.Unlock()
	k := &t.keys[p.idx]
	switch {
	case how == "unsent":
		t.unsent++
		k.unsent++
		return
	case how == "abandoned":
		t.abandoned++
		k.abandoned++
	case how == "exhausted":
		t.deadExhausted++
		k.dead++
	case strings.HasPrefix(how, "404"):
		t.deadFinal++
		k.dead++
	default:
		k.ok++
		return
	}
	k.trace = append(k.trace, fmt.Sprintf("%s d%d ended: %s", clock.since(), d.n, map[bool]string{true: "abandoned (drain limit)",
		false: "dead letter"}[how == "abandoned"]))
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}

// refTail shortens a result_ref to attempt-NNN/output.json.
func refTail(ref string) string {
	if i := strings.LastIndex(ref, "/attempt-"); i >= 0 {
		return ref[i+1:]
	}
	return ref
}

// sortedKeys lists a map's keys in order, for stable printing.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
