package driver

import "errors"

// Sentinel errors a store answers. Callers test them with errors.Is.
var (
	// ErrLeaseLost: the fence moved on (another worker took over) or the
	// record left RUNNING; nothing was written.
	ErrLeaseLost = errors.New("idempotency: lease lost")
	// ErrNotFound: no record for the key.
	ErrNotFound = errors.New("idempotency: record not found")
	// ErrPayloadMismatch: the key exists with another payload hash.
	ErrPayloadMismatch = errors.New("idempotency: same key, different payload")
	// ErrNotReplayable: the record is RUNNING under a live lease, or it
	// changed since the replay read it; resetting it would race its holder.
	ErrNotReplayable = errors.New("idempotency: record is running under a live lease")
	// ErrInvalid: the request cannot be stored as it is (a field longer than
	// its column, a purge without a retention). The engine answers it FINAL
	// invalid_request: delivering it again cannot help.
	ErrInvalid = errors.New("idempotency: invalid request")
	// ErrPurged: the key's record was purged; only its tombstone remains,
	// which answers duplicates and cannot be replayed (docs/design.md §6).
	ErrPurged = errors.New("idempotency: the record was purged; only its tombstone remains")
	// ErrMalformedTombstone: a tombstone that is not a finished task record;
	// nothing is decided on it and nothing changes.
	ErrMalformedTombstone = errors.New("idempotency: malformed tombstone")
)
