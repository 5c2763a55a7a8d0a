package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/idemgate/idemgate/idempotency/driver"
)

// WithBlobStore lets [Run] keep results larger than the record holds
// ([driver.MaxResultRef]) in b, the record naming them; without one such a result
// is refused FINAL (result_too_large), before anything could run again.
func WithBlobStore(b driver.BlobStore) Option { return func(o *options) { o.blobs = b } }

// Run is [Engine.Do] for a typed result: fn's T is stored as JSON and every
// later delivery gets the same T back, zero values and empty results
// included. A result too large for the record is kept in the blob store
// ([WithBlobStore]) under a key of its own per fence, so a stale worker's
// copy never replaces the winner's. Errors are Do's; a stored result that
// no longer decodes into T is a FINAL result_unreadable error.
func Run[T any](ctx context.Context, e *Engine, req ClaimRequest, fn func(ctx context.Context, l *Lease) (T, error)) (T, Outcome, error) {
	var fresh T
	ran := false
	out, err := e.Do(ctx, req, func(ctx context.Context, l *Lease) (string, error) {
		v, err := fn(ctx, l)
		if err != nil {
			return "", err
		}
		fresh, ran = v, true
		return e.encodeResult(ctx, l, v)
	})
	if err != nil || out.Status != driver.StatusSucceeded {
		var zero T
		return zero, out, err
	}
	if ran { // fn's own result is the one recorded
		return fresh, out, nil
	}
	v, err := decodeResult[T](ctx, e, out.ResultRef)
	return v, out, err
}

// Result references Run writes: the JSON itself, or the blob holding it.
const (
	inlinePrefix = "json:"
	blobPrefix   = "blob:"
)

func (e *Engine) encodeResult(ctx context.Context, l *Lease, v any) (string, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return "", Final("result_unencodable", fmt.Errorf("result is not JSON: %w", err))
	}
	if ref := inlinePrefix + string(data); len(ref) <= driver.MaxResultRef {
		return ref, nil
	}
	if e.o.blobs == nil {
		return "", Final(resultTooLargeCode, fmt.Errorf("result of %d bytes; a record holds at most %d (give the engine a blob store)",
			len(data), driver.MaxResultRef))
	}
	key := fmt.Sprintf("idempotency-results/%s/fence-%d.json", l.Key, l.Fence)
	if err := e.o.blobs.Put(ctx, key, data); err != nil {
		return "", Retryable("blob_unavailable", fmt.Errorf("store the result: %w", err))
	}
	return blobPrefix + key, nil
}

func decodeResult[T any](ctx context.Context, e *Engine, ref string) (T, error) {
	var v T
	var data []byte
	switch {
	case strings.HasPrefix(ref, inlinePrefix):
		data = []byte(ref[len(inlinePrefix):])
	case strings.HasPrefix(ref, blobPrefix) && e.o.blobs != nil:
		b, err := e.o.blobs.Get(ctx, ref[len(blobPrefix):])
		if err != nil {
			return v, Retryable("blob_unavailable", fmt.Errorf("read the stored result: %w", err))
		}
		data = b
	default:
		return v, Final("result_unreadable", errors.New("the stored result was not written by Run (or the blob store is missing)"))
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return v, Final("result_unreadable", fmt.Errorf("the stored result does not decode: %w", err))
	}
	return v, nil
}
