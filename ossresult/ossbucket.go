package ossresult

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/aliyun/aliyun-oss-go-sdk/oss"
)

// OSSBucket is the OSS store bound to one invocation's credentials.
type OSSBucket struct {
	bucket  *oss.Bucket
	name    string
	timeout time.Duration // per HTTP attempt
	retries int
}

// Ref is oss://<bucket>/<key>.
func (b *OSSBucket) Ref(key string) string { return "oss://" + b.name + "/" + key }

// errExists: the create-once PUT met an existing object (409 FileAlreadyExists).
var errExists = errors.New("object already exists")

// PutOnce writes body under key with x-oss-forbid-overwrite. On 409 it
// compares the existing object with body (length and x-oss-hash-crc64ecma
// from a HEAD): equal is success, different is ErrConflict. A retry after a
// lost response therefore succeeds instead of conflicting.
func (b *OSSBucket) PutOnce(ctx context.Context, key string, body []byte, contentType string, m Meta) (string, error) {
	if err := checkKey(key); err != nil {
		return "", &Error{Op: "put", Key: key, Err: err}
	}
	if err := checkPut(contentType, m); err != nil {
		return "", &Error{Op: "put", Key: key, Err: err}
	}
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	sum := md5Of(body)
	opts := make([]oss.Option, 0, 7)
	opts = append(opts,
		forbidOverwrite,
		oss.ContentType(contentType),
		oss.ContentMD5(base64.StdEncoding.EncodeToString(sum[:])), // OSS rejects a body damaged in transit
	)
	if m.IdempotencyKey != "" {
		opts = append(opts, oss.Meta(metaIdempotencyKey, m.IdempotencyKey))
	}
	if m.RequestID != "" {
		opts = append(opts, oss.Meta(metaRequestID, m.RequestID))
	}
	if kind := KindOf(key); kind != "" { // for the bucket's lifecycle rules
		opts = append(opts, kindTagging(kind))
	}
	err := b.retry(ctx, func(ctx context.Context) error {
		err := b.put(ctx, key, body, opts)
		if errors.Is(err, errExists) {
			return b.compare(ctx, key, body)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	return b.Ref(key), nil
}

// The options every create-once PUT of a kind sends alike, made once
// rather than on every PUT (an option only sets its header).
var (
	forbidOverwrite = oss.ForbidOverWrite(true)
	kindTaggings    = map[string]oss.Option{KindInput: tagging(KindInput), KindAttempt: tagging(KindAttempt),
		KindApproved: tagging(KindApproved)}
)

// kindTagging is the x-oss-tagging option of an object of kind.
func kindTagging(kind string) oss.Option {
	if o, ok := kindTaggings[kind]; ok {
		return o
	}
	return tagging(kind)
}

func tagging(kind string) oss.Option {
	return oss.SetTagging(oss.Tagging{Tags: []oss.Tag{{Key: TagKind, Value: kind}}})
}

func (b *OSSBucket) put(ctx context.Context, key string, body []byte, opts []oss.Option) error {
	opts = append(opts[:len(opts):len(opts)], oss.WithContext(ctx))
	resp, err := b.bucket.Do(http.MethodPut, key, map[string]any{}, opts, bytes.NewReader(body), nil)
	if resp != nil {
		defer drain(resp)
	}
	if err != nil {
		if se, ok := errors.AsType[oss.ServiceError](err); ok && se.StatusCode == http.StatusConflict && se.Code == "FileAlreadyExists" {
			return errExists
		}
		return taggingHint(classify("put", key, resp, err), key)
	}
	// bucket.Do leaves the CRC check to us; it is the SDK's own comparison of
	// the CRC of the bytes it sent with the server's x-oss-hash-crc64ecma.
	if err := oss.CheckCRC(resp, "PutObject"); err != nil {
		return &Error{Op: "put", Key: key, Err: err, retryable: true}
	}
	return nil
}

// taggingHint names the likely cause of a tagged PUT refused AccessDenied:
// OSS authorises x-oss-tagging separately, and a role made before objects
// were tagged lacks it. (Bad signatures and keys have codes of their own.)
func taggingHint(err error, key string) error {
	if e, ok := errors.AsType[*Error](err); ok && e.Code == "AccessDenied" && KindOf(key) != "" {
		e.Err = fmt.Errorf("%w (a PUT with x-oss-tagging needs oss:PutObjectTagging besides oss:PutObject on tasks/*)", e.Err)
	}
	return err
}

// compare decides a 409: same bytes → nil, other bytes → ErrConflict.
func (b *OSSBucket) compare(ctx context.Context, key string, body []byte) error {
	resp, err := b.bucket.Do(http.MethodHead, key, map[string]any{}, []oss.Option{oss.WithContext(ctx)}, nil, nil)
	if resp != nil {
		defer drain(resp)
	}
	if err != nil {
		e := classify("put", key, resp, err)
		if errors.Is(e, ErrNotFound) { // gone since the 409 (deleted meanwhile): PUT again
			return &Error{Op: "put", Key: key, Err: errors.New("object vanished after 409"), retryable: true}
		}
		return e
	}
	h := resp.Headers
	if n, err := strconv.Atoi(h.Get("Content-Length")); err == nil && n != len(body) {
		return &Error{Op: "put", Key: key, kind: ErrConflict}
	}
	// Length and CRC-64 decide; the ETag is an MD5 only for simple uploads,
	// so it could call equal bytes different.
	crc := h.Get(oss.HTTPHeaderOssCRC64)
	if crc == "" { // no checksum to compare (an object from elsewhere): compare the bytes
		have, _, err := b.getOnce(ctx, key)
		if err != nil {
			return err
		}
		if !bytes.Equal(have, body) {
			return &Error{Op: "put", Key: key, kind: ErrConflict}
		}
		return nil
	}
	if crc != strconv.FormatUint(crc64Of(body), 10) {
		return &Error{Op: "put", Key: key, kind: ErrConflict}
	}
	return nil
}

// Get returns the object's bytes and metadata, verifying the body against
// x-oss-hash-crc64ecma.
func (b *OSSBucket) Get(ctx context.Context, key string) ([]byte, Meta, error) {
	if err := checkKey(key); err != nil {
		return nil, Meta{}, &Error{Op: "get", Key: key, Err: err}
	}
	var (
		body []byte
		m    Meta
	)
	err := b.retry(ctx, func(ctx context.Context) error {
		var err error
		body, m, err = b.getOnce(ctx, key)
		return err
	})
	if err != nil {
		return nil, Meta{}, err
	}
	return body, m, nil
}

func (b *OSSBucket) getOnce(ctx context.Context, key string) ([]byte, Meta, error) {
	resp, err := b.bucket.Do(http.MethodGet, key, map[string]any{}, []oss.Option{oss.WithContext(ctx)}, nil, nil)
	if resp != nil {
		defer drain(resp)
	}
	if err != nil {
		return nil, Meta{}, classify("get", key, resp, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, Meta{}, &Error{Op: "get", Key: key, Err: err, retryable: true}
	}
	if resp.Headers.Get(oss.HTTPHeaderOssCRC64) != "" && crc64Of(body) != resp.ServerCRC {
		return nil, Meta{}, &Error{Op: "get", Key: key, retryable: true,
			Err: fmt.Errorf("CRC-64 mismatch: got %d, server says %d", crc64Of(body), resp.ServerCRC)}
	}
	h := resp.Headers
	return body, Meta{
		IdempotencyKey: h.Get(oss.HTTPHeaderOssMetaPrefix + metaIdempotencyKey),
		RequestID:      h.Get(oss.HTTPHeaderOssMetaPrefix + metaRequestID),
	}, nil
}

// drain lets the connection be reused.
func drain(resp *oss.Response) {
	if resp.Body != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
}

// classify turns an SDK failure into an *Error. The status comes from the
// response when OSS sent one (bucket.Do keeps it even when the body is not
// OSS's XML, e.g. a gateway's 502 page).
func classify(op, key string, resp *oss.Response, err error) error {
	e := &Error{Op: op, Key: key, Err: err}
	if se, ok := errors.AsType[oss.ServiceError](err); ok {
		e.Status, e.Code, e.RequestID = se.StatusCode, se.Code, se.RequestID
	}
	if resp != nil && e.Status == 0 {
		e.Status = resp.StatusCode
		e.RequestID = resp.Headers.Get(oss.HTTPHeaderOssRequestID)
	}
	switch s := e.Status; {
	case s == 0: // no HTTP answer: network, timeout, cancelled
		e.retryable = transient(err)
	case s == http.StatusNotFound && e.Code != "NoSuchBucket":
		e.kind = ErrNotFound
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		e.kind = ErrPermission
	case s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s >= 500:
		e.retryable = true
	}
	return e
}
