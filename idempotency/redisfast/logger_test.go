package redisfast

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/idemgate/idemgate/internal/logx"
)

// go-redis's lines are JSON warnings carrying the fields of the context it
// was given (the request's, where the call had them).
func TestLoggerWritesJSONWithTheContextsFields(t *testing.T) {
	var out bytes.Buffer
	l := slogLogger{logx.New(&out, slog.LevelInfo, &logx.Redactor{})}
	ctx := logx.With(context.Background(), slog.String("request_id", "req-1"), slog.String("idempotency_key", "k"))
	l.Printf(ctx, "redis: connection pool: failed to dial after %d attempts: %v", 5, "dial tcp 127.0.0.1:1: connect: connection refused")
	var line map[string]any
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out.String())
	}
	want := map[string]any{"level": "WARN", "msg": "redis client", "request_id": "req-1", "idempotency_key": "k",
		"error": "connection pool: failed to dial after 5 attempts: dial tcp 127.0.0.1:1: connect: connection refused"}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("%s = %v, want %v", k, line[k], v)
		}
	}
}
