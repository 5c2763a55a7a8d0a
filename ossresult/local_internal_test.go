package ossresult

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A writer that crashed between linking the metadata and the body leaves a
// claim without an object: Get says not found, the same bytes complete it,
// other bytes conflict.
func TestLocalHealsCrashBetweenLinks(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		body    string
		wantErr error
	}{
		{"same bytes complete the object", "claimed", nil},
		{"other bytes conflict", "other", ErrConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			key := "tasks/x/approved/result.md"
			obj := s.path(key)
			if err := os.MkdirAll(filepath.Dir(obj), 0o755); err != nil {
				t.Fatal(err)
			}
			claim := localMeta{RequestID: "crashed", SHA256: sha256Hex([]byte("claimed")), Size: len("claimed")}
			b, _ := json.Marshal(claim)
			if ok, err := linkNew(obj+metaSuffix, b); !ok || err != nil {
				t.Fatal(ok, err)
			}
			if _, _, err := s.Get(ctx, key); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get on a bare claim = %v, want ErrNotFound", err)
			}
			_, err = s.PutOnce(ctx, key, []byte(tc.body), "text/markdown", Meta{RequestID: "retry"})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("PutOnce = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil {
				body, m, err := s.Get(ctx, key)
				if err != nil || string(body) != tc.body || m.RequestID != "crashed" {
					t.Fatalf("Get = %q %+v %v", body, m, err)
				}
			}
		})
	}
}
