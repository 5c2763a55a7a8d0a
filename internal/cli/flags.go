package cli

import (
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/idemgate/idemgate/internal/config"
)

// logFlags are the flags every command has for its JSON log lines (stderr;
// stdout for serve, which FC collects).
type logFlags struct {
	name  *string
	quiet *bool
}

func addLogFlags(fs *flag.FlagSet) logFlags {
	return logFlags{
		name:  fs.String("log-level", "info", "log lines at this level and above: debug, info, warn or error"),
		quiet: fs.Bool("q", false, "quiet: log errors only (--log-level error)"),
	}
}

func (l logFlags) level() (slog.Level, error) {
	if *l.quiet {
		return slog.LevelError, nil
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*l.name)); err != nil {
		return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", *l.name)
	}
	return lv, nil
}

// durationValue is a duration flag that also takes days (config.ParseDuration):
// `stats --since 1d` as `purge --older-than 30d`.
type durationValue time.Duration

func durationFlag(fs *flag.FlagSet, name string, value time.Duration, usage string) *time.Duration {
	d := durationValue(value)
	fs.Var(&d, name, usage)
	return (*time.Duration)(&d)
}

func (d *durationValue) String() string { return time.Duration(*d).String() }

func (d *durationValue) Set(s string) error {
	v, err := config.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as 90s, 36h or 1d")
	}
	*d = durationValue(v)
	return nil
}

// checkKey refuses what cannot be a business key (docs/design.md §4: 64
// lowercase hex) before anything is opened: a typo is a usage error, not a
// "not found".
func checkKey(k string) error {
	ok := len(k) == 64
	for i := 0; ok && i < len(k); i++ {
		ok = k[i] >= '0' && k[i] <= '9' || k[i] >= 'a' && k[i] <= 'f'
	}
	if !ok {
		shown := k
		if len(shown) > 80 {
			shown = shown[:80] + "…"
		}
		return fmt.Errorf("--key %q is not a business key (64 lowercase hex characters%s)", shown, upperHint(k))
	}
	return nil
}

func upperHint(k string) string {
	if len(k) == 64 && strings.ToLower(k) != k {
		return "; keys are lower case"
	}
	return ""
}
