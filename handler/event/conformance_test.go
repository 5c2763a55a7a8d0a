package event

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// The CloudEvents JSON-format conformance corpus is an extra check kept
// outside the repository (the maintainers' shared corpus beside the clone):
// users' clones do not have it, and TestCloudEventsRules covers its rules.
// IDEMGATE_CONFORMANCE_DIR names it explicitly; then it must be there (.ci/run
// sets it when the corpus is present, so that a wrong path cannot skip).
var corpusDir = func() string {
	if d := os.Getenv("IDEMGATE_CONFORMANCE_DIR"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "..", "shared", "conformance", "cloudevents")
}()

type corpusFile struct {
	TestType string `json:"testType"`
	Tests    []struct {
		ID                        string            `json:"id"`
		Event                     json.RawMessage   `json:"event"`
		Batch                     []json.RawMessage `json:"batch"`
		SampleExtensionAttributes bool              `json:"sampleExtensionAttributes"`
		ExtensionConstraints      bool              `json:"extensionConstraints"`
	} `json:"tests"`
}

// requireCorpus skips, saying why, when the corpus is absent and was not
// asked for; a corpus named by IDEMGATE_CONFORMANCE_DIR must be there.
func requireCorpus(t *testing.T) {
	t.Helper()
	_, err := os.Stat(corpusDir)
	if err == nil {
		return
	}
	if errors.Is(err, fs.ErrNotExist) && os.Getenv("IDEMGATE_CONFORMANCE_DIR") == "" {
		t.Skipf("CloudEvents conformance corpus not present at %s (an extra check outside the repository): "+
			"its rules are still tested by TestCloudEventsRules and TestCloudEventsBatchRules; "+
			"set IDEMGATE_CONFORMANCE_DIR to require it", corpusDir)
	}
	t.Fatalf("conformance corpus %s: %v", corpusDir, err)
}

func loadCorpus(t *testing.T, name, wantType string) corpusFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(corpusDir, name))
	if err != nil {
		t.Fatal(err)
	}
	var f corpusFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if f.TestType != wantType || len(f.Tests) == 0 {
		t.Fatalf("%s: testType %q with %d tests, want %q with some", name, f.TestType, len(f.Tests), wantType)
	}
	return f
}

// corpusTaskData is the task given to corpus events that have no data of
// their own, as the corpus README asks.
const corpusTaskData = `{"tenant_id":"conformance","task_type":"summarize","operation":"summarize","input":{"content":"corpus"}}`

// withTaskData adds corpusTaskData and datacontenttype application/json to an
// event object without data; it reports whether the event had data of its
// own. Non-objects are returned unchanged: they are judged as they are.
//
// In an invalid case a datacontenttype the case already has is kept: it may be
// the very defect under test (invalidNonRfc2046DataContentType,
// invalidEmptyDataContentType), and injection must not repair it. In a valid
// case it is replaced, because the injected data is JSON (validAllCoreAttributes
// says text/plain but has no data).
func withTaskData(t *testing.T, raw json.RawMessage, keepContentType bool) (json.RawMessage, bool) {
	t.Helper()
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return raw, false
	}
	_, hasData := m["data"]
	_, hasB64 := m["data_base64"]
	if hasData || hasB64 {
		return raw, true
	}
	m["data"] = json.RawMessage(corpusTaskData)
	if _, has := m["datacontenttype"]; !has || !keepContentType {
		m["datacontenttype"] = json.RawMessage(`"application/json"`)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out, false
}

func TestConformanceCorpus(t *testing.T) {
	requireCorpus(t)

	// Every corpus case has its rule in this package's own tables, so that a
	// clone without the corpus tests the same rules.
	t.Run("every case has a rule here", func(t *testing.T) {
		have := map[string]bool{}
		for _, r := range envelopeRules {
			have[r.corpusID] = true
		}
		for _, r := range batchRules {
			have[r.corpusID] = true
		}
		for _, f := range [][2]string{{"valid-events.json", "ValidSingleEvent"}, {"invalid-events.json", "InvalidSingleEvent"},
			{"valid-batches.json", "ValidBatch"}, {"invalid-batches.json", "InvalidBatch"}} {
			for _, tc := range loadCorpus(t, f[0], f[1]).Tests {
				if !have[tc.ID] {
					t.Errorf("%s: corpus case %s has no rule in cloudevents_rules_test.go", f[0], tc.ID)
				}
			}
		}
	})

	t.Run("valid-events", func(t *testing.T) {
		for _, tc := range loadCorpus(t, "valid-events.json", "ValidSingleEvent").Tests {
			t.Run(tc.ID, func(t *testing.T) {
				// Judged on its own, without task data, the envelope must pass.
				if _, err := Parse(tc.Event); err != nil && asError(err).Type != TypeInvalidRequest {
					t.Fatalf("envelope rejected without task data: %v", err)
				}
				body, ownData := withTaskData(t, tc.Event, false)
				inv, err := Parse(body)
				if inv == nil || inv.Kind != KindSingle {
					t.Fatalf("Parse = %+v, %v; want a single event", inv, err)
				}
				if ownData {
					// The envelope must pass; the case's own non-task data may
					// then be refused as a task, but never as an envelope.
					if err != nil && asError(err).Type != TypeInvalidRequest {
						t.Fatalf("envelope rejected: %v", err)
					}
					return
				}
				if err != nil {
					t.Fatalf("valid event rejected: %v", err)
				}
				if got := inv.Tasks[0]; got.TenantID != "conformance" || got.EventID == "" || got.EventSource == "" {
					t.Fatalf("task = %+v", got)
				}
			})
		}
	})

	t.Run("invalid-events", func(t *testing.T) {
		for _, tc := range loadCorpus(t, "invalid-events.json", "InvalidSingleEvent").Tests {
			t.Run(tc.ID, func(t *testing.T) {
				// Without task data the rejection must already be the envelope's.
				if _, err := Parse(tc.Event); asError(err) == nil || asError(err).Type != TypeInvalidEnvelope {
					t.Fatalf("without task data: %v; want %s", err, TypeInvalidEnvelope)
				}
				body, _ := withTaskData(t, tc.Event, true)
				inv, err := Parse(body)
				e := asError(err)
				if e == nil || e.Type != TypeInvalidEnvelope || !IsFinal(err) {
					t.Fatalf("Parse = %+v, %v; want a FINAL %s", inv, err, TypeInvalidEnvelope)
				}
				if inv == nil || len(inv.Tasks) != 0 || len(inv.Rejected) != 1 {
					t.Fatalf("invocation = %+v", inv)
				}
				t.Logf("rejected: %v", err)
			})
		}
	})

	t.Run("valid-batches", func(t *testing.T) {
		for _, tc := range loadCorpus(t, "valid-batches.json", "ValidBatch").Tests {
			t.Run(tc.ID, func(t *testing.T) {
				body := batchWithTaskData(t, tc.Batch, false)
				inv, err := Parse(body)
				if err != nil || inv == nil || inv.Kind != KindBatch {
					t.Fatalf("Parse = %+v, %v; want an accepted batch", inv, err)
				}
				if inv.Size != len(tc.Batch) || len(inv.Tasks) != len(tc.Batch) || inv.BatchErr != nil {
					t.Fatalf("size %d, %d tasks, batch error %v; want %d accepted", inv.Size, len(inv.Tasks), inv.BatchErr, len(tc.Batch))
				}
				for i, task := range inv.Tasks {
					if task.Index != i {
						t.Errorf("task %d has Index %d", i, task.Index)
					}
				}
			})
		}
	})

	t.Run("invalid-batches", func(t *testing.T) {
		for _, tc := range loadCorpus(t, "invalid-batches.json", "InvalidBatch").Tests {
			t.Run(tc.ID, func(t *testing.T) {
				body := batchWithTaskData(t, tc.Batch, true)
				inv, err := Parse(body)
				if !errors.Is(err, ErrInvalidBatch) || !IsFinal(err) {
					t.Fatalf("Parse error = %v; want a FINAL %s", err, TypeInvalidBatch)
				}
				if inv == nil || inv.Kind != KindBatch || inv.BatchErr == nil || error(inv.BatchErr) != err {
					t.Fatalf("invocation = %+v", inv)
				}
				if len(inv.Tasks)+len(inv.Rejected) != len(tc.Batch) || len(inv.Rejected) == 0 {
					t.Fatalf("%d tasks + %d rejected, batch of %d", len(inv.Tasks), len(inv.Rejected), len(tc.Batch))
				}
				for _, r := range inv.Rejected {
					if r.Type != TypeInvalidEnvelope || r.Index < 0 || r.Index >= len(tc.Batch) {
						t.Errorf("member error %+v", r)
					}
				}
				t.Logf("batch: %v; %d valid member(s) kept", err, len(inv.Tasks))
			})
		}
	})
}

func batchWithTaskData(t *testing.T, batch []json.RawMessage, keepContentType bool) []byte {
	t.Helper()
	members := make([]json.RawMessage, len(batch))
	for i, m := range batch {
		members[i], _ = withTaskData(t, m, keepContentType)
	}
	b, err := json.Marshal(members)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
