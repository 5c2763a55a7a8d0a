// Package handler is the function's task pipeline: an FC invocation body in,
// an outcome out. It parses the event (package event), derives the business
// key (idempotency/keys), claims it (idempotency), runs the task type's named
// steps once per key, records the result with the fence, publishes the
// approved object and notifies. The FC adapters (customruntime, go1) only
// translate the platform's protocol to [Pipeline.Handle].
package handler
