package e2e_test

// Trace context and retention on the real binary: a traceparent followed from
// the event through the log lines, the model call and the notify POST to the
// stored record; and the daily purge timer, whose tombstone answers a
// duplicate of the purged key until its objects expired; after that it is a
// new action.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/deploy/logq"
	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/internal/trace"
)

// withTraceparent adds the CloudEvents distributed-tracing attribute to an
// event.
func withTraceparent(t *testing.T, body []byte, tp string) []byte {
	t.Helper()
	var ev map[string]any
	if err := json.Unmarshal(body, &ev); err != nil {
		t.Fatal(err)
	}
	ev["traceparent"] = tp
	b, _ := json.Marshal(ev)
	return b
}

// hookTraces is a notify receiver on loopback that keeps each POST's
// traceparent by Idempotency-Key.
type hookTraces struct {
	srv    *httptest.Server
	mu     sync.Mutex
	traces map[string][]string
}

func newHookTraces(t *testing.T) *hookTraces {
	h := &hookTraces{traces: map[string][]string{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		k := r.Header.Get("Idempotency-Key")
		h.traces[k] = append(h.traces[k], r.Header.Get("traceparent"))
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookTraces) of(key string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.traces[key]...)
}

// keysKnown: every key of lines is indexed or left to the full-text index.
func keysKnown(t *testing.T, lines []logq.Line) {
	t.Helper()
	for _, l := range lines {
		for k := range l {
			_, unindexed := logq.Unindexed[k]
			if !unindexed && !slices.ContainsFunc(logq.Fields, func(f logq.Field) bool { return f.Name == k }) {
				t.Errorf("log key %q is neither indexed (deploy/logq Fields) nor in logq.Unindexed", k)
			}
		}
	}
}

func TestTraceContextEndToEnd(t *testing.T) {
	hook := newHookTraces(t)
	d := newDrill(t, "NOTIFY_ALLOWED_HOSTS="+hook.srv.URL+";loopback")
	inst := start(t, d.env...)
	const (
		eventTP  = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		headerTP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	)
	body := withTraceparent(t, taskEvent("ev-"+nonce(), "traced "+nonce(),
		map[string]any{"notify": map[string]any{"url": hook.srv.URL + "/done"}}), eventTP)
	req := "fc-" + nonce()
	m := inst.invoke(t, body, req, map[string]string{"traceparent": headerTP}).json(t)
	key, _ := m["idempotency_key"].(string)
	if m["status"] != "SUCCEEDED" || key == "" {
		t.Fatalf("answer %v", m)
	}
	calls, posts := d.llm.TraceParents(key), hook.of(key+":notify")
	if len(calls) != 1 || len(posts) != 1 || posts[0] != calls[0] {
		t.Fatalf("model calls sent %q, notify POSTs %q: want one each, the same", calls, posts)
	}
	sent, err := trace.Parse(calls[0])
	if err != nil || sent.TraceIDString() != "4bf92f3577b34da6a3ce929d0e0e4736" || calls[0] == eventTP {
		t.Fatalf("the model call sent %q (%v): want the event's trace under a span of the function's", calls[0], err)
	}

	var lines []logq.Line // the invocation's: the start-up lines precede it
	for _, l := range (&tail{t: t, in: inst}).through(req, 1) {
		if l.Text("fc_request_id") == req {
			lines = append(lines, l)
		}
	}
	var task, start int
	for _, l := range lines {
		switch {
		case l.Text("trace_id") == "":
			t.Errorf("a line without trace_id: %v", l)
		case l.Text("idempotency_key") == key:
			task++
			if l.Text("trace_id") != sent.TraceIDString() {
				t.Errorf("a task line of trace %s, want the event's: %v", l.Text("trace_id"), l)
			}
		case l.Text("msg") == "FC Invoke Start RequestId: "+req:
			start++
			if l.Text("trace_id") != "0af7651916cd43dd8448eb211c80319c" {
				t.Errorf("the platform's line is not in the invocation's trace: %v", l)
			}
		}
	}
	if task == 0 || start != 1 {
		t.Fatalf("%d task lines, %d start lines in %d lines", task, start, len(lines))
	}
	keysKnown(t, lines)

	out, code := d.cli("inspect", "--key", key)
	var ins handler.Inspection
	if err := json.Unmarshal([]byte(out), &ins); code != 0 || err != nil || ins.Record.TraceParent != calls[0] {
		t.Fatalf("inspect: exit %d, %v, record traceparent %q, want %q", code, err, ins.Record.TraceParent, calls[0])
	}
}

// The purge timer retires a finished task older than RETENTION_DAYS to its
// tombstone, which answers the same event without running it (issue 20 case
// 2); once the tombstone is as old as the objects' lifetime and the margin
// it goes, and the same event is a new action: claimed FIRST, the model
// called again. The fake model answers differently this time, so the re-run
// meets the first run's approved result and ends result_conflict, FINAL for
// FC's retry too (a dead letter, not a second answer): the first effective
// result stands (docs/operations.md, "The dedup window").
func TestPurgeTimerEndToEnd(t *testing.T) {
	d := newDrill(t, "REDIS_URL=") // without the fast layer, the next duplicate reaches the store at once
	inst := start(t, d.env...)
	old, young := taskEvent("ev-"+nonce(), "old "+nonce(), nil), taskEvent("ev-"+nonce(), "young "+nonce(), nil)
	var keys []string
	for _, body := range [][]byte{old, young} {
		m := inst.invoke(t, body, "fc-"+nonce(), nil).json(t)
		if m["status"] != "SUCCEEDED" {
			t.Fatalf("answer %v", m)
		}
		keys = append(keys, m["idempotency_key"].(string))
	}
	first, ok := d.approved(keys[0])
	if !ok {
		t.Fatal("no approved result")
	}
	for end := time.Now().Add(5 * time.Second); d.record(keys[0]).Finish != driver.FinishDone; { // marked in the instance's next batch
		if time.Now().After(end) {
			t.Fatalf("finish still %s", d.record(keys[0]).Finish)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := d.store.DB().ExecContext(context.Background(), `UPDATE idempotency_record
 SET updated_at = updated_at - INTERVAL 31 DAY WHERE request_id = ? OR parent_key = ?`, keys[0], keys[0]); err != nil {
		t.Fatal(err)
	}
	var ins handler.Inspection
	out, code := d.cli("inspect", "--key", keys[0])
	if err := json.Unmarshal([]byte(out), &ins); code != 0 || err != nil ||
		ins.DedupWindowEnds != ins.Record.UpdatedAt.Add(32*24*time.Hour).UTC().Format(time.RFC3339) {
		t.Fatalf("inspect: exit %d, %v, dedup_window_ends %q", code, err, ins.DedupWindowEnds)
	}

	timer, err := os.ReadFile(filepath.Join(root, "testdata", "events", "timer-purge.json"))
	if err != nil {
		t.Fatal(err)
	}
	purgeID := "fc-purge-" + nonce()
	a := inst.invoke(t, timer, purgeID, nil)
	var rep handler.PurgeReport
	if err := json.Unmarshal(a.body, &rep); a.status != 200 || err != nil || rep.Records != 1 || rep.Steps != 0 ||
		rep.More || rep.OlderThan != "720h0m0s" {
		t.Fatalf("purge timer: %d %s", a.status, a.body)
	}
	lines := (&tail{t: t, in: inst}).through(purgeID, 1) // the log arrives behind the answer
	done := slices.IndexFunc(lines, func(l logq.Line) bool { return l.Text("msg") == "purge done" })
	if done < 0 || lines[done].Text("purged_records") != "1" {
		t.Fatalf("no purge line with its counts in %v", lines)
	}
	keysKnown(t, lines)
	if out, code := d.cli("inspect", "--key", keys[0]); code != 0 || !strings.Contains(out, `"tombstone": true`) {
		t.Fatalf("inspect of the purged key: exit %d\n%s", code, out)
	}
	if _, code := d.cli("inspect", "--key", keys[1]); code != 0 {
		t.Fatalf("inspect of the young key: exit %d", code)
	}
	m := inst.invoke(t, old, "fc-"+nonce(), nil).json(t)
	if m["decision"] != "REPEAT_DONE" || m["status"] != "SUCCEEDED" || d.llm.Calls(keys[0]) != 1 {
		t.Fatalf("the purged key's event, answered by its tombstone: %v (model calls %d)", m, d.llm.Calls(keys[0]))
	}

	if _, err := d.store.DB().ExecContext(context.Background(), `UPDATE idempotency_record
 SET updated_at = updated_at - INTERVAL 2 DAY WHERE request_id = ?`, keys[0]); err != nil {
		t.Fatal(err)
	}
	if a := inst.invoke(t, timer, "fc-purge-"+nonce(), nil); a.status != 200 || json.Unmarshal(a.body, &rep) != nil || rep.Tombstones != 1 {
		t.Fatalf("purge timer, the tombstone's age over: %d %s", a.status, a.body)
	}
	if _, code := d.cli("inspect", "--key", keys[0]); code != 3 {
		t.Fatalf("inspect of the key whose tombstone went: exit %d", code)
	}
	fcID := "fc-" + nonce()
	for try := range 2 {
		a := inst.invoke(t, old, fcID, map[string]string{"x-fc-retry-count": fmt.Sprint(try)})
		m := a.json(t)
		if a.status != 404 || m["errorType"] != "result_conflict" || d.llm.Calls(keys[0]) != 2 {
			t.Fatalf("the event after the window, try %d: %d %v (model calls %d)", try, a.status, m, d.llm.Calls(keys[0]))
		}
	}
	if text, _ := d.approved(keys[0]); text != first || !strings.Contains(first, "summary") {
		t.Fatalf("the approved result changed: %q → %q", first, text)
	}
}
