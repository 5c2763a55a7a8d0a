package event

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// readEvent reads a sample body from testdata/events at the repo root.
func readEvent(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "events", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mkEvent builds a CloudEvent body around data (a JSON literal; "" for no data) with
// extra top-level members merged in (a JSON object literal without braces).
func mkEvent(data, extra string) []byte {
	var b strings.Builder
	b.WriteString(`{"specversion":"1.0","id":"e-1","source":"idemgate.test","type":"idemgate:Task:Submitted"`)
	if data != "" {
		b.WriteString(`,"data":` + data)
	}
	if extra != "" {
		b.WriteString("," + extra)
	}
	b.WriteString("}")
	return []byte(b.String())
}

const goodData = `{"tenant_id":"acme","task_type":"summarize","operation":"summarize","input":{"content":"hello"}}`

func TestParseSampleFiles(t *testing.T) {
	t.Run("eventbridge-single", func(t *testing.T) {
		inv, err := Parse(readEvent(t, "eventbridge-single.json"))
		if err != nil {
			t.Fatal(err)
		}
		if inv.Kind != KindSingle || inv.Size != 1 || len(inv.Tasks) != 1 || len(inv.Rejected) != 0 {
			t.Fatalf("invocation = %+v", inv)
		}
		task := inv.Tasks[0]
		want := Task{
			TenantID: "acme", TaskType: "summarize", Operation: "summarize",
			RequestID:   "req-2f6c1e9a7b3d4e58",
			EventSource: "idemgate.upstream", EventID: "5d1e9c2a-8f3b-4c7e-9a61-0b2f4e7d9c10",
			EventType: "idemgate:Task:Submitted", Time: "2026-11-30T07:05:12.345Z",
			DataContentType: "application/json; charset=utf-8",
		}
		if task.TenantID != want.TenantID || task.TaskType != want.TaskType || task.Operation != want.Operation ||
			task.RequestID != want.RequestID || task.EventSource != want.EventSource || task.EventID != want.EventID ||
			task.EventType != want.EventType || task.Time != want.Time || task.DataContentType != want.DataContentType ||
			task.InputVersion != "" || task.IdempotencyKey != "" || task.Notify != nil || task.Index != 0 {
			t.Fatalf("task = %+v", task)
		}
		if !strings.HasPrefix(task.Subject, "acs:eventbridge:cn-hangzhou:") {
			t.Errorf("subject = %q", task.Subject)
		}
		for k, v := range map[string]string{
			"aliyunaccountid": "1234567890123456", "aliyuneventbusname": "idemgate-bus",
			"aliyunregionid": "cn-hangzhou", "aliyunpublishtime": "2026-11-30T07:05:12.401Z",
		} {
			if task.Extensions[k] != v {
				t.Errorf("extension %s = %q, want %q", k, task.Extensions[k], v)
			}
		}
		var input map[string]any
		if err := json.Unmarshal(task.Input, &input); err != nil || input["content"] == "" {
			t.Errorf("input = %s (%v)", task.Input, err)
		}
		if !json.Valid(task.Data) || !bytes.Contains(task.Data, []byte(`"request_id"`)) || !json.Valid(task.Raw) {
			t.Errorf("data = %s", task.Data)
		}
	})

	t.Run("eventbridge-batch", func(t *testing.T) {
		inv, err := Parse(readEvent(t, "eventbridge-batch.json"))
		if err != nil {
			t.Fatal(err)
		}
		if inv.Kind != KindBatch || inv.Size != 3 || len(inv.Tasks) != 3 || inv.BatchErr != nil {
			t.Fatalf("invocation = %+v", inv)
		}
		a, b, c := inv.Tasks[0], inv.Tasks[1], inv.Tasks[2]
		for i, task := range inv.Tasks {
			if task.Index != i {
				t.Errorf("task %d Index = %d", i, task.Index)
			}
		}
		// The double submit: another delivery (id), the same business action.
		if a.EventID == c.EventID || a.TenantID != c.TenantID || a.TaskType != c.TaskType ||
			a.Operation != c.Operation || !bytes.Equal(compact(t, a.Input), compact(t, c.Input)) {
			t.Errorf("events 0 and 2 should be a double submit: %+v / %+v", a, c)
		}
		// No notify: the sample must succeed offline, with nothing to post to.
		if b.TenantID != "globex" || b.Notify != nil {
			t.Errorf("event 1 = %+v", b)
		}
	})

	t.Run("eventbridge-batch-notify", func(t *testing.T) {
		inv, err := Parse(readEvent(t, "eventbridge-batch-notify.json"))
		if err != nil {
			t.Fatal(err)
		}
		if inv.Kind != KindBatch || len(inv.Tasks) != 3 || inv.BatchErr != nil {
			t.Fatalf("invocation = %+v", inv)
		}
		// The receiver is on loopback: a local run posts nowhere else.
		for i, task := range inv.Tasks {
			if want := i == 1; (task.Notify != nil) != want {
				t.Errorf("task %d notify = %+v", i, task.Notify)
			}
		}
		if n := inv.Tasks[1].Notify; n == nil || n.URL != "http://127.0.0.1:8787/idemgate" {
			t.Errorf("event 1 notify = %+v", n)
		}
		// Its own keys: running it after eventbridge-batch.json is not a duplicate.
		plain, err := Parse(readEvent(t, "eventbridge-batch.json"))
		if err != nil {
			t.Fatal(err)
		}
		for i := range plain.Tasks {
			if bytes.Equal(compact(t, plain.Tasks[i].Input), compact(t, inv.Tasks[i].Input)) {
				t.Errorf("task %d has the same input in both samples", i)
			}
		}
	})

	for _, c := range []struct {
		file string
		want Timer
	}{
		{"timer-sweep.json", Timer{TriggerTime: time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC), TriggerName: "sweep", Payload: TimerPayloadSweep}},
		{"timer-purge.json", Timer{TriggerTime: time.Date(2026, 11, 30, 19, 0, 0, 0, time.UTC), TriggerName: "purge", Payload: TimerPayloadPurge}},
	} {
		t.Run(strings.TrimSuffix(c.file, ".json"), func(t *testing.T) {
			inv, err := Parse(readEvent(t, c.file))
			if err != nil {
				t.Fatal(err)
			}
			if inv.Kind != KindTimer || inv.Timer == nil || !inv.Timer.TriggerTime.Equal(c.want.TriggerTime) ||
				inv.Timer.TriggerName != c.want.TriggerName || inv.Timer.Payload != c.want.Payload || len(inv.Tasks) != 0 {
				t.Fatalf("invocation = %+v timer = %+v", inv, inv.Timer)
			}
		})
	}

	t.Run("fc-failure-destination", func(t *testing.T) {
		inv, err := Parse(readEvent(t, "fc-failure-destination.json"))
		if err != nil {
			t.Fatal(err)
		}
		f := inv.Failure
		if inv.Kind != KindFailureDestination || f == nil || len(inv.Tasks) != 0 {
			t.Fatalf("invocation = %+v", inv)
		}
		if f.RequestID == "" || !strings.HasPrefix(f.FunctionARN, "acs:fc:") || f.ApproximateInvokeCount != 3 ||
			f.StatusCode != 200 || f.FunctionError == "" || f.Timestamp.IsZero() || len(f.ResponsePayload) == 0 {
			t.Errorf("failure = %+v", f)
		}
		orig, err := inv.OriginalEvent()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(compact(t, orig), compact(t, readEvent(t, "eventbridge-single.json"))) {
			t.Errorf("original event differs from eventbridge-single.json:\n%s", orig)
		}
		re, err := inv.Original()
		if err != nil || re.Kind != KindSingle || re.Tasks[0].EventID != "5d1e9c2a-8f3b-4c7e-9a61-0b2f4e7d9c10" {
			t.Fatalf("Original() = %+v, %v", re, err)
		}
	})

	t.Run("eventbridge-dead-letter", func(t *testing.T) {
		// EventBridge dead-letters the event itself: it parses like a delivery.
		inv, err := Parse(readEvent(t, "eventbridge-dead-letter.json"))
		if err != nil || inv.Kind != KindSingle || inv.Tasks[0].EventID != "9b7c3e21-4d5f-4a6b-8c9d-0e1f2a3b4c5d" {
			t.Fatalf("Parse = %+v, %v", inv, err)
		}
	})

	t.Run("malformed", func(t *testing.T) {
		inv, err := Parse(readEvent(t, "malformed.json"))
		if inv != nil || !errors.Is(err, ErrMalformedEvent) || !IsFinal(err) {
			t.Fatalf("Parse = %+v, %v", inv, err)
		}
	})

	t.Run("invalid-missing-tenant", func(t *testing.T) {
		inv, err := Parse(readEvent(t, "invalid-missing-tenant.json"))
		e := asError(err)
		if e == nil || e.Type != TypeInvalidRequest || e.Field != "tenant_id" || e.Index != -1 {
			t.Fatalf("error = %#v", e)
		}
		if inv == nil || inv.Kind != KindSingle || len(inv.Tasks) != 0 || len(inv.Rejected) != 1 || inv.Rejected[0] != e {
			t.Fatalf("invocation = %+v", inv)
		}
		if e.EventID != "c4a2e8f1-6b3d-4e9a-8f7c-1d2e3f4a5b6c" || e.EventSource != "idemgate.upstream" {
			t.Errorf("rejected event not named: %+v", e)
		}
	})
}

func compact(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name      string
		body      []byte
		wantType  string
		wantField string
		wantKind  Kind // "" = nil Invocation
	}{
		// Not JSON, or JSON this function cannot take.
		{"empty body", []byte(""), TypeMalformedEvent, "", ""},
		{"white space only", []byte(" \n\t"), TypeMalformedEvent, "", ""},
		{"truncated", []byte(`{"specversion":"1.0"`), TypeMalformedEvent, "", ""},
		{"trailing value", append(mkEvent(goodData, ""), []byte(` {}`)...), TypeMalformedEvent, "", ""},
		{"two arrays", []byte(`[] []`), TypeMalformedEvent, "", ""},
		{"invalid utf-8", []byte("{\"specversion\":\"1.0\",\"id\":\"\xff\"}"), TypeMalformedEvent, "", ""},
		{"byte order mark", append([]byte("\xef\xbb\xbf"), mkEvent(goodData, "")...), TypeMalformedEvent, "", ""},
		{"duplicate attribute", mkEvent(goodData, `"id":"e-2"`), TypeMalformedEvent, "id", ""},
		{"duplicate data field", mkEvent(`{"tenant_id":"a","tenant_id":"b","task_type":"t","operation":"o","input":{}}`, ""), TypeMalformedEvent, "tenant_id", ""},
		{"duplicate deep inside input", mkEvent(`{"tenant_id":"a","task_type":"t","operation":"o","input":{"x":[{"k":1,"k":2}]}}`, ""), TypeMalformedEvent, "k", ""},
		{"nested too deep", []byte(strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)), TypeMalformedEvent, "", ""},
		{"nested deeper than jsontext allows", []byte(strings.Repeat("[", 10001) + strings.Repeat("]", 10001)), TypeMalformedEvent, "", ""},
		// A lone surrogate escape is refused by the strict pass (see
		// checkStrictJSON), wherever it is: one FINAL malformed_event for the
		// body, not a later per-task invalid_request.
		{"lone surrogate escape in task input", mkEvent(`{"tenant_id":"a","task_type":"t","operation":"o","input":{"x":"\ud800"}}`, ""), TypeMalformedEvent, "", ""},
		{"lone surrogate escape in subject", mkEvent(goodData, `"subject":"a\udc00b"`), TypeMalformedEvent, "", ""},
		{"lone surrogate escape in a batch member", []byte(`[` + string(mkEvent(goodData, "")) + `,` + string(mkEvent(goodData, `"subject":"\ud83d"`)) + `]`), TypeMalformedEvent, "", ""},
		{"lone surrogate escape in a key", mkEvent(goodData, `"\ud800":1`), TypeMalformedEvent, "", ""},
		{"number body", []byte(`42`), TypeMalformedEvent, "", ""},
		{"string body", []byte(`"sweep"`), TypeMalformedEvent, "", ""},
		{"null body", []byte(`null`), TypeMalformedEvent, "", ""},
		{"empty object", []byte(`{}`), TypeUnsupportedEvent, "", ""},
		{"foreign object", []byte(`{"events":[{"eventName":"ObjectCreated:PutObject"}]}`), TypeUnsupportedEvent, "", ""},
		{"timer and destination markers", []byte(`{"triggerTime":"2026-11-30T07:00:00Z","triggerName":"x","requestContext":{}}`), TypeUnsupportedEvent, "", ""},
		{"batch over the limit", []byte(batchOf(MaxBatch+1, string(mkEvent(goodData, "")))), TypeBatchTooLarge, "", ""},
		{"batch over the limit, broken past it", []byte("[" + strings.Repeat("{},", MaxBatch+1) + "nonsense"), TypeBatchTooLarge, "", ""},
		{"batch at the limit, broken at its end", []byte("[" + strings.Repeat("{},", MaxBatch-1) + "{},]"), TypeMalformedEvent, "", ""},

		// Envelope.
		{"no specversion", []byte(`{"id":"e-1","source":"s","type":"t","data":` + goodData + `}`), TypeInvalidEnvelope, "specversion", KindSingle},
		{"specversion 0.3", bytes.Replace(mkEvent(goodData, ""), []byte(`"1.0"`), []byte(`"0.3"`), 1), TypeInvalidEnvelope, "specversion", KindSingle},
		{"specversion number", bytes.Replace(mkEvent(goodData, ""), []byte(`"1.0"`), []byte(`1.0`), 1), TypeInvalidEnvelope, "specversion", KindSingle},
		{"null id", bytes.Replace(mkEvent(goodData, ""), []byte(`"e-1"`), []byte(`null`), 1), TypeInvalidEnvelope, "id", KindSingle},
		{"subject number", mkEvent(goodData, `"subject":7`), TypeInvalidEnvelope, "subject", KindSingle},
		{"dataschema relative", mkEvent(goodData, `"dataschema":"/schemas/task"`), TypeInvalidEnvelope, "dataschema", KindSingle},
		{"datacontenttype without subtype", mkEvent(goodData, `"datacontenttype":"application"`), TypeInvalidEnvelope, "datacontenttype", KindSingle},
		{"time without zone", mkEvent(goodData, `"time":"2026-11-30T07:00:00"`), TypeInvalidEnvelope, "time", KindSingle},
		{"extension float", mkEvent(goodData, `"aliyunretry":1.5`), TypeInvalidEnvelope, "aliyunretry", KindSingle},
		{"extension exponent beyond int32", mkEvent(goodData, `"aliyunretry":3e9`), TypeInvalidEnvelope, "aliyunretry", KindSingle},
		{"extension beyond int32", mkEvent(goodData, `"aliyunretry":2147483648`), TypeInvalidEnvelope, "aliyunretry", KindSingle},
		{"extension object", mkEvent(goodData, `"aliyunmeta":{"a":1}`), TypeInvalidEnvelope, "aliyunmeta", KindSingle},
		{"extension array", mkEvent(goodData, `"aliyunmeta":[1]`), TypeInvalidEnvelope, "aliyunmeta", KindSingle},
		{"extension with underscore", mkEvent(goodData, `"tenant_id":"acme"`), TypeInvalidEnvelope, "tenant_id", KindSingle},
		{"data_base64 not base64", mkEvent("", `"data_base64":"***"`), TypeInvalidEnvelope, "data_base64", KindSingle},
		{"object data declared text/plain", mkEvent(goodData, `"datacontenttype":"text/plain"`), TypeInvalidRequest, "data", KindSingle},

		// Task data.
		{"no data", mkEvent("", ""), TypeInvalidRequest, "data", KindSingle},
		{"null data", mkEvent("null", ""), TypeInvalidRequest, "data", KindSingle},
		{"array data", mkEvent(`[`+goodData+`]`, ""), TypeInvalidRequest, "data", KindSingle},
		{"number data", mkEvent(`12`, ""), TypeInvalidRequest, "data", KindSingle},
		{"string data not JSON", mkEvent(`"summarize this"`, ""), TypeInvalidRequest, "data", KindSingle},
		{"string data holding an array", mkEvent(`"[1,2]"`, ""), TypeInvalidRequest, "data", KindSingle},
		{"text data", mkEvent(`"hello"`, `"datacontenttype":"text/plain"`), TypeInvalidRequest, "data", KindSingle},
		{"base64 data declared octet-stream", mkEvent("", `"datacontenttype":"application/octet-stream","data_base64":"`+base64.StdEncoding.EncodeToString([]byte(goodData))+`"`), TypeInvalidRequest, "data", KindSingle},
		{"base64 data not JSON", mkEvent("", `"data_base64":"`+base64.StdEncoding.EncodeToString([]byte("plain words"))+`"`), TypeInvalidRequest, "data_base64", KindSingle},
		{"missing tenant_id", mkEvent(`{"task_type":"summarize","operation":"summarize","input":{}}`, ""), TypeInvalidRequest, "tenant_id", KindSingle},
		{"null tenant_id", mkEvent(`{"tenant_id":null,"task_type":"summarize","operation":"summarize","input":{}}`, ""), TypeInvalidRequest, "tenant_id", KindSingle},
		{"numeric tenant_id", mkEvent(`{"tenant_id":42,"task_type":"summarize","operation":"summarize","input":{}}`, ""), TypeInvalidRequest, "tenant_id", KindSingle},
		{"empty tenant_id", mkEvent(`{"tenant_id":"","task_type":"summarize","operation":"summarize","input":{}}`, ""), TypeInvalidRequest, "tenant_id", KindSingle},
		{"padded tenant_id", mkEvent(`{"tenant_id":" acme","task_type":"summarize","operation":"summarize","input":{}}`, ""), TypeInvalidRequest, "tenant_id", KindSingle},
		{"tenant_id padded with a Unicode space", mkEvent(`{"tenant_id":"acme\u3000","task_type":"summarize","operation":"summarize","input":{}}`, ""), TypeInvalidRequest, "tenant_id", KindSingle},
		{"tenant_id padded with a no-break space", mkEvent("{\"tenant_id\":\"acme\u00a0\",\"task_type\":\"summarize\",\"operation\":\"summarize\",\"input\":{}}", ""), TypeInvalidRequest, "tenant_id", KindSingle},
		{"missing task_type", mkEvent(`{"tenant_id":"acme","operation":"summarize","input":{}}`, ""), TypeInvalidRequest, "task_type", KindSingle},
		{"missing operation", mkEvent(`{"tenant_id":"acme","task_type":"summarize","input":{}}`, ""), TypeInvalidRequest, "operation", KindSingle},
		{"missing input", mkEvent(`{"tenant_id":"acme","task_type":"summarize","operation":"summarize"}`, ""), TypeInvalidRequest, "input", KindSingle},
		{"string input", mkEvent(`{"tenant_id":"acme","task_type":"summarize","operation":"summarize","input":"hello"}`, ""), TypeInvalidRequest, "input", KindSingle},
		{"array input", mkEvent(`{"tenant_id":"acme","task_type":"summarize","operation":"summarize","input":[]}`, ""), TypeInvalidRequest, "input", KindSingle},
		{"empty idempotency_key", mkEvent(`{"tenant_id":"acme","task_type":"summarize","operation":"summarize","input":{},"idempotency_key":""}`, ""), TypeInvalidRequest, "idempotency_key", KindSingle},
		{"numeric request_id", mkEvent(`{"tenant_id":"acme","task_type":"summarize","operation":"summarize","input":{},"request_id":7}`, ""), TypeInvalidRequest, "request_id", KindSingle},
		{"notify not an object", mkEvent(`{"tenant_id":"acme","task_type":"summarize","operation":"summarize","input":{},"notify":"https://x.example"}`, ""), TypeInvalidRequest, "notify", KindSingle},
		{"notify without url", mkEvent(`{"tenant_id":"acme","task_type":"summarize","operation":"summarize","input":{},"notify":{}}`, ""), TypeInvalidRequest, "notify.url", KindSingle},
		{"notify url not http", mkEvent(`{"tenant_id":"acme","task_type":"summarize","operation":"summarize","input":{},"notify":{"url":"ftp://x.example/a"}}`, ""), TypeInvalidRequest, "notify.url", KindSingle},
		{"notify url member in upper case", mkEvent(`{"tenant_id":"acme","task_type":"summarize","operation":"summarize","input":{},"notify":{"URL":"https://x.example/a"}}`, ""), TypeInvalidRequest, "notify.url", KindSingle},
		{"notify url relative", mkEvent(`{"tenant_id":"acme","task_type":"summarize","operation":"summarize","input":{},"notify":{"url":"/hook"}}`, ""), TypeInvalidRequest, "notify.url", KindSingle},

		// Timer.
		{"timer other payload", []byte(`{"triggerTime":"2026-11-30T07:00:00Z","triggerName":"hourly","payload":"report"}`), TypeUnsupportedEvent, "payload", KindTimer},
		{"timer without payload", []byte(`{"triggerTime":"2026-11-30T07:00:00Z","triggerName":"hourly"}`), TypeUnsupportedEvent, "payload", KindTimer},
		{"timer bad time", []byte(`{"triggerTime":"yesterday","triggerName":"sweep","payload":"sweep"}`), TypeInvalidRequest, "triggerTime", KindTimer},
		{"timer without name", []byte(`{"triggerTime":"2026-11-30T07:00:00Z","payload":"sweep"}`), TypeInvalidRequest, "triggerName", KindTimer},
		{"timer without time", []byte(`{"triggerName":"sweep","payload":"sweep"}`), TypeInvalidRequest, "triggerTime", KindTimer},
		{"timer numeric payload", []byte(`{"triggerTime":"2026-11-30T07:00:00Z","triggerName":"sweep","payload":1}`), TypeInvalidRequest, "payload", KindTimer},

		// Failure destination.
		{"destination context not object", []byte(`{"requestContext":"x","requestPayload":"{}"}`), TypeInvalidRequest, "requestContext", KindFailureDestination},
		{"destination null context", []byte(`{"requestContext":null,"requestPayload":"{}"}`), TypeInvalidRequest, "requestContext", KindFailureDestination},
		{"destination payload member in upper case", []byte(`{"requestContext":{"requestId":"r"},"requestPayload":"{\"a\":1}","REQUESTPAYLOAD":"{\"b\":2}"}`), TypeInvalidRequest, "REQUESTPAYLOAD", KindFailureDestination},
		{"destination context member in mixed case", []byte(`{"requestContext":{"requestId":"r","RequestId":"q"},"requestPayload":"{}"}`), TypeInvalidRequest, "requestContext.RequestId", KindFailureDestination},
		{"destination payload not string", []byte(`{"requestContext":{},"requestPayload":{"id":"x"}}`), TypeInvalidRequest, "requestPayload", KindFailureDestination},
		{"destination bad count", []byte(`{"requestContext":{"approximateInvokeCount":"3"},"requestPayload":""}`), TypeInvalidRequest, "requestContext.approximateInvokeCount", KindFailureDestination},
		{"destination bad timestamp", []byte(`{"timestamp":"last tuesday","requestContext":{},"requestPayload":""}`), TypeInvalidRequest, "timestamp", KindFailureDestination},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv, err := Parse(tc.body)
			e, ok := err.(*Error)
			if !ok {
				t.Fatalf("error %v (%T) is not an *Error", err, err)
			}
			if e.Type != tc.wantType || e.Field != tc.wantField || e.Msg == "" || !IsFinal(err) {
				t.Fatalf("error = %#v; want type %q field %q", e, tc.wantType, tc.wantField)
			}
			if tc.wantKind == "" {
				if inv != nil {
					t.Fatalf("invocation = %+v; want nil", inv)
				}
				return
			}
			if inv == nil || inv.Kind != tc.wantKind || len(inv.Tasks) != 0 {
				t.Fatalf("invocation = %+v; want kind %q without tasks", inv, tc.wantKind)
			}
			if inv.Kind == KindSingle && (len(inv.Rejected) != 1 || inv.Rejected[0] != e || e.Index != -1) {
				t.Fatalf("single rejection not recorded: %+v", inv)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	stringified, _ := json.Marshal(goodData)
	tests := []struct {
		name  string
		body  []byte
		check func(t *testing.T, task *Task)
	}{
		{"data object", mkEvent(goodData, ""), nil},
		{"null optional attributes", mkEvent(goodData, `"subject":null,"time":null,"dataschema":null,"datacontenttype":null,"aliyunregionid":null`), func(t *testing.T, task *Task) {
			if task.Subject != "" || task.Time != "" || task.Extensions != nil {
				t.Errorf("nulls should read as absent: %+v", task)
			}
		}},
		{"json with charset", mkEvent(goodData, `"datacontenttype":"application/json; charset=utf-8"`), nil},
		{"data stringified by EventBridge", mkEvent(string(stringified), `"datacontenttype":"application/json"`), func(t *testing.T, task *Task) {
			if string(task.Data) != goodData {
				t.Errorf("Data = %s; want the decoded object", task.Data)
			}
		}},
		{"data_base64", mkEvent("", `"data_base64":"`+base64.StdEncoding.EncodeToString([]byte(goodData))+`"`), func(t *testing.T, task *Task) {
			if string(task.Data) != goodData {
				t.Errorf("Data = %s; want the decoded object", task.Data)
			}
		}},
		{"all optional task fields", mkEvent(`{"tenant_id":"acme","task_type":"summarize","operation":"summarize","input":{"content":"x"},"input_version":"v7","request_id":"req-1","idempotency_key":"order-42","notify":{"url":"https://hooks.acme.example/done"}}`, ""), func(t *testing.T, task *Task) {
			if task.InputVersion != "v7" || task.RequestID != "req-1" || task.IdempotencyKey != "order-42" || task.Notify == nil || task.Notify.URL != "https://hooks.acme.example/done" {
				t.Errorf("task = %+v", task)
			}
		}},
		{"notify url matched exactly", mkEvent(`{"tenant_id":"acme","task_type":"summarize","operation":"summarize","input":{},"notify":{"url":"https://a.example/hook","URL":"https://b.example/hook"}}`, ""), func(t *testing.T, task *Task) {
			if task.Notify == nil || task.Notify.URL != "https://a.example/hook" {
				t.Errorf("notify = %+v; want the member named url, not URL", task.Notify)
			}
		}},
		{"null optional task fields", mkEvent(`{"tenant_id":"acme","task_type":"summarize","operation":"summarize","input":{},"input_version":null,"request_id":null,"idempotency_key":null,"notify":null}`, ""), func(t *testing.T, task *Task) {
			if task.InputVersion != "" || task.RequestID != "" || task.IdempotencyKey != "" || task.Notify != nil {
				t.Errorf("task = %+v", task)
			}
		}},
		{"unknown data fields kept", mkEvent(`{"tenant_id":"acme","task_type":"summarize","operation":"summarize","input":{},"priority":"high"}`, ""), func(t *testing.T, task *Task) {
			if !bytes.Contains(task.Data, []byte(`"priority":"high"`)) {
				t.Errorf("Data = %s", task.Data)
			}
		}},
		{"extension types", mkEvent(goodData, `"aliyunretry":3,"aliyunsampled":true,"aliyunnote":""`), func(t *testing.T, task *Task) {
			if task.Extensions["aliyunretry"] != "3" || task.Extensions["aliyunsampled"] != "true" {
				t.Errorf("extensions = %v", task.Extensions)
			}
			if v, ok := task.Extensions["aliyunnote"]; !ok || v != "" {
				t.Errorf("empty string extension lost: %v", task.Extensions)
			}
		}},
		{"relative source", bytes.Replace(mkEvent(goodData, ""), []byte(`"idemgate.test"`), []byte(`"#fragment"`), 1), nil},
		{"unicode content", mkEvent(`{"tenant_id":"租户甲","task_type":"summarize","operation":"summarize","input":{"content":"请总结这段文字 \u2603"}}`, ""), func(t *testing.T, task *Task) {
			if task.TenantID != "租户甲" {
				t.Errorf("tenant = %q", task.TenantID)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv, err := Parse(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if inv.Kind != KindSingle || len(inv.Tasks) != 1 {
				t.Fatalf("invocation = %+v", inv)
			}
			task := inv.Tasks[0]
			if task.EventID != "e-1" || task.TenantID == "" || task.TaskType == "" || task.Operation == "" || jsonKind(task.Input) != '{' || jsonKind(task.Data) != '{' {
				t.Fatalf("task = %+v", task)
			}
			if tc.check != nil {
				tc.check(t, task)
			}
		})
	}
}

func TestParseBatch(t *testing.T) {
	good := func(id string) string { return strings.Replace(string(mkEvent(goodData, "")), `"e-1"`, `"`+id+`"`, 1) }
	tests := []struct {
		name         string
		body         string
		wantTasks    []int // indexes of accepted members
		wantRejected map[int]string
	}{
		{"empty", `[]`, nil, nil},
		{"empty with white space", " [ ] \n", nil, nil},
		{"all good", "[" + good("a") + "," + good("b") + "]", []int{0, 1}, nil},
		{"same delivery twice", "[" + good("a") + "," + good("a") + "]", []int{0, 1}, nil},
		{"bad envelope in the middle", "[" + good("a") + `,{"specversion":"1.0","id":"b","source":"s"},` + good("c") + "]", []int{0, 2}, map[int]string{1: TypeInvalidEnvelope}},
		{"bad task data", "[" + good("a") + "," + string(mkEvent(`{"tenant_id":"acme"}`, "")) + "]", []int{0}, map[int]string{1: TypeInvalidRequest}},
		{"scalar members", `[1,"x",null,true]`, nil, map[int]string{0: TypeInvalidEnvelope, 1: TypeInvalidEnvelope, 2: TypeInvalidEnvelope, 3: TypeInvalidEnvelope}},
		{"nested batch", "[[" + good("a") + "]]", nil, map[int]string{0: TypeInvalidEnvelope}},
		{"timer inside a batch", `[{"triggerTime":"2026-11-30T07:00:00Z","triggerName":"sweep","payload":"sweep"}]`, nil, map[int]string{0: TypeInvalidEnvelope}},
		{"at the limit", batchOf(MaxBatch, good("a")), upTo(MaxBatch), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv, err := Parse([]byte(tc.body))
			if inv == nil || inv.Kind != KindBatch {
				t.Fatalf("Parse = %+v, %v", inv, err)
			}
			if inv.Size != len(tc.wantTasks)+len(tc.wantRejected) || len(inv.Tasks)+len(inv.Rejected) != inv.Size {
				t.Fatalf("size %d, %d tasks, %d rejected", inv.Size, len(inv.Tasks), len(inv.Rejected))
			}
			var got []int
			for _, task := range inv.Tasks {
				got = append(got, task.Index)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.wantTasks) {
				t.Errorf("accepted members %v, want %v", got, tc.wantTasks)
			}
			for _, r := range inv.Rejected {
				if tc.wantRejected[r.Index] != r.Type {
					t.Errorf("member %d rejected as %s, want %q", r.Index, r.Type, tc.wantRejected[r.Index])
				}
			}
			if len(tc.wantRejected) == 0 {
				if err != nil || inv.BatchErr != nil {
					t.Fatalf("err = %v, BatchErr = %v", err, inv.BatchErr)
				}
				return
			}
			if inv.BatchErr == nil || err != error(inv.BatchErr) || !errors.Is(err, ErrInvalidBatch) || inv.BatchErr.Index != -1 {
				t.Fatalf("err = %v, BatchErr = %+v", err, inv.BatchErr)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("%d of %d", len(tc.wantRejected), inv.Size)) {
				t.Errorf("batch error %q does not count the rejections", err)
			}
		})
	}
}

// batchOf is a batch of n copies of member.
func batchOf(n int, member string) string {
	return "[" + strings.TrimSuffix(strings.Repeat(member+",", n), ",") + "]"
}

func upTo(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// A hostile body costs a parse and nothing else: a batch over the limit is
// refused before its members are split (each cost about 2 KB, so 6 MiB of
// {} took gigabytes), and an array where an object belongs is not split.
func TestOversizedBodyCostsAParse(t *testing.T) {
	empties := batchOf(128<<10/3, "{}") // 128 KiB
	for _, tc := range []struct {
		name, body, wantType string
	}{
		{"batch of {}", empties, TypeBatchTooLarge},
		{"array in data_base64", string(mkEvent("", `"data_base64":"`+base64.StdEncoding.EncodeToString([]byte(empties))+`"`)), TypeInvalidRequest},
		{"array in a data string", string(mkEvent(`"`+empties+`"`, "")), TypeInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Parse([]byte(tc.body))
			runtime.ReadMemStats(&after)
			if !errors.Is(err, &Error{Type: tc.wantType}) {
				t.Fatalf("Parse: %v; want %s", err, tc.wantType)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 8<<20 {
				t.Fatalf("parsing %d bytes allocated %d", len(tc.body), n)
			}
		})
	}
}

// A refused notify.url is named, never quoted: its query or user info may
// hold a token, and the refusal reaches the answer, the log and the dead
// letter (notify.checkURL words its own refusals so too).
func TestNotifyURLRefusalQuotesNoSecret(t *testing.T) {
	const secret = "SECRET-TOKEN-123"
	for _, tc := range []struct{ name, url, says string }{
		{"no host", "https:/hooks.example.com/robot/send?access_token=" + secret, "no host"},
		{"another scheme", "ftp://bot:" + secret + "@hooks.example.com/a", `scheme is "ftp"`},
		{"relative", "/robot/send?access_token=" + secret, `scheme is ""`},
		{"does not parse", "https://hooks.example.com:" + secret + "/", "does not parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(mkEvent(`{"tenant_id":"a","task_type":"t","operation":"o","input":{},"notify":{"url":"`+tc.url+`"}}`, ""))
			e := asError(err)
			if e == nil || e.Type != TypeInvalidRequest || e.Field != "notify.url" || !strings.Contains(e.Msg, tc.says) {
				t.Fatalf("Parse: %v; want invalid_request notify.url saying %q", err, tc.says)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the secret is quoted: %v", err)
			}
		})
	}
}

func TestFailureDestinationOriginal(t *testing.T) {
	payload, _ := json.Marshal(string(mkEvent(goodData, "")))
	tests := []struct {
		name     string
		body     string
		wantType string // "" = Original succeeds
	}{
		{"numeric timestamp", `{"timestamp":1660120276975,"requestContext":{"requestId":"r1"},"requestPayload":` + string(payload) + `}`, ""},
		{"string timestamp (FC 2.0 docs)", `{"timestamp":"2020-08-20T12:00:00.000Z","requestContext":{"requestId":"r1"},"requestPayload":` + string(payload) + `}`, ""},
		{"no payload", `{"requestContext":{"requestId":"r1"}}`, TypeInvalidRequest},
		{"empty payload", `{"requestContext":{"requestId":"r1"},"requestPayload":""}`, TypeInvalidRequest},
		{"payload not JSON", `{"requestContext":{"requestId":"r1"},"requestPayload":"{\"id\":"}`, TypeMalformedEvent},
		{"payload is a destination message", `{"requestContext":{"requestId":"r1"},"requestPayload":"{\"requestContext\":{},\"requestPayload\":\"{}\"}"}`, TypeUnsupportedEvent},
		{"payload is an invalid event", `{"requestContext":{"requestId":"r1"},"requestPayload":"{\"specversion\":\"1.0\"}"}`, TypeInvalidEnvelope},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv, err := Parse([]byte(tc.body))
			if err != nil || inv.Kind != KindFailureDestination {
				t.Fatalf("Parse = %+v, %v", inv, err)
			}
			orig, err := inv.Original()
			if tc.wantType == "" {
				if err != nil || orig.Kind != KindSingle || orig.Tasks[0].TenantID != "acme" {
					t.Fatalf("Original = %+v, %v", orig, err)
				}
				if inv.Failure.Timestamp.IsZero() {
					t.Error("timestamp not read")
				}
				return
			}
			if e := asError(err); e == nil || e.Type != tc.wantType {
				t.Fatalf("Original error = %v; want %s", err, tc.wantType)
			}
		})
	}

	t.Run("not a destination message", func(t *testing.T) {
		inv, err := Parse(mkEvent(goodData, ""))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := inv.OriginalEvent(); !errors.Is(err, ErrUnsupportedEvent) {
			t.Fatalf("OriginalEvent on a single event: %v", err)
		}
		var nilInv *Invocation
		if _, err := nilInv.OriginalEvent(); !errors.Is(err, ErrUnsupportedEvent) {
			t.Fatalf("OriginalEvent on nil: %v", err)
		}
	})
}

func TestError(t *testing.T) {
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"field", &Error{Type: TypeInvalidRequest, Field: "tenant_id", Msg: "required field is missing", Index: -1}, "event: invalid_request: tenant_id: required field is missing"},
		{"batch member", &Error{Type: TypeInvalidEnvelope, Field: "time", Msg: "bad", Index: 2, EventID: "e-9"}, `event: invalid_envelope: member 2 (id "e-9"): time: bad`},
		{"no field", &Error{Type: TypeMalformedEvent, Msg: "empty body", Index: -1}, "event: malformed_event: empty body"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
		})
	}

	t.Run("sentinels and IsFinal", func(t *testing.T) {
		_, err := Parse(mkEvent(`{}`, ""))
		wrapped := fmt.Errorf("handler: parse: %w", err)
		if !errors.Is(wrapped, ErrInvalidRequest) || errors.Is(wrapped, ErrInvalidEnvelope) {
			t.Errorf("errors.Is by type broken for %v", wrapped)
		}
		var e *Error
		if !IsFinal(wrapped) || !errors.As(wrapped, &e) {
			t.Errorf("IsFinal(%v) = false", wrapped)
		}
		if IsFinal(errors.New("redis: connection refused")) || IsFinal(nil) || errors.As(errors.New("x"), &e) {
			t.Error("foreign errors must not be FINAL event errors")
		}
		same := *asError(err)
		if !errors.Is(err, &same) {
			t.Error("an identical *Error should match")
		}
	})
}

// An integer extension is a JSON number with an integral value, in any
// spelling: 1000, 1000.0 and 1e3 are one value (and one canonical form).
func TestExtensionIntegerSpellings(t *testing.T) {
	for _, lit := range []string{"1000", "1000.0", "1e3", "10000e-1", "1.000E+3", "1000." + strings.Repeat("0", 70)} {
		inv, err := Parse(mkEvent(goodData, `"aliyunretry":`+lit))
		if err != nil || inv.Tasks[0].Extensions["aliyunretry"] != "1000" {
			t.Errorf("%s: %v %v", lit, err, inv)
		}
	}
}

// WholeNumber reads every spelling of a whole number within int64, and a
// power no int64 can be (0e999999999 is 0; 1e999999999 is none).
func TestWholeNumber(t *testing.T) {
	for _, tc := range []struct {
		lit  string
		want int64
		ok   bool
	}{
		{"60", 60, true}, {"60.0", 60, true}, {"6e1", 60, true}, {"600E-1", 60, true}, {"-0", 0, true},
		{"9223372036854775807", math.MaxInt64, true}, {"-9223372036854775808", math.MinInt64, true},
		{"9223372036854775808", 0, false}, {"1.5", 0, false}, {"1e19", 0, false}, {"0e999999999", 0, true},
		{"1e999999999", 0, false}, {"1e-999999999", 0, false}, {"\"6\"", 0, false}, {"", 0, false},
		// Longer than 64 characters, and still whole numbers (RFC 8785 writes 60).
		{"60." + strings.Repeat("0", 62), 60, true}, {"6" + strings.Repeat("0", 70) + "e-69", 60, true},
		{"0." + strings.Repeat("0", 100), 0, true}, {"-9223372036854775808." + strings.Repeat("0", 50), math.MinInt64, true},
		{"0.0e99999999999999999999999", 0, true}, {"-" + strings.Repeat("0", 80) + "7", -7, true},
		{"60." + strings.Repeat("0", 62) + "1", 0, false}, {"1" + strings.Repeat("0", 19) + ".0", 0, false},
		{"1e-99999999999999999999999", 0, false}, {"1e99999999999999999999999", 0, false},
		{"1.", 0, false}, {".5", 0, false}, {"1e", 0, false}, {"1e+", 0, false}, {"--1", 0, false}, {"1.2.3", 0, false}, {"0x10", 0, false},
	} {
		if n, ok := WholeNumber(tc.lit); n != tc.want || ok != tc.ok {
			t.Errorf("WholeNumber(%s) = %d, %v; want %d, %v", tc.lit, n, ok, tc.want, tc.ok)
		}
	}
}

// TaskFromData reads a data object as Parse reads an event's data: the
// same fields, and the same refusals, named alike.
func TestTaskFromData(t *testing.T) {
	inv, err := Parse(mkEvent(goodData, ""))
	if err != nil {
		t.Fatal(err)
	}
	got, err := TaskFromData([]byte(" "+goodData+"\n"), Options{})
	want := inv.Tasks[0]
	if err != nil || got.TenantID != want.TenantID || got.TaskType != want.TaskType || got.Operation != want.Operation ||
		string(got.Input) != string(want.Input) || string(got.Data) != string(want.Data) || got.EventID != "" {
		t.Fatalf("TaskFromData = %+v, %v; Parse's task %+v", got, err, want)
	}
	for _, tc := range []struct{ data, typ, field string }{
		{`[]`, TypeInvalidRequest, "data"},
		{`{"tenant_id":"a","tenant_id":"b"}`, TypeMalformedEvent, "tenant_id"},
		{`{"task_type":"summarize","operation":"o","input":{}}`, TypeInvalidRequest, "tenant_id"},
		{`{"tenant_id":"t","task_type":"summarize","operation":"o","input":{"n":12345678901234567890}}`, TypeInvalidRequest, "data.input.n"},
		{`{"tenant_id":"t","task_type":"summarize","operation":"o","input":{},"notify":{}}`, TypeInvalidRequest, "notify.url"},
	} {
		_, err := TaskFromData([]byte(tc.data), Options{})
		var e *Error
		if !errors.As(err, &e) || e.Type != tc.typ || e.Field != tc.field {
			t.Errorf("%s: %v; want %s on %s", tc.data, err, tc.typ, tc.field)
		}
	}
}

// A number a double cannot hold is refused in the task data, by its path
// from data, the same whether data is an object or a string holding one,
// and before the SDK (whose reader answered 1e400 with a dump of its own).
func TestDataNumbersRefusedAlike(t *testing.T) {
	for _, n := range []string{"1e400", "12345678901234567890", "1e-400"} {
		data := `{"tenant_id":"acme","task_type":"summarize","operation":"summarize","input":{"content":"x","n":` + n + `}}`
		quoted, _ := json.Marshal(data)
		for _, body := range [][]byte{mkEvent(data, ""), mkEvent(string(quoted), "")} {
			_, err := Parse(body)
			var e *Error
			if !errors.As(err, &e) || e.Type != TypeInvalidRequest || e.Field != "data.input.n" ||
				!strings.Contains(e.Msg, "send it as a string") || strings.Contains(e.Msg, "SDK") {
				t.Errorf("%s: %v", body, err)
			}
		}
	}
}

// The failure-destination message's integers are JSON numbers: any
// spelling of the value reads as it (200, 200.0, 2e2).
func TestDestinationIntegerSpellings(t *testing.T) {
	for _, n := range []string{"3", "3.0", "3e0", "30e-1", "3." + strings.Repeat("0", 70)} {
		body := `{"timestamp":1660120276975` + strings.TrimPrefix(n, "3") + `,"requestContext":{"requestId":"r","approximateInvokeCount":` + n +
			`},"responseContext":{"statusCode":` + n + `},"requestPayload":"{}"}`
		inv, err := Parse([]byte(body))
		if err != nil || inv.Failure.ApproximateInvokeCount != 3 || inv.Failure.StatusCode != 3 {
			t.Errorf("%s: %v %+v", n, err, inv)
		}
	}
}

// An event as an editor or a heredoc writes it — indented with tabs, a
// newline before the body and inside the data — is the same event.
func TestIndentedEventIsTheSameEvent(t *testing.T) {
	compact := mkEvent(goodData, "")
	want, err := Parse(compact)
	if err != nil {
		t.Fatal(err)
	}
	for _, lead := range []string{"\n", "\t", "\r\n\t "} {
		var b bytes.Buffer
		if err := json.Indent(&b, compact, "", "\t"); err != nil {
			t.Fatal(err)
		}
		body := append([]byte(lead), b.Bytes()...)
		got, err := Parse(append(body, '\n'))
		if err != nil || got.Kind != KindSingle {
			t.Fatalf("indented after %q: %v, %v", lead, got, err)
		}
		g, w := got.Tasks[0], want.Tasks[0]
		if g.TenantID != w.TenantID || g.EventID != w.EventID || g.TaskType != w.TaskType || jsonKind(g.Input) != '{' {
			t.Fatalf("indented after %q: %+v, want %+v", lead, g, w)
		}
	}
}

// A refused extension literal is quoted cut, not whole: a megabyte of
// digits must not become a megabyte of answer and log line.
func TestRefusedLiteralIsQuotedCut(t *testing.T) {
	lit := "1." + strings.Repeat("0", 1<<20) + "1"
	_, err := Parse(mkEvent(goodData, `"aliyunretry":`+lit))
	if err == nil || len(err.Error()) > 512 || !strings.Contains(err.Error(), "aliyunretry") {
		t.Fatalf("%d bytes: %.200v", len(fmt.Sprint(err)), err)
	}
}
