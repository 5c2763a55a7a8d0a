package ossresult

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// metaSuffix names the metadata file kept beside each local object.
const metaSuffix = ".meta.json"

// Local is a create-once object store in a directory, with the semantics of
// the OSS store. Safe for concurrent use by goroutines and processes.
//
// PutOnce first claims the key by linking a complete metadata file (which
// records the body's SHA-256) to <object>.meta.json, then links the complete
// body to <object>. link(2) fails if the target exists, so exactly one
// content can claim a key, and a body is visible only whole and only after
// its metadata. A writer whose metadata link loses compares hashes: equal
// means it may (re)link the same bytes, which also heals a writer that
// crashed between the two links; different is ErrConflict.
type Local struct {
	root string
}

// localMeta is the JSON kept in <object>.meta.json.
type localMeta struct {
	IdempotencyKey string `json:"idempotency_key"`
	RequestID      string `json:"request_id"`
	ContentType    string `json:"content_type"`
	SHA256         string `json:"sha256"`
	Size           int    `json:"size"`
	Kind           string `json:"kind,omitempty"` // KindOf(key), what the OSS store tags
}

// NewLocal opens (creating it if needed) a store rooted at dir.
func NewLocal(dir string) (*Local, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, localErr("open", "", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, localErr("open", "", err)
	}
	return &Local{root: abs}, nil
}

// Ref is file://<absolute path of the object>.
func (l *Local) Ref(key string) string {
	return "file://" + filepath.ToSlash(l.path(key))
}

func (l *Local) path(key string) string {
	return filepath.Join(l.root, filepath.FromSlash(key))
}

// PutOnce writes body under key unless the key holds other bytes.
func (l *Local) PutOnce(ctx context.Context, key string, body []byte, contentType string, m Meta) (string, error) {
	if err := checkKey(key); err != nil {
		return "", &Error{Op: "put", Key: key, Err: err}
	}
	if err := checkPut(contentType, m); err != nil {
		return "", &Error{Op: "put", Key: key, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return "", &Error{Op: "put", Key: key, Err: err, retryable: true}
	}
	obj := l.path(key)
	dir := filepath.Dir(obj)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", localErr("put", key, err)
	}
	want := localMeta{IdempotencyKey: m.IdempotencyKey, RequestID: m.RequestID,
		ContentType: contentType, SHA256: sha256Hex(body), Size: len(body), Kind: KindOf(key)}
	metaJSON, err := json.Marshal(want)
	if err != nil {
		return "", localErr("put", key, err)
	}

	// 1. Claim the key for this content.
	claimed, err := linkNew(obj+metaSuffix, metaJSON)
	if err != nil {
		return "", localErr("put", key, err)
	}
	if !claimed {
		have, err := readMeta(obj + metaSuffix)
		if err != nil {
			return "", localErr("put", key, err)
		}
		if have.SHA256 != want.SHA256 || have.Size != want.Size {
			return "", &Error{Op: "put", Key: key, kind: ErrConflict}
		}
	}
	// 2. Make the body visible; the claim says which bytes may appear here.
	linked, err := linkNew(obj, body)
	if err != nil {
		return "", localErr("put", key, err)
	}
	if !linked {
		have, err := os.ReadFile(obj)
		if err != nil {
			return "", localErr("put", key, err)
		}
		if !bytes.Equal(have, body) { // only if someone wrote around the store
			return "", &Error{Op: "put", Key: key, kind: ErrConflict}
		}
	}
	if err := syncDir(dir); err != nil {
		return "", localErr("put", key, err)
	}
	return l.Ref(key), nil
}

// Get returns the object's bytes and metadata.
func (l *Local) Get(ctx context.Context, key string) ([]byte, Meta, error) {
	if err := checkKey(key); err != nil {
		return nil, Meta{}, &Error{Op: "get", Key: key, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return nil, Meta{}, &Error{Op: "get", Key: key, Err: err, retryable: true}
	}
	obj := l.path(key)
	body, err := os.ReadFile(obj)
	if err != nil {
		return nil, Meta{}, localErr("get", key, err)
	}
	lm, err := readMeta(obj + metaSuffix)
	if err != nil && !errors.Is(err, fs.ErrNotExist) { // a body placed by hand has no metadata
		return nil, Meta{}, localErr("get", key, err)
	}
	return body, Meta{IdempotencyKey: lm.IdempotencyKey, RequestID: lm.RequestID}, nil
}

// linkNew makes path hold data if it does not exist yet: the data is written
// and fsynced under a temp name in the same directory, then hard-linked to
// path. It reports false, without error, when path already exists.
func linkNew(path string, data []byte) (bool, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return false, err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return false, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return false, err
	}
	if err := f.Close(); err != nil {
		return false, err
	}
	switch err := os.Link(tmp, path); {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrExist):
		return false, nil
	default:
		return false, err
	}
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func readMeta(path string) (localMeta, error) {
	var lm localMeta
	b, err := os.ReadFile(path)
	if err != nil {
		return lm, err
	}
	if err := json.Unmarshal(b, &lm); err != nil {
		return lm, errors.New("corrupt metadata file " + path + ": " + err.Error())
	}
	return lm, nil
}

// syncDir makes the new directory entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, errors.ErrUnsupported) {
		return nil // some platforms cannot fsync a directory
	}
	return err
}

// localErr classifies file-system failures: missing → ErrNotFound,
// EACCES/EPERM → ErrPermission, file/directory clashes → ErrInvalid, anything else (disk full, I/O) retryable.
func localErr(op, key string, err error) error {
	e := &Error{Op: op, Key: key, Err: err}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		e.kind = ErrNotFound
	case errors.Is(err, fs.ErrPermission):
		e.kind = ErrPermission
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR):
		e.kind = ErrInvalid // one key is a prefix "directory" of another: OSS allows it, a file system does not
	default:
		e.retryable = true
	}
	return e
}
