package redisfast

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// SetLogger routes go-redis's own log lines (a dial that failed after its
// retries, a pool hook's error) through log, as warnings, instead of the
// library's plain "redis: …" lines on stderr: every line the process writes
// stays one JSON object (docs/operations.md, Log fields). Each line is
// logged with the context go-redis was given, so a handler that reads its
// fields from the context (the template's logx) adds the request's. go-redis
// has one logger per process: the last call wins. A nil log drops the lines
// (for a client closed while one of its dials is still under way).
func SetLogger(log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	redis.SetLogger(slogLogger{log})
}

// slogLogger is go-redis's logging interface (redis.SetLogger) on slog.
type slogLogger struct{ log *slog.Logger }

func (l slogLogger) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil { // go-redis passes context.Background() where it has none; never nil, but cheap to hold
		ctx = context.Background()
	}
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	l.log.WarnContext(ctx, "redis client", "error", msg)
}
