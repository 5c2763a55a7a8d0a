package idempotency

import "github.com/idemgate/idemgate/idempotency/driver"

// ClaimRequest asks for the lease on a business key: Key (derive it with
// package keys), PayloadHash (a duplicate with another hash is refused),
// Owner (the delivery, e.g. the FC request id) and Try (its retry count, -1
// unknown). Lease and MaxAttempts default to the engine's options; Meta is
// what the record keeps about the action. The remaining fields serve the
// FC template's pipeline (see their documentation in package driver).
type ClaimRequest = driver.ClaimRequest

// Decision says how a claim was answered (the "decision" of an outcome).
// Owned decisions gave the caller the lease; every decision but FIRST
// answers an earlier delivery's work.
type Decision = driver.Decision

// The decisions.
const (
	DecisionFirst           = driver.DecisionFirst           // the key was new: the caller runs it
	DecisionRepeatSame      = driver.DecisionRepeatSame      // the same delivery retried: it runs on
	DecisionTakeover        = driver.DecisionTakeover        // an expired lease or a retryable failure: the caller runs it again
	DecisionRepeatOther     = driver.DecisionRepeatOther     // another delivery holds a live lease: in progress
	DecisionRepeatDone      = driver.DecisionRepeatDone      // finished: the stored outcome answers
	DecisionPayloadMismatch = driver.DecisionPayloadMismatch // the key holds another payload: refused
	// DecisionDisabled: [WithDisabled] ran the function without claiming.
	DecisionDisabled Decision = "DISABLED"
)
