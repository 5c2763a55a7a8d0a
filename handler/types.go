package handler

import (
	"context"

	"github.com/idemgate/idemgate/handler/llm"
	"github.com/idemgate/idemgate/ossresult"
)

// Meta is what the FC platform says about one invocation (request headers in
// the custom runtime, fccontext in go1).
type Meta struct {
	RequestID    string
	Credentials  Credentials
	FunctionName string
	Region       string
	AccountID    string
	RetryCount   int // -1 when the platform did not say

	// TraceParent is the invocation's W3C traceparent as received ("" when
	// none): the custom runtime's header, the go1 runtime's span context.
	TraceParent string
}

// Credentials are the invocation's STS credentials (empty in local runs).
type Credentials struct {
	AccessKeyID     string
	AccessKeySecret string
	SecurityToken   string
}

// ResultStore keeps result objects create-once (ossresult.Local, OSS buckets).
type ResultStore interface {
	PutOnce(ctx context.Context, key string, body []byte, contentType string, m ossresult.Meta) (string, error)
	Get(ctx context.Context, key string) ([]byte, ossresult.Meta, error)
	Ref(key string) string
}

// ResultsFor picks the result store for an invocation: OSS binds the
// invocation's credentials, the local store ignores them.
type ResultsFor func(ctx context.Context, c Credentials) (ResultStore, error)

// Model is the LLM (handler/llm's HTTP client or its offline model).
type Model interface {
	Complete(ctx context.Context, r llm.Request) (llm.Response, error)
}

// Notifier posts the outcome to the task's notify URL.
type Notifier interface {
	Post(ctx context.Context, url, key, requestID string, body []byte) error
}
