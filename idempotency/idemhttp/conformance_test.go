package idemhttp_test

import (
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/idemtest"
)

// TestConformance runs the middleware's conformance table
// (idemtest.RunHTTP) on the embedded store; every store configuration runs
// it too, within its own conformance suite (idemtest.Run): MySQL and the
// embedded store, each with and without Redis.
func TestConformance(t *testing.T) {
	s, err := boltstore.Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	idemtest.RunHTTP(t, idemtest.StoreOnly(s))
}
