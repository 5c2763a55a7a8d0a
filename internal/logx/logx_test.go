package logx

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestContextFieldsOnEveryLine(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, slog.LevelInfo, &Redactor{})
	ctx := With(context.Background(), slog.String("request_id", "r1"))
	ctx = With(ctx, slog.String("idempotency_key", "k1"), slog.String("request_id", "r2"))
	log.InfoContext(ctx, "one")
	log.With("x", 1).WarnContext(ctx, "two")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines: %q", lines)
	}
	for _, l := range lines {
		if !strings.Contains(l, `"request_id":"r2"`) || !strings.Contains(l, `"idempotency_key":"k1"`) || strings.Contains(l, "r1") {
			t.Fatalf("line without the context fields: %s", l)
		}
	}
}

func TestRedaction(t *testing.T) {
	cases := []struct {
		name string
		log  func(l *slog.Logger, ctx context.Context)
	}{
		{"message", func(l *slog.Logger, ctx context.Context) { l.InfoContext(ctx, "key is sk-supersecret") }},
		{"attribute", func(l *slog.Logger, ctx context.Context) { l.InfoContext(ctx, "m", "dsn", "root:sk-supersecret@tcp") }},
		{"error", func(l *slog.Logger, ctx context.Context) {
			l.InfoContext(ctx, "m", "error", errors.New("401 for sk-supersecret").Error())
		}},
		{"context attribute", func(l *slog.Logger, _ context.Context) {
			l.InfoContext(With(context.Background(), slog.String("h", "Bearer sk-supersecret")), "m")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			red := &Redactor{}
			red.Add("sk-supersecret", "abc")
			c.log(New(&buf, slog.LevelInfo, red), context.Background())
			if strings.Contains(buf.String(), "sk-supersecret") || !strings.Contains(buf.String(), "[REDACTED]") {
				t.Fatalf("not redacted: %s", buf.String())
			}
		})
	}
}
