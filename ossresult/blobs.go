package ossresult

import (
	"context"

	"github.com/idemgate/idemgate/idempotency/driver"
)

// putGetter is what Blobs needs of a result store: Local and OSSBucket.
type putGetter interface {
	PutOnce(ctx context.Context, key string, body []byte, contentType string, m Meta) (string, error)
	Get(ctx context.Context, key string) ([]byte, Meta, error)
}

// Blobs adapts a result store (the local directory store, or an OSS bucket
// bound to credentials) to the engine's blob store, so idempotency.Run keeps
// results too large for a record there (idempotency.WithBlobStore). Objects
// are create-once: the same bytes again succeed, other bytes conflict.
func Blobs(s putGetter) driver.BlobStore { return blobs{s} }

type blobs struct{ s putGetter }

func (b blobs) Put(ctx context.Context, key string, data []byte) error {
	_, err := b.s.PutOnce(ctx, key, data, "application/json", Meta{})
	return err
}

func (b blobs) Get(ctx context.Context, key string) ([]byte, error) {
	data, _, err := b.s.Get(ctx, key)
	return data, err
}
