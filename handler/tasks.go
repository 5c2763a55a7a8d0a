package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"sync"
	"unicode/utf8"

	"github.com/idemgate/idemgate/handler/event"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/keys"
	"github.com/idemgate/idemgate/ossresult"
)

// TaskType is the template's extension point: a named sequence of steps.
// Each step's result is recorded once per business key; after a failure the
// task resumes from the first step that has not completed (a step cut off
// before its checkpoint runs again: docs/library.md, "Steps, leases and
// finishes"). The last step returns
// the object key of the attempt output (see [StepInput.SaveOutput]); its
// "text" becomes approved/result.md.
type TaskType struct {
	Name  string
	Steps []Step
}

// Step is one named unit of work. The result of every step but the last is
// checkpointed on the task's record (keep it small: an object key, an ID, a
// short value; at most driver.MaxResultRef bytes) and handed to later
// steps in StepInput.Prior; a retried task resumes after the last
// checkpoint. The last step saves the attempt output (its object is its
// checkpoint, found again by StepInput.PriorOutput) and returns its key.
type Step struct {
	Name string
	Run  func(ctx context.Context, in *StepInput) (string, error)
}

// StepInput is what a step sees.
type StepInput struct {
	Task      *event.Task
	Key       string // the business key K
	RequestID string // the upstream request id (or the fingerprint)
	Attempt   int
	Prior     map[string]string // results of the steps before this one
	Model     Model
	Results   ResultStore

	saved   *savedOutput // the output this attempt saved, for the publish that follows
	payload keys.Derived // the key's payload hashes, stamped on the output (this life's mark)
}

// savedOutput is the object SaveOutput wrote and its text: publishing it
// needs no read back.
type savedOutput struct{ key, text string }

// Output is the attempt output object (attempt-NNN/output.json).
type Output struct {
	IdempotencyKey string          `json:"idempotency_key"`
	RequestID      string          `json:"request_id"`
	TaskType       string          `json:"task_type"`
	Attempt        int             `json:"attempt"`
	Model          string          `json:"model,omitempty"`
	Offline        bool            `json:"offline,omitempty"`
	Text           string          `json:"text"`
	Data           json.RawMessage `json:"data,omitempty"`
	// PayloadHash marks the life of the key that wrote the output: an
	// output of another payload (a previous life, after its tombstone went)
	// is never taken as this life's (docs/design.md §8).
	PayloadHash string `json:"payload_hash,omitempty"`
}

// SaveOutput writes the attempt's immutable output object and returns its
// key, which the last step returns.
func (in *StepInput) SaveOutput(ctx context.Context, out Output) (string, error) {
	out.IdempotencyKey, out.RequestID, out.TaskType, out.Attempt = in.Key, in.RequestID, in.Task.TaskType, in.Attempt
	out.PayloadHash = in.payload.PayloadHash
	body, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode output: %w", err)
	}
	key, err := ossresult.AttemptKey(in.Key, in.Attempt)
	if err != nil {
		return "", idempotency.Final("invalid_request", err)
	}
	if _, err := in.Results.PutOnce(ctx, key, body, "application/json", ossresult.Meta{IdempotencyKey: in.Key, RequestID: in.RequestID}); err != nil {
		return "", classifyResultErr("save output", err)
	}
	if in.saved != nil && utf8.ValidString(out.Text) { // else the object holds U+FFFD for it: read it back
		*in.saved = savedOutput{key: key, text: out.Text}
	}
	return key, nil
}

// PriorOutput finds the output object of an earlier attempt of this key, if
// one was saved: a worker that died (or timed out) after the model answered
// leaves it behind, and the retry should use it instead of paying for the
// model again.
func (in *StepInput) PriorOutput(ctx context.Context) (string, bool, error) {
	key, err := priorOutput(ctx, in.Results, in.Key, in.payload, in.Attempt-1)
	return key, key != "", err
}

// priorOutput is the key of the newest output of attempts n down to 1 that
// this life of the key saved ("" when none): an output stamped with another
// payload hash, or with none (written before outputs were stamped), may be a
// previous life's, left in the bucket after the purge, and is passed over.
func priorOutput(ctx context.Context, rs ResultStore, k string, d keys.Derived, n int) (string, error) {
	for ; n >= 1; n-- {
		key, err := ossresult.AttemptKey(k, n)
		if err != nil {
			return "", idempotency.Final("invalid_request", err)
		}
		body, _, err := rs.Get(ctx, key)
		switch {
		case err == nil:
			var out Output
			if json.Unmarshal(body, &out) == nil && driver.SamePayload(out.PayloadHash, d.PayloadHash, d.LegacyPayloadHash) {
				return key, nil
			}
		case !errors.Is(err, ossresult.ErrNotFound):
			return "", classifyResultErr("read prior output", err)
		}
	}
	return "", nil
}

// Registry maps task_type to its TaskType. Safe for concurrent reads after
// registration at start-up.
type Registry struct {
	mu    sync.RWMutex
	types map[string]TaskType
}

var stepName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)

// Register adds t. Names must be unique; step names are short snake_case
// (they name the checkpoints on the task's record).
func (r *Registry) Register(t TaskType) error {
	if !stepName.MatchString(t.Name) || len(t.Steps) == 0 {
		return fmt.Errorf("task type %q: want a snake_case name and at least one step", t.Name)
	}
	seen := map[string]bool{}
	for _, s := range t.Steps {
		if !stepName.MatchString(s.Name) || seen[s.Name] || s.Run == nil {
			return fmt.Errorf("task type %s: bad or repeated step %q", t.Name, s.Name)
		}
		seen[s.Name] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.types == nil {
		r.types = map[string]TaskType{}
	}
	if _, dup := r.types[t.Name]; dup {
		return fmt.Errorf("task type %s registered twice", t.Name)
	}
	r.types[t.Name] = t
	return nil
}

// MustRegister is Register for init-time wiring.
func (r *Registry) MustRegister(t TaskType) {
	if err := r.Register(t); err != nil {
		panic(err)
	}
}

// Get looks a task type up.
func (r *Registry) Get(name string) (TaskType, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.types[name]
	return t, ok
}

// Names lists the registered task types.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var n []string
	for k := range r.types {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Builtin returns a registry with the template's task types.
func Builtin() *Registry {
	r := &Registry{}
	r.MustRegister(Summarize)
	r.MustRegister(Keywords)
	return r
}
