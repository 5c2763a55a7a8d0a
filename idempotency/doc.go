// Package idempotency makes one business action produce at most one effective
// result, however often and however concurrently it is delivered.
//
// It is usable alone by any Function Compute (or other) Go function. The
// high-level entry point is [Engine.Do]: it claims a business key, runs the
// caller's function under a fenced lease, records the outcome, and answers
// later deliveries of the same key with the stored outcome instead of running
// again. The lower-level operations ([Engine.Claim], [Lease.Renew],
// [Lease.Complete], [Lease.Fail], [Lease.Step]) are there for pipelines that
// need more control.
//
// Correctness rests on a durable [Store] (MySQL in production, an embedded
// file store for local runs): a unique key arbitrates the first claim, and every
// later transition is a conditional update on the fence, so a worker that lost
// its lease can never overwrite the winner. An optional [FastLayer] (Redis)
// answers duplicates in one round trip; losing it loses no correctness.
package idempotency
