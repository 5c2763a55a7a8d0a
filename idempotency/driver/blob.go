package driver

import "context"

// BlobStore keeps results too large for the record (see idempotency.WithBlobStore).
// Put is create-once: writing the same key again with the same bytes
// succeeds, with other bytes fails. ossresult.Blobs adapts the OSS and
// local-directory result stores.
type BlobStore interface {
	Put(ctx context.Context, key string, data []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
}
