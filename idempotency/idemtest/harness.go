package idemtest

import (
	"log/slog"
	"testing"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
)

// StoreOnly is the harness of a durable store without a fast layer.
func StoreOnly(s driver.Store) Harness {
	return Harness{NewEngine: func(t *testing.T, opts ...idempotency.Option) *idempotency.Engine {
		return idempotency.New(s, append([]idempotency.Option{idempotency.WithLogger(TestLogger(t))}, opts...)...)
	}}
}

// TestLogger sends the engine's lines to the test's output, shown on failure
// or with -v, instead of the process's stderr.
func TestLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}
