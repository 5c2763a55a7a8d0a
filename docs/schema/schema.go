// Package schema is docs/schema as code: the JSON Schemas (draft 2020-12)
// docs/events.md describes, embedded in the binary and loaded together by
// their $id, with no file system or network involved, for `main validate`
// and for the tests that hold them to the function (schema_test.go).
package schema

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/idemgate/idemgate/idempotency/jcs"
)

//go:embed *.schema.json
var files embed.FS

// Base is where the files are published; every file's $id is Base plus its
// name, so that the relative $refs between them resolve to each other.
const Base = "https://raw.githubusercontent.com/idemgate/idemgate/main/docs/schema/"

// The schema files.
const (
	TaskEvent  = "task-event.schema.json" // a task event's data
	CloudEvent = "cloudevent.schema.json" // one task CloudEvent
	Batch      = "batch.schema.json"      // an event-streaming batch
)

// Compile compiles the named file with every file of docs/schema loaded as
// a resource under its $id. A file whose $id is not Base plus its name is
// an error: a standard validator could not load the files together.
func Compile(name string) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	names, err := fs.Glob(files, "*.schema.json")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		b, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("schema: %s: %w", n, err)
		}
		if id, _ := doc.(map[string]any)["$id"].(string); id != Base+n {
			return nil, fmt.Errorf("schema: %s: $id is %q, want %q", n, id, Base+n)
		}
		if err := c.AddResource(Base+n, doc); err != nil {
			return nil, fmt.Errorf("schema: %s: %w", n, err)
		}
	}
	return c.Compile(Base + name)
}

var (
	taskOnce sync.Once
	task     *jsonschema.Schema
	taskErr  error
)

// ValidateData checks a task event's data (JSON text) against
// task-event.schema.json: nil when the schema accepts it.
//
// A number the function refuses (docs/design.md §4: one a double cannot
// hold) is not judged: JSON Schema has nothing to say of it, and the
// validator reads numbers as big.Rat, which cannot read 1e99999999 (it
// then dereferences nil).
func ValidateData(data []byte) error {
	taskOnce.Do(func() { task, taskErr = Compile(TaskEvent) })
	if taskErr != nil {
		return taskErr
	}
	if err := jcs.CheckNumbers(data); err != nil {
		return fmt.Errorf("schema: not judged: %w", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("schema: the data is not JSON: %w", err)
	}
	return task.Validate(v)
}
