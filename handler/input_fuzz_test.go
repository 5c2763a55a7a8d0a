package handler_test

// The input explorer (issue 21, docs/events.md): a fuzz target over the
// whole entry, Pipeline.Handle on the embedded store with the offline
// model, whose oracles are asserted on every input:
//
//  1. no panic, and no retryable answer: nothing in this rig is transient
//     (no network, a local store), so a retryable answer could only come
//     from a body that will never be valid;
//  2. layout invariance: the body re-serialised (white space, member order,
//     \u escapes, number spellings, data as an object, a string or
//     data_base64) gets the same answers, keys, payload hashes and
//     fingerprints;
//  3. injectivity: inputs whose exact values differ never share a key, a
//     payload hash or a fingerprint, judged by an exact canonicaliser of
//     the test's own (math/big) across every input of the run;
//  4. docs/schema gives the task data the function's verdict, except for
//     the gaps docs/events.md lists, each recognised here on its own terms;
//  5. the CloudEvents SDK's verdict agrees with the function's on the
//     envelope: nothing the SDK refuses is accepted, and an envelope the
//     function refuses is one the SDK refuses, or one of the attributes on
//     which the project's rule tables are documented to be stricter.
//
// Each input is a body and a selector of structure-aware mutations applied
// to it before the oracles run (pretty-printing, member order, escapes,
// number spellings, big integers, data vs data_base64, batches, timers,
// failure-destination messages). Seeds: testdata/events, the CloudEvents
// conformance corpus when present, and testdata/fuzz/FuzzInput (the bodies
// that broke the entry before issue 21's fixes). CI runs it for seconds
// (.ci/run); go test -fuzz FuzzInput -fuzztime 10m runs it longer.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/big"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	ce "github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/idemgate/idemgate/docs/schema"
	"github.com/idemgate/idemgate/handler"
	evt "github.com/idemgate/idemgate/handler/event"
	"github.com/idemgate/idemgate/handler/llm"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/keys"
	"github.com/idemgate/idemgate/ossresult"
)

func FuzzInput(f *testing.F) {
	x := newExplorer(f)
	for _, b := range explorerSeeds(f) {
		for m := range uint16(14) {
			f.Add(b, m|m<<4)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, sel uint16) {
		b := mutate(body, sel)
		hung := time.AfterFunc(time.Minute, func() { // a hang is a finding too: say where
			buf := make([]byte, 1<<20)
			panic(fmt.Sprintf("FuzzInput: one input ran for a minute: %.500q\n%s", b, buf[:runtime.Stack(buf, true)]))
		})
		defer hung.Stop()
		x.check(t, b)
	})
}

// explorer is the rig and what the run has seen.
type explorer struct {
	p *handler.Pipeline
	// twin is a second pipeline, on a store of its own: the re-laid-out
	// body runs there as a first delivery, so its task really runs.
	twin   *handler.Pipeline
	schema *jsonschema.Schema
	// identity maps each key, payload hash and fingerprint met to the exact
	// value it was derived from (oracle 3).
	identity map[string]string
}

func newExplorer(f *testing.F) *explorer {
	sch, err := schema.Compile(schema.TaskEvent)
	if err != nil {
		f.Fatal(err)
	}
	return &explorer{p: newEntry(f), twin: newEntry(f), schema: sch, identity: map[string]string{}}
}

// newEntry is Pipeline.Handle on an embedded store of its own, the offline
// model and local results.
func newEntry(f *testing.F) *handler.Pipeline {
	dir := f.TempDir()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() { // fsync is the cost of every claim
		if d, err := os.MkdirTemp("/dev/shm", "idemgate-fuzz-"); err == nil {
			dir = d
			f.Cleanup(func() { os.RemoveAll(d) })
		}
	}
	store, err := boltstore.Open(filepath.Join(dir, "state"), time.Second)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { store.Close() })
	local, err := ossresult.NewLocal(filepath.Join(dir, "results"))
	if err != nil {
		f.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	return &handler.Pipeline{Engine: idempotency.New(store, idempotency.WithLogger(log)),
		Results: func(context.Context, handler.Credentials) (handler.ResultStore, error) { return local, nil },
		Model:   llm.NewOffline(), Tasks: handler.Builtin(), Notify: nopNotifier{}, Log: log}
}

type nopNotifier struct{}

func (nopNotifier) Post(context.Context, string, string, string, []byte) error { return nil }

func explorerSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "events", "*.json"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			seeds = append(seeds, b)
		}
	}
	if len(seeds) < 8 {
		f.Fatalf("only %d samples in testdata/events", len(seeds))
	}
	dir := os.Getenv("IDEMGATE_CONFORMANCE_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "conformance", "cloudevents")
	}
	for _, name := range []string{"valid-events.json", "invalid-events.json", "valid-batches.json", "invalid-batches.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue // optional (handler/event's conformance test requires it when named)
		}
		var file struct {
			Tests []struct {
				Event json.RawMessage   `json:"event"`
				Batch []json.RawMessage `json:"batch"`
			} `json:"tests"`
		}
		if json.Unmarshal(b, &file) != nil {
			f.Fatalf("%s: not the corpus format", name)
		}
		for _, tc := range file.Tests {
			if tc.Event != nil {
				seeds = append(seeds, tc.Event)
			} else if b, err := json.Marshal(tc.Batch); err == nil {
				seeds = append(seeds, b)
			}
		}
	}
	return seeds
}

// check runs the oracles on one body.
func (x *explorer) check(t *testing.T, body []byte) {
	ans := x.handle(t, body)
	x.noRetryable(t, body, ans)
	members := x.members(body, ans)
	for _, m := range members {
		x.envelope(t, m)
		x.data(t, m)
		x.injective(t, m)
	}
	x.layout(t, body, ans)
}

// answer is a reply read back: its top-level outcome and, for a batch (or a
// sweep report), one outcome per result.
type answer struct {
	status  int
	top     handler.Outcome
	results []handler.Outcome
	raw     []byte
}

func (x *explorer) handle(t *testing.T, body []byte) answer { return handleOn(t, x.p, body) }

func handleOn(t *testing.T, p *handler.Pipeline, body []byte) answer {
	t.Helper()
	r := p.Handle(context.Background(), body, handler.Meta{RequestID: "fuzz", RetryCount: -1})
	a := answer{status: r.Status, raw: r.Body}
	var wrap struct {
		Results []handler.Outcome `json:"results"`
	}
	if json.Unmarshal(r.Body, &a.top) != nil || json.Unmarshal(r.Body, &wrap) != nil {
		t.Fatalf("answer is not an outcome: %s\nbody %q", r.Body, body)
	}
	a.results = wrap.Results
	if r.Status != 200 && r.Status != 404 {
		t.Fatalf("HTTP %d for %q", r.Status, body)
	}
	return a
}

// Oracle 1.
func (x *explorer) noRetryable(t *testing.T, body []byte, a answer) {
	for _, o := range append([]handler.Outcome{a.top}, a.results...) {
		if o.ErrorType == "panic" || o.ErrorType == "unknown" || (o.Retryable != nil && *o.Retryable) {
			t.Fatalf("oracle 1: a retryable or unclassified answer for a body that cannot change: %s\nbody %q", a.raw, body)
		}
	}
}

// member is one CloudEvent of the body (the body itself, or a batch
// element) with the outcome the function gave it.
type member struct {
	raw     []byte
	obj     *jnode
	outcome handler.Outcome
}

func (x *explorer) members(body []byte, a answer) []member {
	root, ok := parseTree(body)
	if !ok {
		return nil
	}
	switch root.kind {
	case '{':
		if root.get("specversion") == nil {
			return nil
		}
		return []member{{raw: body, obj: root, outcome: a.top}}
	case '[':
		if len(root.vals) != len(a.results) {
			return nil // refused whole (batch_too_large)
		}
		var ms []member
		for i, v := range root.vals {
			if v.kind == '{' && v.get("specversion") != nil {
				ms = append(ms, member{raw: v.encode(nil, layout{}), obj: v, outcome: a.results[i]})
			}
		}
		return ms
	}
	return nil
}

// Oracle 5. The SDK reads the member as the JSON format means it: without
// null members (null is absent), compact, and data_base64 without escapes;
// its reader misreads the other spellings (handler/event/envelope.go).
func (x *explorer) envelope(t *testing.T, m member) {
	var e ce.Event
	sdkErr := e.UnmarshalJSON(sdkForm(m.obj))
	if sdkErr == nil {
		sdkErr = e.Validate()
	}
	if sdkErr != nil && m.outcome.ErrorType == "" {
		t.Fatalf("oracle 5: the CloudEvents SDK refuses an event the function accepted (%v): %s", sdkErr, m.raw)
	}
	_, perr := evt.Parse(m.raw)
	var pe *evt.Error
	if !asEventError(perr, &pe) || (pe.Type != evt.TypeInvalidEnvelope && pe.Type != evt.TypeMalformedEvent) || sdkErr != nil {
		return
	}
	if !stricterThanSDK(pe.Field, m.obj) {
		t.Fatalf("oracle 5: the function refuses the envelope (%v), the CloudEvents SDK accepts it: %s", perr, m.raw)
	}
}

// stricterThanSDK: the attributes on which the project's rule tables (the
// CloudEvents conformance corpus) are documented to be stricter than the
// SDK (handler/event/envelope.go, parseEnvelope): empty or malformed
// optional attributes, data with data_base64, and extensions (names and
// values; "" is an extension name too).
func stricterThanSDK(field string, obj *jnode) bool {
	switch field {
	case "subject", "datacontenttype", "dataschema", "time", "data_base64": // data_base64: not with data (JSON format §3.1)
		return true
	case "specversion", "id", "source", "type", "data":
		return false
	}
	for _, k := range obj.keys {
		if k == field {
			return true
		}
	}
	return false
}

func sdkForm(obj *jnode) []byte {
	c := &jnode{kind: '{'}
	for i, k := range obj.keys {
		v := obj.vals[i]
		if v.kind == 'n' {
			continue
		}
		c.keys, c.vals = append(c.keys, k), append(c.vals, v)
	}
	return c.encode(nil, layout{})
}

// Oracle 4.
func (x *explorer) data(t *testing.T, m member) {
	o := m.outcome
	data, ok := taskData(m.obj)
	if !ok || envelopeLevel(m.obj, o) {
		return
	}
	if root, ok := parseTree(data); !ok || !root.allNumbers(exactByRat) {
		return // a gap, and one the validator cannot read (1e99999999 makes it dereference nil)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return
	}
	serr := x.schema.Validate(v)
	fnAccepts := o.ErrorType == ""
	if fnAccepts == (serr == nil) {
		return
	}
	if gap := schemaGap(data); gap != "" {
		return // a gap docs/events.md lists
	}
	t.Fatalf("oracle 4: the function answers %q (%s), the schema says %v, for data %s", o.ErrorType, o.ErrorMessage, serr, data)
}

// envelopeLevel: the function's answer is about the envelope or another
// delivery, not about this data.
func envelopeLevel(obj *jnode, o handler.Outcome) bool {
	switch o.ErrorType {
	case evt.TypeInvalidEnvelope, evt.TypeMalformedEvent, evt.TypeUnsupportedEvent, "payload_mismatch":
		return true
	}
	for _, a := range []string{"id", "source"} {
		if v := obj.get(a); v != nil && v.kind == '"' && len(v.lit) > 255 {
			return true
		}
	}
	return false
}

// taskData is the data object of a task event as docs/events.md defines
// it: data itself, or the object a data string or data_base64 holds, under
// a JSON content type; ok is false when there is none.
func taskData(obj *jnode) ([]byte, bool) {
	if ct := obj.get("datacontenttype"); ct != nil && ct.kind == '"' && !jsonMediaType(ct.lit) {
		return nil, false
	}
	d, d64 := obj.get("data"), obj.get("data_base64")
	var b []byte
	switch {
	case d != nil && d.kind != 'n' && d64 != nil && d64.kind != 'n':
		return nil, false
	case d != nil && d.kind == '{':
		b = d.encode(nil, layout{})
	case d != nil && d.kind == '"':
		b = []byte(d.lit)
	case d64 != nil && d64.kind == '"':
		var err error
		if b, err = base64.StdEncoding.DecodeString(d64.lit); err != nil {
			return nil, false
		}
	default:
		return nil, false
	}
	if v := jsontext.Value(b); !v.IsValid() || v.Kind() != '{' {
		return nil, false
	}
	return b, true
}

func jsonMediaType(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	switch strings.TrimSpace(mt) {
	case "application/json", "text/json", "application/cloudevents+json", "application/cloudevents-batch+json":
		return true
	}
	return false
}

// schemaGap names the documented gap (docs/events.md, "What the schema
// cannot check") data falls into, judged here without the function's code.
func schemaGap(data []byte) string {
	root, ok := parseTree(data)
	if !ok {
		return "not JSON to the test"
	}
	limits := map[string]int{"tenant_id": 128, "task_type": 64, "operation": 128, "input_version": 128,
		"request_id": 128, "idempotency_key": 256}
	for name, max := range limits {
		if v := root.get(name); v != nil && v.kind == '"' && len(v.lit) > max && utf8.RuneCountInString(v.lit) <= max {
			return "UTF-8 bytes against characters"
		}
	}
	if n := root.get("notify"); n != nil && n.kind == '{' {
		if u := n.get("url"); u != nil && u.kind == '"' {
			if len(u.lit) > 2048 && utf8.RuneCountInString(u.lit) <= 2048 {
				return "UTF-8 bytes against characters"
			}
			if pu, err := url.Parse(u.lit); err == nil && pu.Host != "" && pu.Hostname() == "" {
				return "a port without a host name"
			}
		}
	}
	if in := root.get("input"); in != nil {
		if len(in.encode(nil, layout{})) > handler.MaxInputBytes || in.depth() > 62 {
			return "the input's size or nesting"
		}
	}
	if !root.allNumbers(exactByRat) {
		return "a number a double cannot hold"
	}
	return ""
}

// exactByRat is the number rule of docs/design.md §4 decided with exact
// arithmetic: the literal's value equals the value of the shortest decimal
// that reads back as the same double (what RFC 8785 writes, digit for
// digit).
func exactByRat(lit string) bool {
	neg, digits, exp := decimalOf(lit)
	switch {
	case digits == "":
		return true // zero
	case len(digits) > 17 || exp.Cmp(big.NewInt(-400)) < 0 || exp.Cmp(big.NewInt(400)) > 0:
		return false // no shortest form of a double has such digits or such a power
	}
	want := new(big.Rat).SetFrac(bigDigits(digits), big.NewInt(1))
	p := new(big.Int).Exp(big.NewInt(10), new(big.Int).Abs(exp), nil)
	if exp.Sign() < 0 {
		want.Quo(want, new(big.Rat).SetInt(p))
	} else {
		want.Mul(want, new(big.Rat).SetInt(p))
	}
	if neg {
		want.Neg(want)
	}
	f, _ := strconv.ParseFloat(lit, 64)
	if math.IsInf(f, 0) {
		return false
	}
	got, _ := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
	return got.Cmp(want) == 0
}

// decimalOf reads a number literal as sign, significant digits (none for
// zero) and the power of ten of the last digit, the power kept exact
// however large it is written.
func decimalOf(lit string) (neg bool, digits string, exp *big.Int) {
	neg = strings.HasPrefix(lit, "-")
	lit = strings.TrimPrefix(lit, "-")
	mant, e, _ := strings.Cut(strings.ToLower(lit), "e")
	exp = new(big.Int)
	if e != "" {
		exp.SetString(strings.TrimPrefix(e, "+"), 10)
	}
	whole, frac, _ := strings.Cut(mant, ".")
	all := strings.TrimLeft(whole+frac, "0")
	trimmed := strings.TrimRight(all, "0")
	exp.Add(exp, big.NewInt(int64(len(all)-len(trimmed)-len(frac))))
	return neg, trimmed, exp
}

func bigDigits(s string) *big.Int {
	n, _ := new(big.Int).SetString(s, 10)
	return n
}

// Oracle 3. Everything a key is derived from, read exactly: two inputs
// meet under one key only if they are the same value. A sibling of the
// event, one digit of a number in its input changed, must be refused or
// derive other identifiers.
func (x *explorer) injective(t *testing.T, m member) {
	if m.outcome.ErrorType != "" {
		return
	}
	tk := parsedTask(t, m.raw)
	if tk == nil {
		return
	}
	x.remember(t, m.raw, tk)
	sib := m.obj.clone()
	if in := sib.dataInput(); in == nil || !in.changeNumber() {
		return
	}
	raw := sib.encode(nil, layout{})
	if st := parsedTask(nil, raw); st != nil {
		x.remember(t, raw, st)
	}
}

// parsedTask parses an accepted single event and derives its identifiers;
// nil when any step refuses it.
func parsedTask(t *testing.T, raw []byte) *derived {
	inv, err := evt.Parse(raw)
	if err != nil || len(inv.Tasks) != 1 {
		if t != nil && inv != nil && inv.Kind == evt.KindSingle {
			t.Fatalf("accepted by the pipeline, refused by evt.Parse: %v\n%s", err, raw)
		}
		return nil
	}
	ev := inv.Tasks[0]
	d, err := keys.Derive(keys.Fields{TenantID: ev.TenantID, TaskType: ev.TaskType, Operation: ev.Operation, Input: ev.Input,
		InputVersion: ev.InputVersion, IdempotencyKey: ev.IdempotencyKey})
	if err != nil {
		return nil
	}
	fp, err := keys.Fingerprint(ev.Data)
	if err != nil {
		return nil
	}
	return &derived{task: ev, d: d, fp: fp}
}

type derived struct {
	task *evt.Task
	d    keys.Derived
	fp   string
}

// remember records what each identifier of tk names, exactly, and fails
// when an identifier met before named another value.
func (x *explorer) remember(t *testing.T, raw []byte, tk *derived) {
	ev := tk.task
	in := exactCanon(ev.Input)
	version := ev.InputVersion
	if version == "" || version == "sha256:"+inputSum(ev.Input) { // given as the derived one, it is the derived one
		version = "derived:" + in
	}
	id := "content|" + exactCanon(mustJSON(ev.TenantID, ev.TaskType, ev.Operation, version))
	if ev.IdempotencyKey != "" {
		id = "explicit|" + exactCanon(mustJSON(ev.TenantID, ev.IdempotencyKey))
	}
	payload := exactCanon(mustJSON(ev.TaskType, ev.Operation, version))
	if !strings.HasPrefix(version, "derived:") {
		payload += "|" + in
	}
	for _, c := range []struct{ kind, hash, what string }{
		{"key", tk.d.Key, id}, {"payload hash", tk.d.PayloadHash, payload}, {"fingerprint", tk.fp, exactCanon(ev.Data)},
	} {
		k := c.kind + " " + c.hash
		if prev, ok := x.identity[k]; ok && prev != c.what {
			t.Fatalf("oracle 3: one %s for two different values:\n%s\n%s\nevent %s", c.kind, prev, c.what, raw)
		}
		x.identity[k] = c.what
	}
}

func inputSum(input []byte) string {
	d, err := keys.Derive(keys.Fields{TenantID: "-", TaskType: "-", Operation: "-", Input: input})
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(d.InputVersion, "sha256:")
}

func mustJSON(v ...string) []byte {
	b, _ := json.Marshal(v)
	return b
}

// exactCanon is an exact canonical form of a JSON value, apart from
// package jcs: numbers as exact rationals, members sorted, strings quoted
// by Go.
func exactCanon(raw []byte) string {
	root, ok := parseTree(raw)
	if !ok {
		return "invalid:" + string(raw)
	}
	var b strings.Builder
	root.exact(&b)
	return b.String()
}

// Oracle 2.
func (x *explorer) layout(t *testing.T, body []byte, a answer) {
	root, ok := parseTree(body)
	if !ok {
		return
	}
	seed := uint64(len(body))
	for _, c := range body {
		seed = seed*31 + uint64(c)
	}
	l := layout{r: rand.New(rand.NewPCG(seed, 21)), indent: []string{"", " ", "  ", "\t", "\n"}[seed%5],
		shuffle: true, escape: 0.3, respell: true, transport: true}
	variant := root.encode(nil, l)
	for _, p := range []*handler.Pipeline{x.p, x.twin} { // a duplicate here, a first delivery on the twin
		b := handleOn(t, p, variant)
		if root.kind == '[' && len(b.results) == len(a.results) {
			for i := range a.results {
				if !sameVerdict(a.results[i], b.results[i]) {
					t.Fatalf("oracle 2: member %d answers differently in a new layout:\n%s\n%s\nvariant %q", i, a.raw, b.raw, variant)
				}
			}
			continue
		}
		if !sameVerdict(a.top, b.top) || root.kind == '[' && len(b.results) != len(a.results) ||
			b.top.RequestID != a.top.RequestID && a.top.IdempotencyKey != "" {
			t.Fatalf("oracle 2: a new layout, another answer:\n%s\n%s\nbody    %q\nvariant %q", a.raw, b.raw, body, variant)
		}
	}
	if ta, tb := parsedTask(nil, body), parsedTask(nil, variant); ta != nil && tb != nil &&
		(ta.d != tb.d || ta.fp != tb.fp) {
		t.Fatalf("oracle 2: identifiers change with the layout: %+v %s / %+v %s\nvariant %q", ta.d, ta.fp, tb.d, tb.fp, variant)
	}
}

// sameVerdict: two answers to one event in two layouts agree. A payload
// mismatch depends on what else the store saw, so it is no verdict on the
// layout.
func sameVerdict(a, b handler.Outcome) bool {
	if a.ErrorType == "payload_mismatch" || b.ErrorType == "payload_mismatch" {
		return a.IdempotencyKey == b.IdempotencyKey
	}
	return a.ErrorType == b.ErrorType && a.IdempotencyKey == b.IdempotencyKey
}

// A JSON tree that keeps member order and number literals.
type jnode struct {
	kind byte   // '{', '[', '"', '0' (number), 'n', 't', 'f'
	lit  string // a string's value, a number's literal
	keys []string
	vals []*jnode
}

func parseTree(b []byte) (*jnode, bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	n, err := readNode(dec)
	if err != nil {
		return nil, false
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, false
	}
	return n, true
}

func readNode(dec *jsontext.Decoder) (*jnode, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	n := &jnode{kind: byte(tok.Kind())}
	switch n.kind {
	case '"':
		n.lit = tok.String()
	case '0':
		n.lit = tok.String()
	case '{', '[':
		end := jsontext.Kind('}')
		if n.kind == '[' {
			end = ']'
		}
		for dec.PeekKind() != end {
			if n.kind == '{' {
				k, err := dec.ReadToken()
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, k.String())
			}
			v, err := readNode(dec)
			if err != nil {
				return nil, err
			}
			n.vals = append(n.vals, v)
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func (n *jnode) get(name string) *jnode {
	if n == nil || n.kind != '{' {
		return nil
	}
	for i, k := range n.keys {
		if k == name {
			return n.vals[i]
		}
	}
	return nil
}

func (n *jnode) set(name string, v *jnode) {
	for i, k := range n.keys {
		if k == name {
			n.vals[i] = v
			return
		}
	}
	n.keys, n.vals = append(n.keys, name), append(n.vals, v)
}

func (n *jnode) del(name string) {
	for i, k := range n.keys {
		if k == name {
			n.keys, n.vals = slices.Delete(n.keys, i, i+1), slices.Delete(n.vals, i, i+1)
			return
		}
	}
}

func (n *jnode) clone() *jnode {
	c := *n
	c.keys = slices.Clone(n.keys)
	c.vals = make([]*jnode, len(n.vals))
	for i, v := range n.vals {
		c.vals[i] = v.clone()
	}
	return &c
}

func (n *jnode) depth() int {
	d := 0
	for _, v := range n.vals {
		d = max(d, v.depth())
	}
	if n.kind == '{' || n.kind == '[' {
		d++
	}
	return d
}

func (n *jnode) allNumbers(ok func(string) bool) bool {
	if n.kind == '0' {
		return ok(n.lit)
	}
	for _, v := range n.vals {
		if !v.allNumbers(ok) {
			return false
		}
	}
	return true
}

// dataInput is the input object of an event whose data is an object.
func (n *jnode) dataInput() *jnode {
	if in := n.get("data").get("input"); in != nil && in.kind == '{' {
		return in
	}
	return nil
}

// changeNumber changes one digit of the first number under n (another
// exact value whatever the digit); false when there is none.
func (n *jnode) changeNumber() bool {
	if n.kind == '0' {
		mant := strings.IndexAny(n.lit, "eE")
		if mant < 0 {
			mant = len(n.lit)
		}
		for i := mant - 1; i >= 0; i-- {
			if c := n.lit[i]; c >= '0' && c <= '9' {
				n.lit = n.lit[:i] + string('0'+(c-'0'+1)%10) + n.lit[i+1:] // the last digit: never a leading zero
				return true
			}
		}
		return false
	}
	for _, v := range n.vals {
		if v.changeNumber() {
			return true
		}
	}
	return false
}

func (n *jnode) exact(b *strings.Builder) {
	switch n.kind {
	case '"':
		b.WriteString(strconv.Quote(n.lit))
	case '0':
		neg, digits, exp := decimalOf(n.lit)
		if digits == "" {
			b.WriteString("#0")
		} else {
			fmt.Fprintf(b, "#%v:%s:%s", neg, digits, exp)
		}
	case 'n', 't', 'f':
		b.WriteString(map[byte]string{'n': "null", 't': "true", 'f': "false"}[n.kind])
	case '[':
		b.WriteByte('[')
		for _, v := range n.vals {
			v.exact(b)
			b.WriteByte(',')
		}
		b.WriteByte(']')
	case '{':
		order := make([]int, len(n.keys))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(i, j int) int { return strings.Compare(n.keys[i], n.keys[j]) })
		b.WriteByte('{')
		for _, i := range order {
			b.WriteString(strconv.Quote(n.keys[i]) + ":")
			n.vals[i].exact(b)
			b.WriteByte(',')
		}
		b.WriteByte('}')
	}
}

// layout says how encode writes a tree; the zero layout is compact and
// faithful.
type layout struct {
	r         *rand.Rand
	indent    string
	shuffle   bool
	escape    float64 // share of characters written as \u escapes
	respell   bool    // numbers in another spelling of the same value
	transport bool    // data as an object, a string or data_base64
}

func (l layout) coin(p float64) bool { return l.r != nil && l.r.Float64() < p }

func (n *jnode) encode(out []byte, l layout) []byte { return n.write(out, l, 0, true) }

// write writes n at depth; event says n is where an event may be (the
// body, or a batch's element).
func (n *jnode) write(out []byte, l layout, depth int, event bool) []byte {
	nl := func(d int) {
		if l.indent != "" {
			out = append(out, '\n')
			out = append(out, strings.Repeat(l.indent, d)...)
		}
	}
	switch n.kind {
	case '"':
		return appendString(out, n.lit, l)
	case '0':
		if l.respell {
			return append(out, respell(n.lit, l)...)
		}
		return append(out, n.lit...)
	case 'n':
		return append(out, "null"...)
	case 't':
		return append(out, "true"...)
	case 'f':
		return append(out, "false"...)
	}
	order := make([]int, len(n.vals))
	for i := range order {
		order[i] = i
	}
	if l.shuffle && n.kind == '{' && l.r != nil {
		l.r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	open, closing := byte('['), byte(']')
	if n.kind == '{' {
		open, closing = '{', '}'
	}
	out = append(out, open)
	for k, i := range order {
		if k > 0 {
			out = append(out, ',')
		}
		nl(depth + 1)
		if n.kind == '{' {
			out = appendString(out, n.keys[i], l)
			out = append(out, ':')
			if l.indent != "" {
				out = append(out, ' ')
			}
			if event && l.transport && n.keys[i] == "data" && n.vals[i].kind == '{' && n.get("specversion") != nil &&
				jsonMediaTypeOrAbsent(n) {
				out = n.vals[i].writeAsString(out, l)
				continue
			}
		}
		out = n.vals[i].write(out, l, depth+1, event && depth == 0 && n.kind == '[')
	}
	if len(order) > 0 {
		nl(depth)
	}
	return append(out, closing)
}

func jsonMediaTypeOrAbsent(obj *jnode) bool {
	ct := obj.get("datacontenttype")
	return ct == nil || ct.kind == 'n' || (ct.kind == '"' && jsonMediaType(ct.lit))
}

// writeAsString writes a data object as EventBridge passes on data put as
// a string: a JSON string holding it.
func (n *jnode) writeAsString(out []byte, l layout) []byte {
	inner := l
	inner.transport = false
	return appendString(out, string(n.write(nil, inner, 0, false)), l)
}

func appendString(out []byte, s string, l layout) []byte {
	out = append(out, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			out = append(out, '\\', byte(r))
		case r < 0x20 || l.coin(l.escape):
			for _, u := range utf16.Encode([]rune{r}) {
				out = fmt.Appendf(out, `\u%04x`, u)
			}
		default:
			out = utf8.AppendRune(out, r)
		}
	}
	return append(out, '"')
}

// respell writes a number literal in another spelling of the same value.
func respell(lit string, l layout) string {
	mant, exp, hasExp := strings.Cut(lit, "e")
	if !hasExp {
		mant, exp, hasExp = strings.Cut(lit, "E")
	}
	switch {
	case hasExp && !strings.HasPrefix(exp, "-") && !strings.HasPrefix(exp, "+"):
		return mant + "E+" + exp
	case hasExp:
		return mant + "e" + exp
	case strings.Contains(mant, "."):
		return mant + "0"
	case l.coin(0.5):
		return mant + ".0"
	}
	return mant + "e0"
}

// mutate applies the structure-aware mutations sel names (two, one per
// nibble) to body when it is JSON; other bodies are used as they are.
func mutate(body []byte, sel uint16) []byte {
	root, ok := parseTree(body)
	if !ok {
		return body
	}
	r := rand.New(rand.NewPCG(uint64(sel), uint64(len(body))))
	for _, m := range []uint16{sel & 0xf, sel >> 4 & 0xf} {
		root = mutation(root, m, r)
	}
	l := layout{}
	if sel>>8&1 == 1 {
		l = layout{r: r, indent: "  ", shuffle: true}
	}
	return root.encode(nil, l)
}

var bigIntegers = []string{"12345678901234567890", "12345678901234567891", "9007199254740993", "9007199254740992",
	"0.10000000000000000001", "1e400", "1e-400", "295147905179352825856", "60.0", "6e1", "-0", "1.5"}

func mutation(root *jnode, m uint16, r *rand.Rand) *jnode {
	ev := root
	if root.kind == '[' && len(root.vals) > 0 {
		ev = root.vals[r.IntN(len(root.vals))]
	}
	data := ev.get("data")
	switch m {
	case 1: // a number a double may not hold, in the input
		if in := ev.dataInput(); in != nil {
			in.set([]string{"order_id", "max_words", "n"}[r.IntN(3)], &jnode{kind: '0', lit: bigIntegers[r.IntN(len(bigIntegers))]})
		}
	case 2: // data to data_base64
		if data != nil && data.kind == '{' {
			ev.del("data")
			ev.set("data_base64", &jnode{kind: '"', lit: base64.StdEncoding.EncodeToString(data.encode(nil, layout{}))})
			if r.IntN(2) == 0 {
				ev.del("datacontenttype")
			}
		}
	case 3: // data to a string
		if data != nil && data.kind == '{' {
			ev.set("data", &jnode{kind: '"', lit: string(data.encode(nil, layout{}))})
		}
	case 4: // a batch of it, twice (a double submit)
		if root.kind == '{' {
			return &jnode{kind: '[', vals: []*jnode{root, root.clone()}}
		}
	case 5: // a timer, its payload right or mistyped, members missing
		t := &jnode{kind: '{'}
		if r.IntN(4) > 0 {
			t.set("triggerTime", &jnode{kind: '"', lit: []string{"2026-11-30T07:00:00Z", "yesterday", ""}[r.IntN(3)]})
		}
		if r.IntN(4) > 0 {
			t.set("triggerName", &jnode{kind: '"', lit: "sweep"})
		}
		if r.IntN(4) > 0 {
			t.set("payload", &jnode{kind: '"', lit: []string{"sweep", "swep", "purge", "Sweep", ""}[r.IntN(5)]})
		}
		return t
	case 6: // a failure-destination message carrying it
		d := &jnode{kind: '{'}
		d.set("timestamp", &jnode{kind: '0', lit: "1660120276975"})
		rc := &jnode{kind: '{'}
		rc.set("requestId", &jnode{kind: '"', lit: "r-1"})
		if r.IntN(3) == 0 {
			rc = &jnode{kind: '"', lit: "x"}
		}
		d.set("requestContext", rc)
		d.set("requestPayload", &jnode{kind: '"', lit: string(root.encode(nil, layout{}))})
		return d
	case 7: // a task field removed, nulled or retyped
		if data != nil && data.kind == '{' && len(data.keys) > 0 {
			k := data.keys[r.IntN(len(data.keys))]
			switch r.IntN(3) {
			case 0:
				data.del(k)
			case 1:
				data.set(k, &jnode{kind: 'n'})
			default:
				data.set(k, &jnode{kind: '0', lit: "7"})
			}
		}
	case 8: // an envelope attribute removed, nulled or emptied
		if ev.kind == '{' && len(ev.keys) > 0 {
			k := ev.keys[r.IntN(len(ev.keys))]
			switch r.IntN(3) {
			case 0:
				ev.del(k)
			case 1:
				ev.set(k, &jnode{kind: 'n'})
			default:
				ev.set(k, &jnode{kind: '"', lit: ""})
			}
		}
	case 9: // a content type data may or may not carry
		if ev.kind == '{' {
			ev.set("datacontenttype", &jnode{kind: '"', lit: []string{"text/plain", "application/json; charset=utf-8",
				"text/json", "xyz", "application/cloudevents+json"}[r.IntN(5)]})
		}
	case 10: // an identifier with non-ASCII, white space or at a limit
		if data != nil && data.kind == '{' {
			k := []string{"tenant_id", "operation", "request_id", "idempotency_key", "input_version"}[r.IntN(5)]
			data.set(k, &jnode{kind: '"', lit: []string{"é", " t", "t\u3000", strings.Repeat("t", 128), strings.Repeat("é", 65),
				"order-" + strconv.Itoa(r.IntN(3))}[r.IntN(6)]})
		}
	case 11: // notify
		if data != nil && data.kind == '{' {
			n := &jnode{kind: '{'}
			n.set("url", &jnode{kind: '"', lit: []string{"https://hooks.example.com/x", "http://:8080/x", "ftp://h/x", "/rel", "http://h example/"}[r.IntN(5)]})
			data.set("notify", n)
		}
	case 12: // an extension
		if ev.kind == '{' {
			ev.set([]string{"aliyunaccountid", "Upper", "ext_1", "x1"}[r.IntN(4)],
				[]*jnode{{kind: '"', lit: "v"}, {kind: '0', lit: "1.5"}, {kind: 't'}, {kind: '0', lit: "2147483648"}, {kind: '['}}[r.IntN(5)])
		}
	case 13: // the task type
		if data != nil && data.kind == '{' {
			data.set("task_type", &jnode{kind: '"', lit: []string{"keywords", "summarize", "translate"}[r.IntN(3)]})
		}
	}
	return root
}

func asEventError(err error, target **evt.Error) bool {
	e, ok := err.(*evt.Error)
	if ok {
		*target = e
	}
	return ok
}
