package ossresult_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemgate/idemgate/ossresult"
)

type deleteStore interface {
	PutOnce(ctx context.Context, key string, body []byte, contentType string, m ossresult.Meta) (string, error)
	Get(ctx context.Context, key string) ([]byte, ossresult.Meta, error)
	Delete(ctx context.Context, key string) error
}

// Delete (main forget) removes an object, a missing one is no error, and
// the key can then be written again with other bytes.
func TestDelete(t *testing.T) {
	local, err := ossresult.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]deleteStore{"local": local, "oss": bucketOn(t, newFake(t), nil)} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			key := "tasks/" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + "/input.json"
			if _, err := s.PutOnce(ctx, key, []byte("old life"), "application/json", ossresult.Meta{}); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Get(ctx, key); !errors.Is(err, ossresult.ErrNotFound) {
				t.Fatalf("after the delete: %v", err)
			}
			if err := s.Delete(ctx, key); err != nil {
				t.Fatalf("a second delete: %v", err)
			}
			if _, err := s.PutOnce(ctx, key, []byte("new life"), "application/json", ossresult.Meta{}); err != nil {
				t.Fatalf("the new life's write: %v", err)
			}
			if b, _, err := s.Get(ctx, key); err != nil || string(b) != "new life" {
				t.Fatalf("%q %v", b, err)
			}
			if err := s.Delete(ctx, "../etc/passwd"); err == nil {
				t.Fatal("a key outside the layout was deleted")
			}
		})
	}
}
