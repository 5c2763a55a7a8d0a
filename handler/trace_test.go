package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/llm"
	"github.com/idemgate/idemgate/handler/notify"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/internal/dev/modelfake"
	"github.com/idemgate/idemgate/internal/logx"
	"github.com/idemgate/idemgate/internal/trace"
	"github.com/idemgate/idemgate/ossresult"
)

// receiver is a notify endpoint on loopback that keeps each POST's
// traceparent.
type receiver struct {
	url    string
	mu     sync.Mutex
	traces []string
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		rc.traces = append(rc.traces, r.Header.Get("traceparent"))
		rc.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	rc.url = srv.URL
	return rc
}

func (rc *receiver) seen() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.traces...)
}

// tracedRig is the real pipeline on the embedded store, with the HTTP model
// client against the model fake, the notify client allowed to post to the
// receiver, and the function's logger (logx) writing into logs.
func tracedRig(t *testing.T) (*handler.Pipeline, *modelfake.Fake, *receiver, *bytes.Buffer, *boltstore.Store) {
	dir := t.TempDir()
	store, err := boltstore.Open(filepath.Join(dir, "state"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	local, err := ossresult.NewLocal(filepath.Join(dir, "results"))
	if err != nil {
		t.Fatal(err)
	}
	fake := modelfake.Start()
	t.Cleanup(fake.Close)
	model, err := llm.New(llm.Config{BaseURL: fake.URL, APIKey: modelfake.APIKey, Model: "qwen-plus", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t)
	logs := &bytes.Buffer{}
	log := logx.New(&lockedWriter{w: logs}, nil, &logx.Redactor{})
	p := &handler.Pipeline{Engine: idempotency.New(store, idempotency.WithLogger(log)),
		Results: func(context.Context, handler.Credentials) (handler.ResultStore, error) { return local, nil },
		Model:   model, Tasks: handler.Builtin(), Log: log,
		Notify: notify.New(notify.Options{Timeout: 5 * time.Second,
			Allow: notify.MustParseAllowList("http://" + strings.TrimPrefix(rc.url, "http://") + ";loopback")})}
	return p, fake, rc, logs, store
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// tracedEvent is a summarize task asking for notify, with the CloudEvent
// extension attribute traceparent when tp is not "".
func tracedEvent(content, tp, notifyURL string) []byte {
	ev := map[string]any{"id": "ev-" + content, "source": "test", "specversion": "1.0", "type": "idemgate:Task:Submitted",
		"datacontenttype": "application/json",
		"data": map[string]any{"tenant_id": "t1", "task_type": "summarize", "operation": "summarize",
			"input": map[string]any{"content": content}, "notify": map[string]any{"url": notifyURL + "/hook"}}}
	if tp != "" {
		ev["traceparent"] = tp
	}
	b, _ := json.Marshal(ev)
	return b
}

const (
	eventTP  = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	headerTP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
)

// The trace context goes event → logs → model call → notify POST → record:
// the event's traceparent wins over the invocation's header, a span of our
// own is the parent every outgoing call names, and a missing or invalid one
// is replaced by the header's or a new trace, never refused.
func TestTraceContextFlows(t *testing.T) {
	for _, c := range []struct {
		name, event, header string
		wantTrace           string // the trace id every task line and call carries; "" a new one
		wantSampled         bool
		wantNote            string // a log line that says why an incoming value was not used
	}{
		{"the event's wins", eventTP, headerTP, "4bf92f3577b34da6a3ce929d0e0e4736", true, ""},
		{"the header's without the event's", "", headerTP, "0af7651916cd43dd8448eb211c80319c", false, ""},
		{"an invalid event's gives way to the header's", "00-XYZ-bad", headerTP, "0af7651916cd43dd8448eb211c80319c", false,
			"event traceparent ignored"},
		{"none: a new trace", "", "", "", true, ""},
		{"an invalid header's: a new trace", "", "01-00000000000000000000000000000000-b7ad6b7169203331-01", "", true,
			"traceparent replaced by a new trace"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, fake, rc, logs, store := tracedRig(t)
			body := tracedEvent(c.name, c.event, rc.url)
			rep := p.Handle(context.Background(), body, handler.Meta{RequestID: "fc-1", RetryCount: 0, TraceParent: c.header})
			o := outcome(t, rep)
			if rep.Status != 200 || o.Status != "SUCCEEDED" {
				t.Fatalf("answer %d %s", rep.Status, rep.Body)
			}
			calls, posts := fake.TraceParents(o.IdempotencyKey), rc.seen()
			if len(calls) != 1 || len(posts) != 1 {
				t.Fatalf("model calls %q, notify posts %q", calls, posts)
			}
			sent, err := trace.Parse(calls[0])
			if err != nil {
				t.Fatalf("the model call's traceparent %q: %v", calls[0], err)
			}
			want := c.wantTrace
			if want == "" {
				want = sent.TraceIDString()
				for _, in := range []string{eventTP, headerTP} {
					if strings.Contains(in, want) {
						t.Fatalf("a new trace was wanted, the model call continued %s", in)
					}
				}
			}
			if sent.TraceIDString() != want || sent.Sampled() != c.wantSampled || calls[0] == c.event || calls[0] == c.header {
				t.Fatalf("the model call sent %s; want trace %s (sampled %v) under a span of our own", calls[0], want, c.wantSampled)
			}
			if posts[0] != calls[0] {
				t.Errorf("the notify POST sent %q, the model call %q", posts[0], calls[0])
			}
			if rec, err := store.Get(context.Background(), o.IdempotencyKey); err != nil || rec.TraceParent != calls[0] {
				t.Errorf("the record keeps %q (%v), the calls sent %q", rec.TraceParent, err, calls[0])
			}
			note := false
			for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				var l map[string]any
				if err := json.Unmarshal([]byte(line), &l); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				note = note || l["msg"] == c.wantNote
				if _, ok := l["trace_id"].(string); !ok {
					t.Errorf("a line without trace_id: %s", line)
				} else if l["idempotency_key"] != nil && l["trace_id"] != want {
					t.Errorf("a task line of trace %v, want %s: %s", l["trace_id"], want, line)
				}
			}
			if c.wantNote != "" && !note {
				t.Errorf("no line %q in\n%s", c.wantNote, logs)
			}
		})
	}
}

// A duplicate delivered under another trace is answered; the record keeps
// the first delivery's traceparent.
func TestTraceParentOfTheFirstDeliveryStays(t *testing.T) {
	p, fake, rc, _, store := tracedRig(t)
	first := p.Handle(context.Background(), tracedEvent("dup", eventTP, rc.url), handler.Meta{RequestID: "fc-1"})
	again := p.Handle(context.Background(), tracedEvent("dup", headerTP, rc.url), handler.Meta{RequestID: "fc-2"})
	o1, o2 := outcome(t, first), outcome(t, again)
	if o1.Status != "SUCCEEDED" || o2.Decision != string(idempotency.DecisionRepeatDone) {
		t.Fatalf("first %+v, again %+v", o1, o2)
	}
	rec, err := store.Get(context.Background(), o1.IdempotencyKey)
	tp := rec.TraceParent
	if c, perr := trace.Parse(tp); err != nil || perr != nil || c.TraceIDString() != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		tp != fake.TraceParents(o1.IdempotencyKey)[0] {
		t.Fatalf("the record keeps %q (%v)", tp, err)
	}
}
