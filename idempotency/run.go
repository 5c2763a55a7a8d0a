package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/idemgate/idemgate/idempotency/driver"
)

// WithBlobStore lets [Run] keep results larger than the record holds
// ([driver.MaxResultRef]) in b, the record naming them; without one such a result
// is refused FINAL (result_too_large), before anything could run again.
func WithBlobStore(b driver.BlobStore) Option { return func(o *options) { o.blobs = b } }

// Run is [Engine.Do] for a typed result: fn's T is stored as JSON and every
// delivery, the first included, gets the T that JSON decodes back (numbers
// in an any as json.Number, exact), zero values and empty results included.
// A T that does not decode back (an interface field) is FINAL
// result_unencodable before it is stored, so no repeat meets it. A result
// too large for the record is kept in the blob store ([WithBlobStore])
// under a key of its own per fence, so a stale worker's copy never replaces
// the winner's. Errors are Do's; a stored result that no longer decodes
// into T is a FINAL result_unreadable error.
func Run[T any](ctx context.Context, e *Engine, req ClaimRequest, fn func(ctx context.Context, l *Lease) (T, error)) (T, Outcome, error) {
	var fresh T
	ran := false
	out, err := e.Do(ctx, req, func(ctx context.Context, l *Lease) (string, error) {
		v, err := fn(ctx, l)
		if err != nil {
			return "", err
		}
		ref, back, err := encodeResult(ctx, e, l, v)
		fresh, ran = back, err == nil
		return ref, err
	})
	if err != nil || out.Status != driver.StatusSucceeded {
		var zero T
		return zero, out, err
	}
	if ran { // fn's result as the record gives it back
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

// encodeResult is v's reference and the T it decodes back to: what every
// repeat will get, so the first delivery gets it too.
func encodeResult[T any](ctx context.Context, e *Engine, l *Lease, v T) (string, T, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return "", v, Final("result_unencodable", fmt.Errorf("result is not JSON: %w", err))
	}
	back, err := unmarshal[T](data)
	if err != nil {
		return "", v, Final("result_unencodable", fmt.Errorf("result does not decode back into %T: %w", v, err))
	}
	// Inline only as valid UTF-8, which a record holds on every store; a
	// json.RawMessage or a Marshaler may write any bytes, which a blob holds.
	if len(inlinePrefix)+len(data) <= driver.MaxResultRef && utf8.Valid(data) { // no copy of a large result
		return inlinePrefix + string(data), back, nil
	}
	if e.o.blobs == nil && !utf8.Valid(data) {
		return "", v, Final("result_unencodable", errors.New("the result's JSON is not valid UTF-8 (a json.RawMessage or "+
			"a Marshaler wrote invalid bytes), which a record cannot hold: write valid UTF-8, or give the engine a blob store"))
	}
	if e.o.blobs == nil {
		return "", v, Final(resultTooLargeCode, fmt.Errorf("result of %d bytes; a record holds at most %d (give the engine a blob store)",
			len(data), driver.MaxResultRef))
	}
	key := blobKey(l.Key, l.Fence)
	if err := e.o.blobs.Put(ctx, key, data); err != nil {
		return "", v, Retryable("blob_unavailable", fmt.Errorf("store the result: %w", err))
	}
	return blobPrefix + key, back, nil
}

// blobKey names the object of K's result under fence: K's hash, not K,
// because a valid K ("a\\b", "x/../y", "a/") need not be a valid object
// key, and a store refusing it on every try would run fn on every try.
func blobKey(k string, fence int64) string {
	sum := sha256.Sum256([]byte(k))
	return fmt.Sprintf("idempotency-results/%s/fence-%d.json", hex.EncodeToString(sum[:]), fence)
}

// unmarshal decodes one JSON value into T, numbers in an any as
// json.Number: a float64 would turn 9007199254740993 into its neighbour.
func unmarshal[T any](data []byte) (T, error) {
	var v T
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return v, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return v, errors.New("data after the value")
	}
	return v, nil
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
	v, err := unmarshal[T](data)
	if err != nil {
		return v, Final("result_unreadable", fmt.Errorf("the stored result does not decode: %w", err))
	}
	return v, nil
}
