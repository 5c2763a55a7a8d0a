package event

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// The envelope rules of the CloudEvents JSON-format conformance corpus
// (format/json of github.com/cloudevents/conformance), one named case per
// rule, written here so that a clone without the corpus beside it still tests
// envelope validation. TestConformanceCorpus runs the corpus itself when it is
// present and checks that every corpus case has its rule here (corpusID).

// ruleWant is how a rule case must be judged.
type ruleWant int

const (
	acceptEvent    ruleWant = iota // envelope and task accepted
	refuseTask                     // envelope accepted, the task data refused (invalid_request)
	refuseEnvelope                 // FINAL invalid_envelope, whatever the data
)

type envelopeRule struct {
	name     string
	corpusID string // the corpus case this rule stands for
	attrs    string // the event's members, without braces
	want     ruleWant
	field    string // the attribute a refuseEnvelope names ("" when none)
}

// ruleAttrs are the required attributes with valid values.
const ruleAttrs = `"specversion":"1.0","id":"rule-1","type":"io.idemgate.rule","source":"https://idemgate.example/rules"`

var envelopeRules = []envelopeRule{
	// Accepted envelopes.
	{"required attributes only", "validMinimal", ruleAttrs, acceptEvent, ""},
	{"optional attributes null read as absent", "validMinimalWithNullForOptional",
		ruleAttrs + `,"datacontenttype":null,"dataschema":null,"subject":null,"time":null`, acceptEvent, ""},
	{"every core attribute", "validAllCoreAttributes",
		ruleAttrs + `,"dataschema":"https://idemgate.example/schema","subject":"rules","time":"2026-11-30T07:00:00Z"`, acceptEvent, ""},
	{"time in UTC", "validMinimalWithTimeUtc", ruleAttrs + `,"time":"2026-11-30T07:00:00Z"`, acceptEvent, ""},
	{"time to nanoseconds", "validMinimalWithTimeToNanosecondsUtc", ruleAttrs + `,"time":"2026-11-30T07:00:00.123456789Z"`, acceptEvent, ""},
	{"time with a positive offset", "validMinimalWithTimeUsingPositiveOffset", ruleAttrs + `,"time":"2026-11-30T15:00:00+08:00"`, acceptEvent, ""},
	{"time with a negative offset", "validMinimalWithTimeUsingNegativeOffset", ruleAttrs + `,"time":"2026-11-30T02:00:00-05:00"`, acceptEvent, ""},
	{"relative source", "validRelativeSource",
		`"specversion":"1.0","id":"rule-1","type":"io.idemgate.rule","source":"#rules"`, acceptEvent, ""},
	{"extension of every type", "validAllExtensionTypes", ruleAttrs +
		`,"extinteger":-7,"extboolean":false,"extstring":"idemgate","exturi":"https://idemgate.example","exturiref":"//idemgate/rules",` +
		`"exttimestamp":"2026-11-30T07:00:00Z","extbinary":"aWRlbWdhdGU="`, acceptEvent, ""},
	// A valid envelope whose data is plain text: the envelope passes, the task is refused.
	{"text data judged as a task, not as an envelope", "validSimpleTextData",
		ruleAttrs + `,"datacontenttype":"text/plain","data":"plain words"`, refuseTask, ""},

	// Refused envelopes: a required attribute missing or empty.
	{"no specversion", "invalidNoSpecVersion", `"id":"rule-1","type":"io.idemgate.rule","source":"https://idemgate.example/rules"`, refuseEnvelope, "specversion"},
	{"no id", "invalidNoId", `"specversion":"1.0","type":"io.idemgate.rule","source":"https://idemgate.example/rules"`, refuseEnvelope, "id"},
	{"no type", "invalidNoType", `"specversion":"1.0","id":"rule-1","source":"https://idemgate.example/rules"`, refuseEnvelope, "type"},
	{"no source", "invalidNoSource", `"specversion":"1.0","id":"rule-1","type":"io.idemgate.rule"`, refuseEnvelope, "source"},
	{"empty id", "invalidEmptyId", `"specversion":"1.0","id":"","type":"io.idemgate.rule","source":"https://idemgate.example/rules"`, refuseEnvelope, "id"},
	{"empty type", "invalidEmptyType", `"specversion":"1.0","id":"rule-1","type":"","source":"https://idemgate.example/rules"`, refuseEnvelope, "type"},
	{"empty source", "invalidEmptySource", `"specversion":"1.0","id":"rule-1","type":"io.idemgate.rule","source":""`, refuseEnvelope, "source"},
	{"empty specversion", "invalidEmptySpecVersion", `"specversion":"","id":"rule-1","type":"io.idemgate.rule","source":"https://idemgate.example/rules"`, refuseEnvelope, "specversion"},
	{"unknown specversion", "invalidUnknownSpecVersion", `"specversion":"0.9","id":"rule-1","type":"io.idemgate.rule","source":"https://idemgate.example/rules"`, refuseEnvelope, "specversion"},
	// The id must be a string.
	{"numeric id", "invalidNumericId", `"specversion":"1.0","id":42,"type":"io.idemgate.rule","source":"https://idemgate.example/rules"`, refuseEnvelope, "id"},
	{"object id", "invalidObjectId", `"specversion":"1.0","id":{"n":42},"type":"io.idemgate.rule","source":"https://idemgate.example/rules"`, refuseEnvelope, "id"},

	// Time must be an RFC 3339 timestamp.
	{"time not a timestamp", "invalidTimeGarbage", ruleAttrs + `,"time":"after lunch"`, refuseEnvelope, "time"},
	{"time without seconds", "invalidTimeToMinute", ruleAttrs + `,"time":"2026-11-30T07:00Z"`, refuseEnvelope, "time"},
	{"time offset a letter", "invalidTimeOffsetX", ruleAttrs + `,"time":"2026-11-30T07:00:00X"`, refuseEnvelope, "time"},
	{"time offset beyond 24 hours", "invalidTimeOffsetOutOfRange", ruleAttrs + `,"time":"2026-11-30T07:00:00+25:00"`, refuseEnvelope, "time"},
	{"time offset not a number", "invalidTimeOffsetNonInteger", ruleAttrs + `,"time":"2026-11-30T07:00:00+ab:00"`, refuseEnvelope, "time"},
	{"time offset hours only", "invalidTimeOffsetHourOnly", ruleAttrs + `,"time":"2026-11-30T07:00:00+08"`, refuseEnvelope, "time"},

	// Optional attributes: absent or null, never empty or malformed.
	{"datacontenttype not a media type", "invalidNonRfc2046DataContentType", ruleAttrs + `,"datacontenttype":"json"`, refuseEnvelope, "datacontenttype"},
	{"empty datacontenttype", "invalidEmptyDataContentType", ruleAttrs + `,"datacontenttype":""`, refuseEnvelope, "datacontenttype"},
	{"empty dataschema", "invalidEmptyDataSchema", ruleAttrs + `,"dataschema":""`, refuseEnvelope, "dataschema"},
	{"empty subject", "invalidEmptySubject", ruleAttrs + `,"subject":""`, refuseEnvelope, "subject"},

	// Extension names are lower-case letters and digits; values are not fractions.
	{"extension name with capitals", "invalidCapitalizedExtension", ruleAttrs + `,"TenantHint":"acme"`, refuseEnvelope, "TenantHint"},
	{"extension name with punctuation", "invalidPunctuatedExtension", ruleAttrs + `,"tenant.hint":"acme"`, refuseEnvelope, "tenant.hint"},
	{"extension value a fraction", "invalidNonIntegerExtensionValue", ruleAttrs + `,"tenanthint":2.5`, refuseEnvelope, "tenanthint"},

	// Data is data or data_base64, never both.
	{"data and data_base64 together", "invalidBothDataAndDataBase64",
		ruleAttrs + `,"data":"plain words","data_base64":"cGxhaW4gd29yZHM="`, refuseEnvelope, "data_base64"},
}

// ruleEvent is a rule case as a body; withTask adds the task data (as JSON,
// when the case declares no content type of its own) unless the case has data.
func ruleEvent(attrs string, withTask bool) []byte {
	if withTask && !strings.Contains(attrs, `"data"`) && !strings.Contains(attrs, `"data_base64"`) {
		attrs += `,"data":` + goodData
		if !strings.Contains(attrs, `"datacontenttype"`) {
			attrs += `,"datacontenttype":"application/json"`
		}
	}
	return []byte("{" + attrs + "}")
}

func TestCloudEventsRules(t *testing.T) {
	for _, r := range envelopeRules {
		t.Run(r.name, func(t *testing.T) {
			inv, err := Parse(ruleEvent(r.attrs, true))
			switch r.want {
			case acceptEvent:
				if err != nil || inv == nil || inv.Kind != KindSingle || len(inv.Tasks) != 1 {
					t.Fatalf("Parse = %+v, %v; want one accepted task", inv, err)
				}
				if task := inv.Tasks[0]; task.EventID != "rule-1" || task.TenantID != "acme" {
					t.Fatalf("task = %+v", task)
				}
				// Without task data, only the data may be refused.
				if _, err := Parse(ruleEvent(r.attrs, false)); asError(err) == nil || asError(err).Type != TypeInvalidRequest {
					t.Fatalf("without task data: %v; want %s", err, TypeInvalidRequest)
				}
			case refuseTask:
				if e := asError(err); e == nil || e.Type != TypeInvalidRequest || !IsFinal(err) {
					t.Fatalf("Parse error %v; want a FINAL %s, the envelope being valid", err, TypeInvalidRequest)
				}
			case refuseEnvelope:
				// The envelope is judged first: with or without task data.
				for _, withTask := range []bool{true, false} {
					inv, err := Parse(ruleEvent(r.attrs, withTask))
					e := asError(err)
					if e == nil || e.Type != TypeInvalidEnvelope || e.Field != r.field || !IsFinal(err) {
						t.Fatalf("task data %v: Parse error %#v; want a FINAL %s naming %q", withTask, e, TypeInvalidEnvelope, r.field)
					}
					if inv == nil || len(inv.Tasks) != 0 || len(inv.Rejected) != 1 {
						t.Fatalf("task data %v: invocation = %+v", withTask, inv)
					}
				}
			}
		})
	}
}

// batchRule is a batch body of rule events (members are attribute lists, or
// a JSON literal that is not an object when they do not start with a quote).
type batchRule struct {
	name     string
	corpusID string
	members  []string
	accepted []int // indexes of the members that become tasks
	// invalid: the batch as a whole is refused (FINAL invalid_batch) and the
	// other members are still processed.
	invalid bool
}

var batchRules = []batchRule{
	{"empty batch", "validBatchEmpty", nil, nil, false},
	{"one event", "validBatchMinimal", []string{ruleAttrs}, []int{0}, false},
	{"the same event twice", "validBatchMinimal2", []string{ruleAttrs, ruleAttrs}, []int{0, 1}, false},
	{"required and every core attribute", "validBatchMinimalAndAllCore",
		[]string{ruleAttrs, ruleAttrs + `,"dataschema":"https://idemgate.example/schema","subject":"rules","time":"2026-11-30T07:00:00Z"`}, []int{0, 1}, false},
	{"extensions of every type", "validBatchMinimalAndAllExtensionTypes",
		[]string{ruleAttrs, ruleAttrs + `,"extinteger":1,"extboolean":true,"extbinary":"aWRlbWdhdGU="`}, []int{0, 1}, false},
	{"mixed specversions", "invalidBatchMixedSpecVersions",
		[]string{ruleAttrs, strings.Replace(ruleAttrs, `"1.0"`, `"0.9"`, 1)}, []int{0}, true},
	{"a member without id", "invalidBatchContainingInvalidCloudEvent",
		[]string{`"specversion":"1.0","type":"io.idemgate.rule","source":"https://idemgate.example/rules"`}, nil, true},
	{"a member that is not an object", "invalidBatchContainingNonObject", []string{`!"not an event"`, ruleAttrs}, []int{1}, true},
}

func (r batchRule) body() []byte {
	parts := make([]string, len(r.members))
	for i, m := range r.members {
		if lit, ok := strings.CutPrefix(m, "!"); ok {
			parts[i] = lit
			continue
		}
		parts[i] = string(ruleEvent(m, true))
	}
	return []byte("[" + strings.Join(parts, ",") + "]")
}

func TestCloudEventsBatchRules(t *testing.T) {
	for _, r := range batchRules {
		t.Run(r.name, func(t *testing.T) {
			inv, err := Parse(r.body())
			if inv == nil || inv.Kind != KindBatch || inv.Size != len(r.members) {
				t.Fatalf("Parse = %+v, %v; want a batch of %d", inv, err, len(r.members))
			}
			var got []int
			for _, task := range inv.Tasks {
				got = append(got, task.Index)
			}
			if fmt.Sprint(got) != fmt.Sprint(r.accepted) {
				t.Fatalf("accepted members %v, want %v", got, r.accepted)
			}
			if !r.invalid {
				if err != nil || inv.BatchErr != nil {
					t.Fatalf("valid batch refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidBatch) || !IsFinal(err) || inv.BatchErr == nil {
				t.Fatalf("Parse error %v; want a FINAL %s", err, TypeInvalidBatch)
			}
			if len(inv.Rejected) != len(r.members)-len(r.accepted) {
				t.Fatalf("rejected %d of %d", len(inv.Rejected), len(r.members))
			}
			for _, rej := range inv.Rejected {
				if rej.Type != TypeInvalidEnvelope {
					t.Errorf("member %d rejected as %s, want %s", rej.Index, rej.Type, TypeInvalidEnvelope)
				}
			}
		})
	}
}
