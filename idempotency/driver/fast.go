package driver

import (
	"context"
	"errors"
	"time"
)

// FastLayer is the optional first tier (Redis). It answers duplicates without
// touching the Store, but it only mirrors what the Store committed or a live
// claim: the engine treats every error as "go on with the Store alone".
type FastLayer interface {
	// Claim claims or reads key, in one round trip where it can.
	// try follows ClaimRequest.Try.
	Claim(ctx context.Context, key, owner string, try int, payloadHash string, lease time.Duration) (FastAnswer, error)
	// Publish mirrors a committed record, compare-and-set on its fence: an
	// entry with a higher fence, a terminal one with the same fence, and
	// another owner's unconfirmed registration at the same fence against a
	// RUNNING rec (older news than the registration, whose claimant's Store
	// answer comes at a higher fence) stay; the idemtest suite checks all three
	// (FastLatePublishOverRegistration).
	Publish(ctx context.Context, rec Record, leaseLeft time.Duration) error
	// TakeFinish mirrors a finish taken over (Store.ClaimFinish): a
	// SUCCEEDED entry of a lower fence names owner, at try, as its holder at
	// fence, so that its answers name the request whose finish it is now
	// (idempotency.Outcome.Holder), and a late publish of the previous
	// holder's fence stays out. Compare-and-set on the fence: no entry, any
	// other state and a fence as high stay as they are.
	TakeFinish(ctx context.Context, key, owner string, try int, fence int64) error
	// Release drops owner's claim when the Store never confirmed it (a
	// layer that registers no claim before the Store's has nothing to drop).
	Release(ctx context.Context, key, owner string) error
	// Forget drops the entry (replay resets the durable record first).
	Forget(ctx context.Context, key string) error
}

// FastVerdict is the fast layer's explicit answer; never empty.
type FastVerdict string

const (
	FastFirst       FastVerdict = "FIRST"        // no entry; the caller may go on to the Store
	FastRepeatSame  FastVerdict = "REPEAT_SAME"  // same owner retrying: go on to the Store
	FastRepeatOther FastVerdict = "REPEAT_OTHER" // another owner's live lease: in progress
	FastStale       FastVerdict = "STALE"        // expired or retryable entry: the caller may try the Store
	FastMismatch    FastVerdict = "MISMATCH"     // other payload hash: the Store confirms
	FastSucceeded   FastVerdict = "SUCCEEDED"    // cached terminal state
	FastFailedFinal FastVerdict = "FAILED_FINAL" // cached terminal state
)

// FastAnswer carries the verdict and, for REPEAT_OTHER and the terminal
// verdicts, the mirrored part of the record.
type FastAnswer struct {
	Verdict   FastVerdict
	Record    Record
	LeaseLeft time.Duration
	// Unconfirmed (REPEAT_OTHER): the entry's owner registered its claim
	// (redisfast: STALE) and nothing since came from the Store (Publish). The
	// engine also takes a fence of 0 as unconfirmed (the Store's start at 1),
	// so a layer that cannot mark entries still gets that case right.
	Unconfirmed bool
}

// FastReplicated is a FastLayer whose entries live on replicas too, any of
// which a failover may promote with what it had received (redisfast on a
// Redis primary with replicas). Redis replicates asynchronously: an entry
// a reset replaced on the primary may still be the old final state on a
// replica, which, promoted, would answer it (docs/design.md §7).
type FastReplicated interface {
	// PublishReplicated is Publish (with no lease left), returning once
	// every replica connected to the primary acknowledged the write;
	// ErrFastReplicaBehind when one did not within the layer's bound.
	PublishReplicated(ctx context.Context, rec Record) error
}

// ErrFastReplicaBehind: a replica of the fast layer did not acknowledge a
// write within its bound.
var ErrFastReplicaBehind = errors.New("a replica of the fast layer did not acknowledge the write")
