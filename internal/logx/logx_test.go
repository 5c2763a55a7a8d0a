package logx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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

// BenchmarkLine: one invocation line with the context fields every line of
// a task carries (what a duplicate answer logs three times).
func BenchmarkLine(b *testing.B) {
	red := &Redactor{}
	red.Add("an-access-key-secret", "an-sts-security-token")
	log := New(io.Discard, slog.LevelInfo, red)
	ctx := With(context.Background(), slog.String("request_id", "0b8e8f4e-6a8c-4c1e-9d7e-3f1f2a3b4c5d"),
		slog.String("fc_request_id", "0b8e8f4e-6a8c-4c1e-9d7e-3f1f2a3b4c5d"))
	ctx = With(ctx, slog.String("idempotency_key", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"),
		slog.String("fingerprint", "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"), slog.String("task_type", "summarize"))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		log.InfoContext(ctx, "task answered", "status", "SUCCEEDED", "decision", "REPEAT_DONE", "duplicate", true, "attempt", 1, "duration_ms", int64(0))
	}
}

// TestRedactorHold: an invocation's credentials are redacted while it runs,
// whatever else comes and goes, and for a while after; the list does not
// grow with every STS token an instance ever saw (FC rotates them).
func TestRedactorHold(t *testing.T) {
	red := &Redactor{}
	red.Add("config-secret")
	token := func(i int) string { return fmt.Sprintf("sts-token-%04d", i) }
	long := red.Hold(token(0), "ak-secret-long")
	if got := red.Redact("token " + token(0)); !strings.Contains(got, "[REDACTED]") {
		t.Fatalf("held, not redacted: %q", got)
	}
	for i := 1; i <= 1000; i++ {
		release := red.Hold(token(i), "ak-secret-long")
		release()
	}
	cases := []struct {
		name, line string
		redacted   bool
	}{
		{"the process's own", "dsn config-secret", true},
		{"held by a running invocation", "token " + token(0), true},
		{"shared by the running one and many released", "ak-secret-long", true},
		{"released last", "token " + token(1000), true},
		{"released keepReleased ago", "token " + token(1000-keepReleased+1), true},
		{"released long ago", "token " + token(1), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := red.Redact(c.line); strings.Contains(got, "[REDACTED]") != c.redacted {
				t.Errorf("Redact(%q) = %q", c.line, got)
			}
		})
	}
	if n := len(*red.all.Load()); n > 3+keepReleased {
		t.Errorf("%d secrets after 1000 tokens, want at most %d", n, 3+keepReleased)
	}
	long()
	long() // a second release of the same invocation is a no-op
	if got := red.Redact("token " + token(0)); !strings.Contains(got, "[REDACTED]") {
		t.Errorf("just released, not redacted: %q", got)
	}
	if n := len(red.held); n != 0 {
		t.Errorf("%d values held after every release", n)
	}
}

// TestRedactorNested: a secret that contains another is replaced whole.
func TestRedactorNested(t *testing.T) {
	red := &Redactor{}
	red.Add("secret", "secret-and-more")
	if got := red.Redact("x secret-and-more y"); got != "x [REDACTED] y" {
		t.Errorf("Redact = %q", got)
	}
}
