// Package idempotency makes one business action produce at most one effective
// result, however often and however concurrently it is delivered.
//
// It is usable alone by any Function Compute (or other) Go function. The
// high-level entry points are [Engine.Do] and its typed form [Run]: they
// claim a business key, run the caller's function under a fenced lease,
// record the outcome, and answer later deliveries of the same key with the
// stored outcome instead of running again. The lower-level operations
// ([Engine.Claim], [Lease.Renew], [Lease.Step], [Lease.Complete],
// [Lease.Fail]) are there for pipelines that need more control.
//
// Correctness rests on a durable store (package mysqlstore in production,
// boltstore for local runs): a unique key arbitrates the first claim, and
// every later transition is a conditional update on the fence, so a worker
// that lost its lease can never overwrite the winner. An optional fast layer
// (package redisfast) answers duplicates in one round trip; losing it loses
// no correctness.
//
// This package is what a function writes against. What a store or fast
// layer implements — the record, the claim state machine, the maintenance
// contract — is package driver, as database/sql/driver is to database/sql;
// package idemtest is the conformance suite every store must pass.
// docs/library.md is the guide.
package idempotency
