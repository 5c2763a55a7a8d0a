package redisfast

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// MinVersion is the oldest Redis the scripts run on: they set several
// fields in one HSET, which Redis takes from 4.0 (3.2 answers "wrong number
// of arguments" to every claim), and they write after reading TIME, which
// Redis refuses before 5.0 unless the script calls redis.replicate_commands
// (3.2 and later).
const (
	MinVersion         = "4.0"
	minMajor, minMinor = 4, 0
)

// ErrTooOld: the server is older than MinVersion; every fast-layer call
// would fail.
var ErrTooOld = errors.New("redisfast: Redis is too old")

// CheckVersion asks the server its version (INFO server) and refuses one
// older than MinVersion. An unreachable server is the caller's to judge:
// the fast layer is optional.
func CheckVersion(ctx context.Context, rdb redis.UniversalClient) error {
	_, err := ServerVersion(ctx, rdb)
	return err
}

// ServerVersion is CheckVersion that also says which version answered.
func ServerVersion(ctx context.Context, rdb redis.UniversalClient) (string, error) {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "", fmt.Errorf("redisfast: INFO server: %w", err)
	}
	v, ok, err := atLeast(info, minMajor, minMinor)
	switch {
	case err != nil:
		return v, err
	case !ok:
		return v, fmt.Errorf("%w: %s; the fast layer needs %s or later (its scripts set several hash fields in one HSET)", ErrTooOld, v, MinVersion)
	}
	return v, nil
}

// atLeast reads redis_version from an INFO answer and compares it with
// major.minor.
func atLeast(info string, major, minor int) (string, bool, error) {
	for _, line := range strings.Split(info, "\n") {
		v, found := strings.CutPrefix(strings.TrimSpace(line), "redis_version:")
		if !found {
			continue
		}
		parts := strings.SplitN(v, ".", 3)
		ma, err1 := strconv.Atoi(parts[0])
		mi := 0
		var err2 error
		if len(parts) > 1 {
			mi, err2 = strconv.Atoi(parts[1])
		}
		if err1 != nil || err2 != nil {
			return v, false, fmt.Errorf("redisfast: cannot read redis_version %q", v)
		}
		return v, ma > major || (ma == major && mi >= minor), nil
	}
	return "", false, errors.New("redisfast: INFO server names no redis_version")
}
