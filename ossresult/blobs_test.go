package ossresult_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/keys"
	"github.com/idemgate/idemgate/ossresult"
)

// A 1 MiB typed result goes to the blob store by reference, on the local
// directory store and on OSS (the fake, V4-signed), and a duplicate gets it
// back without a second execution.
func TestBlobsKeepLargeResults(t *testing.T) {
	for _, c := range []struct {
		name  string
		blobs func(t *testing.T) driver.BlobStore
	}{
		{"local", func(t *testing.T) driver.BlobStore {
			l, err := ossresult.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return ossresult.Blobs(l)
		}},
		{"oss", func(t *testing.T) driver.BlobStore { return ossresult.Blobs(bucketOn(t, newFake(t), nil)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			store, err := boltstore.Open(t.TempDir(), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			eng := idempotency.New(store, idempotency.WithBlobStore(c.blobs(t)))
			big := strings.Repeat("x", 1<<20)
			var runs atomic.Int32
			req := idempotency.ClaimRequest{Key: keys.FromFingerprint("large " + c.name)}
			for _, owner := range []string{"r1", "r2"} {
				req.Owner = owner
				got, out, err := idempotency.Run(context.Background(), eng, req, func(context.Context, *idempotency.Lease) (string, error) {
					runs.Add(1)
					return big, nil
				})
				if err != nil || got != big {
					t.Fatalf("%s: %d bytes, %+v, %v", owner, len(got), out, err)
				}
				if !strings.HasPrefix(out.ResultRef, "blob:") {
					t.Fatalf("%s: result ref %.60q is not a blob reference", owner, out.ResultRef)
				}
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("ran %d times", n)
			}
		})
	}
}
