// Package driver is the contract between the idempotency engine and what it
// runs on: the durable [Store] (and its maintenance side, [Maintainer]), the
// optional [FastLayer] and the [BlobStore] for large results. It also holds
// what every store must decide the same way — the claim state machine
// ([Decide], [Apply], [DecideFinish]) and the operator reset
// ([ApplyReset]) — so that stores cannot drift apart.
//
// A function uses package idempotency; only a store's implementer, or an
// operator's tool reading records, needs this package. Every Store must pass
// the conformance suite in package idemtest.
package driver
