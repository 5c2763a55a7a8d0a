package ossresult

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"

	"github.com/aliyun/aliyun-oss-go-sdk/oss"
)

// Deletion is for operators only (main forget): the function itself never
// deletes, and its role may not (docs/deploy.md). A missing object is not
// an error: a forget that stopped half-way runs again.

// Delete removes key's object: the body first, so it stops being visible,
// then the metadata that claimed the key.
func (l *Local) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return &Error{Op: "delete", Key: key, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return &Error{Op: "delete", Key: key, Err: err, retryable: true}
	}
	obj := l.path(key)
	for _, p := range []string{obj, obj + metaSuffix} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return localErr("delete", key, err)
		}
	}
	if err := syncDir(filepath.Dir(obj)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return localErr("delete", key, err)
	}
	return nil
}

// Delete removes key's object (DeleteObject answers 204 whether or not it
// existed); the caller's credentials need oss:DeleteObject on it.
func (b *OSSBucket) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return &Error{Op: "delete", Key: key, Err: err}
	}
	return b.retry(ctx, func(ctx context.Context) error {
		resp, err := b.bucket.Do(http.MethodDelete, key, map[string]any{}, []oss.Option{oss.WithContext(ctx)}, nil, nil)
		if resp != nil {
			defer drain(resp)
		}
		if err != nil {
			if e := classify("delete", key, resp, err); !errors.Is(e, ErrNotFound) {
				return e
			}
		}
		return nil
	})
}
