// Package schema_test holds docs/schema to what the function does: every task
// event in testdata/events, and a table of named cases, each run through the
// function (event.Parse, then the pipeline on the embedded store with the
// offline model, so the limits and the task types' input checks answer too)
// and through the schema, must get the same verdict. Where JSON Schema cannot
// say what the function says, the case names the gap and pins both verdicts,
// so a change on either side shows.
package schema_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/idemgate/idemgate/docs/schema"
	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/handler/event"
	"github.com/idemgate/idemgate/idempotency/keys"
	"github.com/idemgate/idemgate/internal/app"
	"github.com/idemgate/idemgate/internal/config"
	"github.com/idemgate/idemgate/internal/logx"
)

const schemaFile = schema.TaskEvent

// compile loads the task-event schema with the others by their $id, as any
// draft 2020-12 validator can (schema.Compile).
func compile(t *testing.T) *jsonschema.Schema {
	t.Helper()
	sch, err := schema.Compile(schemaFile)
	if err != nil {
		t.Fatalf("compile %s: %v", schemaFile, err)
	}
	return sch
}

// validate checks one data object (JSON text) against sch.
func validate(t *testing.T, sch *jsonschema.Schema, data []byte) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the schema side cannot read the data: %v\n%s", err, data)
	}
	return sch.Validate(v)
}

// notifier stands in for handler/notify: whether notify.url is accepted is
// decided by the parser; delivering it is not what these tests are about.
type notifier struct{ urls []string }

func (n *notifier) Post(_ context.Context, url, _, _ string, _ []byte) error {
	n.urls = append(n.urls, url)
	return nil
}

// newPipeline wires the function as main does (internal/app), on a fresh
// embedded store and local results under a temporary directory.
func newPipeline(t *testing.T) *handler.Pipeline {
	t.Helper()
	env := map[string]string{"STATE_DIR": t.TempDir(), "LLM_MODEL": config.OfflineModel}
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	red := &logx.Redactor{}
	a, err := app.Open(cfg, logx.New(io.Discard, slog.LevelInfo, red), red)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	a.Pipeline.Notify = &notifier{}
	return a.Pipeline
}

// outcomes runs body through p and returns one outcome per event in it.
func outcomes(t *testing.T, p *handler.Pipeline, body []byte) []handler.Outcome {
	t.Helper()
	rep := p.Handle(context.Background(), body, handler.Meta{RequestID: "schema-test", RetryCount: -1})
	var batch struct {
		Results []handler.Outcome `json:"results"`
	}
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
		if err := json.Unmarshal(rep.Body, &batch); err != nil {
			t.Fatalf("batch answer: %v\n%s", err, rep.Body)
		}
		return batch.Results
	}
	var o handler.Outcome
	if err := json.Unmarshal(rep.Body, &o); err != nil {
		t.Fatalf("answer: %v\n%s", err, rep.Body)
	}
	return []handler.Outcome{o}
}

// cloudEvent wraps a data object (JSON text, used as is) in the envelope
// EventBridge delivers.
func cloudEvent(data string) []byte {
	return []byte(`{"specversion":"1.0","id":"schema-case","source":"idemgate.upstream","type":"idemgate:Task:Submitted",` +
		`"datacontenttype":"application/json","data":` + data + `}`)
}

// dataOf returns the task data of one CloudEvent as the parser reads it: the
// data object, or the object inside a data string or data_base64.
func dataOf(t *testing.T, member []byte) []byte {
	t.Helper()
	inv, err := event.Parse(member)
	if err == nil && len(inv.Tasks) == 1 {
		return inv.Tasks[0].Data
	}
	// Rejected: the raw data member is what the producer sent.
	var ev struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(member, &ev); err != nil || len(ev.Data) == 0 {
		t.Fatalf("no data member in %s", member)
	}
	return ev.Data
}

// members splits a body into its events: an array's elements, or the body.
func members(t *testing.T, body []byte) [][]byte {
	t.Helper()
	if !bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
		return [][]byte{body}
	}
	var els []json.RawMessage
	if err := json.Unmarshal(body, &els); err != nil {
		t.Fatal(err)
	}
	out := make([][]byte, len(els))
	for i, e := range els {
		out[i] = e
	}
	return out
}

// TestSamples: the data of every task event in testdata/events gets from the
// schema the verdict the function gives the event. A failure-destination
// message is judged by the original event it carries (what replay runs).
func TestSamples(t *testing.T) {
	sch := compile(t)
	files, err := filepath.Glob("../../testdata/events/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples: %v", err)
	}
	// Samples that hold no task event, and what the parser makes of them.
	notTasks := map[string]string{"malformed.json": event.TypeMalformedEvent, "timer-sweep.json": string(event.KindTimer),
		"timer-purge.json": string(event.KindTimer)}
	checked, rejected := 0, 0
	for _, f := range files {
		name := filepath.Base(f)
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inv, perr := event.Parse(body)
		if want, ok := notTasks[name]; ok {
			if got := parseVerdict(inv, perr); got != want {
				t.Errorf("%s: parsed as %q, want %q", name, got, want)
			}
			continue
		}
		if inv != nil && inv.Kind == event.KindFailureDestination {
			if body, err = inv.OriginalEvent(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		evs := members(t, body)
		outs := outcomes(t, newPipeline(t), body)
		if len(outs) != len(evs) {
			t.Fatalf("%s: %d answers for %d events", name, len(outs), len(evs))
		}
		for i, m := range evs {
			serr := validate(t, sch, dataOf(t, m))
			if accepted := outs[i].ErrorType == ""; accepted != (serr == nil) {
				t.Errorf("%s[%d]: function answered %q %s, schema error: %v", name, i, outs[i].ErrorType, outs[i].ErrorMessage, serr)
			}
			checked++
			if serr != nil {
				rejected++
			}
		}
	}
	// The samples must exercise both verdicts, or this test could not fail.
	if checked < 8 || rejected == 0 || rejected == checked {
		t.Fatalf("checked %d task events, %d rejected: the samples no longer cover both verdicts", checked, rejected)
	}
}

func parseVerdict(inv *event.Invocation, err error) string {
	var e *event.Error
	switch {
	case inv == nil && err != nil && errors.As(err, &e):
		return e.Type
	case inv != nil && err == nil:
		return string(inv.Kind)
	}
	return fmt.Sprintf("kind %v, error %v", inv, err)
}

// TestTaskTypesMatchRegistry: the schema's task_type enum and if/then
// branches name exactly the built-in task types.
func TestTaskTypesMatchRegistry(t *testing.T) {
	raw, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties struct {
			TaskType struct {
				Enum []string `json:"enum"`
			} `json:"task_type"`
		} `json:"properties"`
		AllOf []struct {
			If struct {
				Properties struct {
					TaskType struct {
						Const string `json:"const"`
					} `json:"task_type"`
				} `json:"properties"`
			} `json:"if"`
		} `json:"allOf"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	want := handler.Builtin().Names()
	enum := slices.Sorted(slices.Values(doc.Properties.TaskType.Enum))
	var branches []string
	for _, b := range doc.AllOf {
		branches = append(branches, b.If.Properties.TaskType.Const)
	}
	slices.Sort(branches)
	if !slices.Equal(enum, want) || !slices.Equal(branches, want) {
		t.Errorf("schema task types: enum %v, input branches %v; handler.Builtin() has %v", enum, branches, want)
	}
	for _, name := range want {
		if _, err := os.Stat(name + "-input.schema.json"); err != nil {
			t.Errorf("task type %s has no input schema: %v", name, err)
		}
	}
}

// dataCase is one task data object and the verdict the function gives it.
type dataCase struct {
	name string
	data string // the data object, JSON text, as the producer sends it
	// want is the errorType the function answers; "" means it runs the task.
	want string
	// field is what both the function's message and the schema's error name.
	field string
	// says, when set, is what the function's message names instead of field.
	says string
	// gap, when set, says why the schema cannot give the function's verdict;
	// the case then pins the schema to the opposite one.
	gap string
}

// data builds a data object: a summarize task for tenant t1, with the
// members of extra replacing or adding to those (JSON text for each value;
// "" removes the member).
func data(extra map[string]string) string {
	m := map[string]string{"tenant_id": `"t1"`, "task_type": `"summarize"`, "operation": `"summarize"`,
		"input": `{"content":"Q3 revenue grew 12%."}`}
	for k, v := range extra {
		m[k] = v
	}
	var b strings.Builder
	b.WriteByte('{')
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] == "" {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%s", k, m[k])
	}
	b.WriteByte('}')
	return b.String()
}

func kw(input string) map[string]string {
	return map[string]string{"task_type": `"keywords"`, "operation": `"keywords"`, "input": input}
}

func str(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// nested returns an input object nested depth levels deep (the input
// itself is level 1) that summarize accepts.
func nested(depth int) string {
	return `{"content":"deep","x":` + strings.Repeat(`{"x":`, depth-2) + `{}` + strings.Repeat(`}`, depth-2) + `}`
}

var dataCases = []dataCase{
	// Accepted.
	{name: "minimal summarize", data: data(nil)},
	{name: "minimal keywords", data: data(kw(`{"text":"alpha beta gamma delta"}`))},
	{name: "every optional field", data: data(map[string]string{"input_version": `"v7"`, "request_id": `"req-1 a"`,
		"idempotency_key": `"order-42"`, "notify": `{"url":"https://hooks.example.com/idemgate?x=1#f"}`})},
	{name: "optional fields null", data: data(map[string]string{"input_version": "null", "request_id": "null",
		"idempotency_key": "null", "notify": "null"})},
	{name: "unknown data members are kept", data: data(map[string]string{"priority": "3", "labels": `["a"]`})},
	{name: "identifier with inner white space and non-ASCII", data: data(map[string]string{"tenant_id": `"租户 一"`})},
	{name: "tenant_id of 128 bytes", data: data(map[string]string{"tenant_id": str(strings.Repeat("t", 128))})},
	{name: "operation of 128 bytes", data: data(map[string]string{"operation": str(strings.Repeat("o", 128))})},
	{name: "idempotency_key of 256 bytes", data: data(map[string]string{"idempotency_key": str(strings.Repeat("k", 256))})},
	{name: "request_id of 128 printable ASCII", data: data(map[string]string{"request_id": str("~" + strings.Repeat("r", 126) + "!")})},
	{name: "notify.url of 2048 bytes", data: data(map[string]string{"notify": `{"url":` + str("http://h.example/"+strings.Repeat("p", 2031)) + `}`})},
	{name: "notify.url forms", data: data(map[string]string{"notify": `{"url":"HTTP://user:p%41ss@[::1]:8080/a%20b/c d?q=%zz"}`})},
	{name: "notify with other members", data: data(map[string]string{"notify": `{"url":"http://10.0.0.1","method":"POST"}`})},
	{name: "summarize content of one space", data: data(map[string]string{"input": `{"content":" "}`})},
	{name: "summarize max_words and other members", data: data(map[string]string{"input": `{"content":"x","max_words":60,"language":"en"}`})},
	{name: "summarize max_words negative", data: data(map[string]string{"input": `{"content":"x","max_words":-5}`})},
	{name: "summarize max_words null", data: data(map[string]string{"input": `{"content":"x","max_words":null}`})},
	{name: "summarize max_words 60.0", data: data(map[string]string{"input": `{"content":"x","max_words":60.0}`})},
	{name: "summarize max_words 6e1", data: data(map[string]string{"input": `{"content":"x","max_words":6e1}`})},
	{name: "input nested 63 deep", data: data(map[string]string{"input": nested(63)})},

	// Rejected by the parser.
	{name: "tenant_id missing", data: data(map[string]string{"tenant_id": ""}), want: "invalid_request", field: "tenant_id"},
	{name: "task_type missing", data: data(map[string]string{"task_type": ""}), want: "invalid_request", field: "task_type"},
	{name: "operation missing", data: data(map[string]string{"operation": ""}), want: "invalid_request", field: "operation"},
	{name: "input missing", data: data(map[string]string{"input": ""}), want: "invalid_request", field: "input"},
	{name: "tenant_id null", data: data(map[string]string{"tenant_id": "null"}), want: "invalid_request", field: "tenant_id"},
	{name: "tenant_id a number", data: data(map[string]string{"tenant_id": "7"}), want: "invalid_request", field: "tenant_id"},
	{name: "tenant_id empty", data: data(map[string]string{"tenant_id": `""`}), want: "invalid_request", field: "tenant_id"},
	{name: "tenant_id leading space", data: data(map[string]string{"tenant_id": `" t1"`}), want: "invalid_request", field: "tenant_id"},
	{name: "operation trailing newline", data: data(map[string]string{"operation": `"summarize\n"`}), want: "invalid_request", field: "operation"},
	{name: "idempotency_key empty", data: data(map[string]string{"idempotency_key": `""`}), want: "invalid_request", field: "idempotency_key"},
	{name: "input_version a number", data: data(map[string]string{"input_version": "2"}), want: "invalid_request", field: "input_version"},
	{name: "input an array", data: data(map[string]string{"input": `["x"]`}), want: "invalid_request", field: "input"},
	{name: "input a string", data: data(map[string]string{"input": `"x"`}), want: "invalid_request", field: "input"},
	{name: "input null", data: data(map[string]string{"input": "null"}), want: "invalid_request", field: "input"},
	{name: "notify a string", data: data(map[string]string{"notify": `"https://h.example"`}), want: "invalid_request", field: "notify"},
	{name: "notify without url", data: data(map[string]string{"notify": `{}`}), want: "invalid_request", field: "url"},
	{name: "notify.url null", data: data(map[string]string{"notify": `{"url":null}`}), want: "invalid_request", field: "url"},
	{name: "notify.url relative", data: data(map[string]string{"notify": `{"url":"/hook"}`}), want: "invalid_request", field: "url"},
	{name: "notify.url ftp", data: data(map[string]string{"notify": `{"url":"ftp://h.example/x"}`}), want: "invalid_request", field: "url"},
	{name: "notify.url without host", data: data(map[string]string{"notify": `{"url":"http:///x"}`}), want: "invalid_request", field: "url"},
	{name: "notify.url space in host", data: data(map[string]string{"notify": `{"url":"http://h example/x"}`}), want: "invalid_request", field: "url"},
	{name: "notify.url port not a number", data: data(map[string]string{"notify": `{"url":"http://h.example:http/"}`}), want: "invalid_request", field: "url"},
	{name: "notify.url bad escape in path", data: data(map[string]string{"notify": `{"url":"http://h.example/%zz"}`}), want: "invalid_request", field: "url"},
	{name: "notify.url control character", data: data(map[string]string{"notify": `{"url":"http://h.example/a\u0007"}`}), want: "invalid_request", field: "url"},

	// Rejected by the pipeline's limits, before any claim.
	{name: "tenant_id of 129 bytes", data: data(map[string]string{"tenant_id": str(strings.Repeat("t", 129))}), want: "field_too_long", field: "tenant_id"},
	{name: "task_type of 65 bytes", data: data(map[string]string{"task_type": str(strings.Repeat("s", 65))}), want: "field_too_long", field: "task_type"},
	{name: "operation of 129 bytes", data: data(map[string]string{"operation": str(strings.Repeat("o", 129))}), want: "field_too_long", field: "operation"},
	{name: "input_version of 129 bytes", data: data(map[string]string{"input_version": str(strings.Repeat("v", 129))}), want: "field_too_long", field: "input_version"},
	{name: "request_id of 129 bytes", data: data(map[string]string{"request_id": str(strings.Repeat("r", 129))}), want: "field_too_long", field: "request_id"},
	{name: "idempotency_key of 257 bytes", data: data(map[string]string{"idempotency_key": str(strings.Repeat("k", 257))}), want: "field_too_long", field: "idempotency_key"},
	{name: "notify.url of 2049 bytes", data: data(map[string]string{"notify": `{"url":` + str("http://h.example/"+strings.Repeat("p", 2032)) + `}`}), want: "field_too_long", field: "url"},
	{name: "request_id not ASCII", data: data(map[string]string{"request_id": `"req-é"`}), want: "invalid_request", field: "request_id"},
	{name: "request_id with a tab", data: data(map[string]string{"request_id": `"req\t1"`}), want: "invalid_request", field: "request_id"},
	{name: "unknown task_type", data: data(map[string]string{"task_type": `"translate"`}), want: "invalid_request", field: "task_type"},

	// Rejected by the task types.
	{name: "summarize without content", data: data(map[string]string{"input": `{"text":"x"}`}), want: "invalid_request", field: "content"},
	{name: "summarize content empty", data: data(map[string]string{"input": `{"content":""}`}), want: "invalid_request", field: "content"},
	{name: "summarize content null", data: data(map[string]string{"input": `{"content":null}`}), want: "invalid_request", field: "content"},
	{name: "summarize content a number", data: data(map[string]string{"input": `{"content":5}`}), want: "invalid_request", field: "content"},
	{name: "summarize max_words a string", data: data(map[string]string{"input": `{"content":"x","max_words":"60"}`}), want: "invalid_request", field: "max_words", says: "input.max_words"},
	{name: "summarize max_words a fraction", data: data(map[string]string{"input": `{"content":"x","max_words":1.5}`}), want: "invalid_request", field: "max_words", says: "input.max_words"},
	{name: "summarize max_words beyond int64", data: data(map[string]string{"input": `{"content":"x","max_words":9223372036854775808}`}), want: "invalid_request", field: "max_words", says: "input.max_words"},
	{name: "summarize max_words beyond int64 as a double", data: data(map[string]string{"input": `{"content":"x","max_words":1e19}`}), want: "invalid_request", field: "max_words", says: "input.max_words"},
	{name: "summarize Content in capitals", data: data(map[string]string{"input": `{"Content":"x"}`}), want: "invalid_request", field: "content"},
	{name: "keywords without text", data: data(kw(`{"content":"x"}`)), want: "invalid_request", field: "text"},
	{name: "keywords text only white space", data: data(kw(`{"text":" \t\u3000\n"}`)), want: "invalid_request", field: "text"},
	{name: "keywords text null", data: data(kw(`{"text":null}`)), want: "invalid_request", field: "text"},

	// What JSON Schema cannot say.
	{name: "tenant_id of 65 two-byte characters", data: data(map[string]string{"tenant_id": str(strings.Repeat("é", 65))}),
		want: "field_too_long", field: "tenant_id", gap: "maxLength counts characters; the function counts UTF-8 bytes"},
	{name: "input over 1 MiB", data: data(map[string]string{"input": `{"content":` + str(strings.Repeat("a", 1<<20)) + `}`}),
		want: "input_too_large", field: "input", gap: "JSON Schema has no limit on an object's encoded size"},
	{name: "input nested 65 deep", data: data(map[string]string{"input": nested(65)}),
		want: "input_too_deep", field: "input", gap: "JSON Schema has no limit on nesting"},
	{name: "input nested 64 deep", data: data(map[string]string{"input": nested(64)}),
		want: "input_too_deep", field: "fingerprint", gap: "JSON Schema has no limit on nesting (data, one level deeper than input, is canonicalised for the fingerprint)"},
	{name: "input number beyond a double", data: data(map[string]string{"input": `{"content":"x","n":1e400}`}),
		want: "invalid_request", field: "input", gap: "JSON Schema numbers have no range; RFC 8785 needs IEEE-754 doubles"},
	{name: "unpaired surrogate in input", data: data(map[string]string{"input": `{"content":"\ud800"}`}),
		want: "malformed_event", gap: "a JSON reader turns the escape into U+FFFD; the function refuses it"},
	{name: "input integer a double cannot hold", data: data(map[string]string{"input": `{"content":"x","order_id":12345678901234567890}`}),
		want: "invalid_request", field: "input.order_id", gap: "JSON Schema numbers are exact values; the function refuses one a double cannot hold, which RFC 8785 would merge with its neighbours"},
	{name: "data fraction a double cannot hold", data: data(map[string]string{"rate": `0.10000000000000000001`}),
		want: "invalid_request", field: "data.rate", gap: "JSON Schema numbers are exact values; the function refuses one a double cannot hold, which RFC 8785 would merge with its neighbours"},
	{name: "notify.url with only a port", data: data(map[string]string{"notify": `{"url":"http://:8080/x"}`}),
		gap: "net/url takes \":8080\" as a host; the schema wants a host name"},
}

// TestDataCases runs each case through the function and the schema.
func TestDataCases(t *testing.T) {
	sch := compile(t)
	for _, c := range dataCases {
		t.Run(c.name, func(t *testing.T) {
			outs := outcomes(t, newPipeline(t), cloudEvent(c.data))
			o := outs[0]
			if o.ErrorType != c.want || (c.want == "" && o.Status != "SUCCEEDED") {
				t.Fatalf("function: %s %q %s; want %q", o.Status, o.ErrorType, o.ErrorMessage, c.want)
			}
			if says := cmp.Or(c.says, c.field); c.want != "" && !strings.Contains(o.ErrorMessage, says) {
				t.Errorf("function's message does not name %q: %s", says, o.ErrorMessage)
			}
			serr := validate(t, sch, []byte(c.data))
			schemaAccepts, functionAccepts := serr == nil, c.want == ""
			switch {
			case c.gap != "" && schemaAccepts == functionAccepts:
				t.Errorf("known gap (%s) closed: schema and function agree now; make it an ordinary case", c.gap)
			case c.gap == "" && schemaAccepts != functionAccepts:
				t.Errorf("schema accepts: %v, function accepts: %v; schema error: %v", schemaAccepts, functionAccepts, serr)
			case c.gap == "" && serr != nil && !strings.Contains(serr.Error(), lastName(c.field)):
				t.Errorf("schema error does not name %q: %v", lastName(c.field), serr)
			}
		})
	}
}

// lastName is the last element of a dotted field name ("notify.url" → "url").
func lastName(field string) string { return field[strings.LastIndex(field, ".")+1:] }

// TestWhiteSpace: for every rune up to U+02FF and every space, separator,
// control or format character (U+FEFF, U+200B, ...) in Unicode, an
// identifier that starts with it, ends with it or holds it inside, and a
// keywords text of nothing else, get the same verdict from the function
// (the parser; the keywords step that reads the text) and from the schema,
// whose white-space class spells out Go's unicode.IsSpace.
func TestWhiteSpace(t *testing.T) {
	sch := compile(t)
	var runes []rune
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r <= 0x2ff || unicode.In(r, unicode.White_Space, unicode.Z, unicode.Cc, unicode.Cf) {
			runes = append(runes, r)
		}
	}
	candidates := handler.Keywords.Steps[0]
	for _, r := range runes {
		s := string(r)
		for _, id := range []string{s + "t1", "t1" + s, "t" + s + "1"} {
			d := data(map[string]string{"tenant_id": str(id)})
			_, perr := event.Parse(cloudEvent(d))
			if serr := validate(t, sch, []byte(d)); (perr == nil) != (serr == nil) {
				t.Errorf("tenant_id %q: parser: %v; schema: %v", id, perr, serr)
			}
		}
		in := `{"text":` + str(s+s) + `}`
		_, kerr := candidates.Run(context.Background(), &handler.StepInput{Task: &event.Task{Input: json.RawMessage(in)}})
		if serr := validate(t, sch, []byte(data(kw(in)))); (kerr == nil) != (serr == nil) {
			t.Errorf("keywords text %q: task type: %v; schema: %v", s+s, kerr, serr)
		}
	}
}

// TestEventsDoc: the worked example in docs/events.md is what the function
// derives for its sample, and every relative link in the doc leads to a file
// (and heading) that exists.
func TestEventsDoc(t *testing.T) {
	doc, err := os.ReadFile("../events.md")
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile("../../testdata/events/eventbridge-single.json")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := event.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	ev := inv.Tasks[0]
	d, err := keys.Derive(keys.Fields{TenantID: ev.TenantID, TaskType: ev.TaskType, Operation: ev.Operation,
		Input: ev.Input, InputVersion: ev.InputVersion, IdempotencyKey: ev.IdempotencyKey})
	if err != nil {
		t.Fatal(err)
	}
	fp, err := keys.Fingerprint(ev.Data)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"input_version  " + d.InputVersion, "K              " + d.Key,
		"payload_hash   " + d.PayloadHash, "fingerprint    " + fp} {
		if !bytes.Contains(doc, []byte(line)) {
			t.Errorf("docs/events.md lacks the worked example's line %q", line)
		}
	}
	checkLinks(t, "../events.md", doc)
}

var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// checkLinks checks the relative links of the Markdown file path (text doc):
// the file exists and, for a #fragment, has a heading with that GitHub anchor.
func checkLinks(t *testing.T, path string, doc []byte) {
	t.Helper()
	for _, m := range link.FindAllSubmatch(doc, -1) {
		target := string(m[1])
		if strings.Contains(target, "://") {
			continue
		}
		file, frag, _ := strings.Cut(target, "#")
		file = filepath.Join(filepath.Dir(path), file)
		if target[0] == '#' {
			file = path
		}
		text, err := os.ReadFile(file)
		if err != nil {
			if _, serr := os.Stat(file); serr != nil {
				t.Errorf("%s: link %s: %v", path, target, serr)
			}
			continue
		}
		if frag != "" && !slices.Contains(anchors(text), frag) {
			t.Errorf("%s: link %s: no heading with anchor %q in %s", path, target, frag, file)
		}
	}
}

// anchors are the GitHub anchors of a Markdown file's headings: lower case,
// punctuation dropped, spaces as hyphens.
func anchors(md []byte) []string {
	var out []string
	for _, line := range strings.Split(string(md), "\n") {
		title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}

// TestFilesLoadTogether: every file in docs/schema has the $id it is
// published under and compiles with the others loaded by those ids, with
// no file system or network (the loader has neither here).
func TestFilesLoadTogether(t *testing.T) {
	files, err := filepath.Glob("*.schema.json")
	if err != nil || len(files) < 5 {
		t.Fatalf("schema files %v %v", files, err)
	}
	for _, f := range files {
		if _, err := schema.Compile(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestEnvelopeAndBatchSchemas: cloudevent.schema.json and batch.schema.json
// give each sample body, and a table of envelope cases, the function's
// verdict on the whole body.
func TestEnvelopeAndBatchSchemas(t *testing.T) {
	one, err := schema.Compile(schema.CloudEvent)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := schema.Compile(schema.Batch)
	if err != nil {
		t.Fatal(err)
	}
	judge := func(body []byte) error {
		sch := one
		if bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
			sch = batch
		}
		return validate(t, sch, body)
	}
	good := string(cloudEvent(data(nil)))
	cases := map[string]string{
		"minimal":                     good,
		"null optional attributes":    strings.Replace(good, `"datacontenttype":"application/json",`, `"subject":null,"time":null,"datacontenttype":null,`, 1),
		"data as a string":            strings.Replace(good, `"data":`+data(nil), `"data":`+str(data(nil)), 1),
		"extensions":                  strings.Replace(good, `"specversion"`, `"aliyunaccountid":"123","aliyunretry":3,"flag":true,"specversion"`, 1),
		"no id":                       strings.Replace(good, `"id":"schema-case",`, ``, 1),
		"empty subject":               strings.Replace(good, `"specversion"`, `"subject":"","specversion"`, 1),
		"specversion 0.3":             strings.Replace(good, `"1.0"`, `"0.3"`, 1),
		"upper-case extension":        strings.Replace(good, `"specversion"`, `"Aliyun":"x","specversion"`, 1),
		"extension object":            strings.Replace(good, `"specversion"`, `"ext":{},"specversion"`, 1),
		"extension beyond 32 bits":    strings.Replace(good, `"specversion"`, `"ext":2147483648,"specversion"`, 1),
		"data and data_base64":        strings.Replace(good, `"specversion"`, `"data_base64":"e30=","specversion"`, 1),
		"no data":                     strings.Replace(good, `,"data":`+data(nil), ``, 1),
		"text/plain":                  strings.Replace(good, `application/json`, `text/plain`, 1),
		"task data without tenant_id": string(cloudEvent(data(map[string]string{"tenant_id": ""}))),
		"empty batch":                 `[]`,
		"batch of two":                "[" + good + "," + good + "]",
		"batch with a bad member":     "[" + good + `,{"specversion":"1.0"}]`,
		"batch of 101":                "[" + strings.TrimSuffix(strings.Repeat(good+",", 101), ",") + "]",
	}
	files, _ := filepath.Glob("../../testdata/events/*.json")
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if inv, err := event.Parse(b); inv != nil && (inv.Kind == event.KindSingle || inv.Kind == event.KindBatch) || err == nil && inv.Kind == event.KindBatch {
			cases[filepath.Base(f)] = string(b)
		}
	}
	accepted := 0
	for name, body := range cases {
		outs := outcomes(t, newPipeline(t), []byte(body))
		fn := len(outs) > 0 || body == "[]"
		for _, o := range outs {
			fn = fn && o.ErrorType == ""
		}
		if name == "batch of 101" {
			fn = false // refused whole (batch_too_large): the answer has no results
		}
		if serr := judge([]byte(body)); fn != (serr == nil) {
			t.Errorf("%s: function accepts: %v; schema: %v", name, fn, serr)
		}
		if fn {
			accepted++
		}
	}
	if accepted < 5 || accepted == len(cases) {
		t.Fatalf("%d of %d cases accepted: the table no longer covers both verdicts", accepted, len(cases))
	}
}

// ValidateData does not hand the validator a number the function refuses:
// the validator reads numbers as big.Rat, which cannot read 1e99999999,
// and then dereferences nil (main validate crashed on such data).
func TestValidateDataHugeNumber(t *testing.T) {
	for _, n := range []string{"1e99999999", "-1e-99999999", "12345678901234567890"} {
		err := schema.ValidateData([]byte(data(map[string]string{"input": `{"content":"x","max_words":` + n + `}`})))
		if err == nil || !strings.Contains(err.Error(), "not judged") || !strings.Contains(err.Error(), "max_words") {
			t.Errorf("%s: %v", n, err)
		}
	}
	if err := schema.ValidateData([]byte(data(map[string]string{"input": `{"content":"x","max_words":60}`}))); err != nil {
		t.Errorf("an exact max_words: %v", err)
	}
}
