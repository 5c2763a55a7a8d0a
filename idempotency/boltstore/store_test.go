package boltstore_test

import (
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/idempotency/idemtest"
	"github.com/idemgate/idemgate/internal/testenv"
)

func open(t *testing.T, dir string) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformanceEmbedded(t *testing.T) {
	idemtest.Run(t, idemtest.StoreOnly(open(t, t.TempDir())))
}

func TestConformanceRedisEmbedded(t *testing.T) {
	s := open(t, t.TempDir())
	idemtest.Run(t, idemtest.WithRedis(t, testenv.RedisURL(t), s))
}
