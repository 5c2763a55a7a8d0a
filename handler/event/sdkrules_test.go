package event

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sdkEvent is a CloudEvent whose members are the defaults below with over
// applied (a "" value drops the member), specversion first and the rest in
// a fixed order: the SDK's reader depends on where specversion stands.
func sdkEvent(over map[string]string) []byte {
	members := map[string]string{
		"specversion": `"1.0"`, "id": `"e1"`, "source": `"acs:eventbridge:cn-hangzhou:1:eventbus/bus"`,
		"type": `"idemgate:Task:Submitted"`, "datacontenttype": `"application/json; charset=utf-8"`,
		"aliyunregionid": `"cn-hangzhou"`,
		"data":           `{"tenant_id":"acme","task_type":"summarize","operation":"summarize","input":{"content":"x","temperature":0.5}}`,
	}
	for k, v := range over {
		members[k] = v
	}
	order := []string{"specversion", "id", "source", "type", "subject", "time", "datacontenttype", "dataschema",
		"aliyunregionid", "ext", "schemaurl", "data", "data_base64"}
	parts := []string{}
	for _, k := range order {
		if v := members[k]; v != "" {
			parts = append(parts, `"`+k+`":`+v)
		}
	}
	return []byte("{" + strings.Join(parts, ",") + "}")
}

// TestSDKAcceptsIsSound: every shape that passes this package's own checks
// but that the CloudEvents SDK refuses is still refused with the SDK's word,
// because sdkAccepts sends it to the SDK; the shapes EventBridge sends skip
// the SDK, and so do those whose check here is exact.
func TestSDKAcceptsIsSound(t *testing.T) {
	for _, c := range []struct {
		name string
		over map[string]string
		fast bool // sdkAccepts vouches for it
		sdk  bool // the SDK refuses it (then Parse must too, with its word)
	}{
		{name: "eventbridge shape", fast: true},
		{name: "no datacontenttype", over: map[string]string{"datacontenttype": ""}, fast: true},
		{name: "subject and time", over: map[string]string{"subject": `"s"`, "time": `"2026-11-30T07:05:12.345Z"`}, fast: true},
		{name: "integer and boolean extensions", over: map[string]string{"aliyunregionid": `-2147483648`, "ext": `true`}, fast: true},
		{name: "escaped strings", over: map[string]string{"id": `"e\u00e9\n"`, "ext": `"\"x\""`}, fast: true},
		{name: "numbers in data", over: map[string]string{"data": `{"tenant_id":"a","task_type":"t","operation":"o","input":{"n":[-0.4e39,1e300,0.5,0,-0,"0.4e39"]}}`}, fast: true},

		{name: "id of white space", over: map[string]string{"id": `" "`}, sdk: true},
		{name: "id of a Unicode space", over: map[string]string{"id": `"\u00a0"`}, sdk: true},
		{name: "type of white space", over: map[string]string{"type": `"\t"`}, sdk: true},
		{name: "subject of white space", over: map[string]string{"subject": `"  "`}, sdk: true},
		{name: "source that writes nothing (#)", over: map[string]string{"source": `"#"`}, sdk: true},
		{name: "source that writes nothing (//)", over: map[string]string{"source": `"//"`}, sdk: true},
		{name: "datacontenttype with leading space", over: map[string]string{"datacontenttype": `" application/json"`}, sdk: true},

		{name: "data number the SDK reads as a float32", over: map[string]string{"datacontenttype": "", "data": `{"tenant_id":"a","task_type":"t","operation":"o","input":{"n":0.4e39}}`}, sdk: true},

		{name: "the same after datacontenttype (the SDK drops its reader's error)", over: map[string]string{"data": `{"tenant_id":"a","task_type":"t","operation":"o","input":{"n":0.4e39}}`}},
		{name: "zero-led exponents in data", over: map[string]string{"data": `{"tenant_id":"a","task_type":"t","operation":"o","input":{"n":[0.3e23,0e999999999,0.000001e-300]}}`}},
		{name: "exponent integer extension", over: map[string]string{"ext": `1e1`}},
		{name: "null member", over: map[string]string{"subject": `null`}},
		{name: "dataschema", over: map[string]string{"dataschema": `"https://example.com/s"`}},
		{name: "data_base64", over: map[string]string{"data": "", "data_base64": `"e30="`}},
		{name: "data as a string", over: map[string]string{"data": `"{}"`}},
		{name: "schemaurl extension", over: map[string]string{"schemaurl": `"x"`}},
		{name: "text datacontenttype", over: map[string]string{"datacontenttype": `"text/plain"`, "data": `"x"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := sdkEvent(c.over)
			dec, err := decodeBody(body)
			if err != nil {
				t.Fatalf("%s: %v", body, err)
			}
			env, err := ownChecks(dec.obj)
			if err != nil {
				t.Fatalf("%s: refused before the SDK: %v", body, err)
			}
			if got := sdkAccepts(env); got != c.fast {
				t.Errorf("%s: sdkAccepts %v, want %v", body, got, c.fast)
			}
			if serr := sdkCheck(body, env.attrs); (serr != nil) != c.sdk {
				t.Fatalf("%s: the SDK says %v, want refused %v (the case is stale)", body, serr, c.sdk)
			}
			_, perr := Parse(body)
			if c.sdk && (perr == nil || !strings.Contains(perr.Error(), "rejected by the CloudEvents SDK")) {
				t.Errorf("%s: Parse says %v, want the SDK's refusal", body, perr)
			}
		})
	}
}

// TestSDKAcceptsCorpus holds sdkAccepts to the SDK on the sample events and,
// when present, the conformance corpus (TestConformanceCorpus).
func TestSDKAcceptsCorpus(t *testing.T) {
	for _, body := range sdkSeeds(t) {
		checkSDKAccepts(t, body)
	}
}

// FuzzSDKAccepts: for any body, an event sdkAccepts vouches for is one the
// SDK accepts (the fast path never accepts what Parse refused before).
func FuzzSDKAccepts(f *testing.F) {
	for _, body := range sdkSeeds(f) {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkSDKAccepts(t, body) })
}

func checkSDKAccepts(t *testing.T, body []byte) {
	t.Helper()
	dec, err := decodeBody(body)
	if err != nil {
		return
	}
	members := []element{{raw: body, obj: dec.obj}}
	if dec.kind == '[' {
		members = dec.els
	}
	for _, m := range members {
		if m.obj == nil {
			continue
		}
		env, err := ownChecks(m.obj)
		if err != nil || !sdkAccepts(env) {
			continue
		}
		if serr := sdkCheck(m.raw, env.attrs); serr != nil {
			t.Fatalf("sdkAccepts vouched for %s, which the SDK refuses: %v", m.raw, serr)
		}
	}
}

// sdkSeeds are the sample bodies, the cases of TestSDKAcceptsIsSound's
// kind, and the conformance corpus's events when it is present.
func sdkSeeds(tb testing.TB) [][]byte {
	var out [][]byte
	samples, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "events", "*.json"))
	for _, p := range samples {
		if b, err := os.ReadFile(p); err == nil {
			out = append(out, b)
		}
	}
	out = append(out, sdkEvent(nil), sdkEvent(map[string]string{"id": `" "`, "ext": "7"}),
		sdkEvent(map[string]string{"data": `{"a":[0.5e1,0e0,-0.1e1,0.4e39]}`}))
	if _, err := os.Stat(corpusDir); err != nil {
		return out
	}
	for _, name := range []string{"valid-events.json", "invalid-events.json", "valid-batches.json", "invalid-batches.json"} {
		b, err := os.ReadFile(filepath.Join(corpusDir, name))
		if err != nil {
			tb.Fatal(err)
		}
		var f corpusFile
		if err := json.Unmarshal(b, &f); err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
		for _, c := range f.Tests {
			if c.Event != nil {
				out = append(out, c.Event)
			}
			for _, m := range c.Batch {
				out = append(out, m)
			}
		}
	}
	return out
}

// TestGoodMediaTypes: the values checkMediaType takes without a parse are
// values its parse accepts.
func TestGoodMediaTypes(t *testing.T) {
	for v := range goodMediaTypes {
		if msg := parseMediaType(v); msg != "" {
			t.Errorf("%q: %s", v, msg)
		}
	}
}
