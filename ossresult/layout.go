package ossresult

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Object layout (DESIGN §4.7). K is the 64-hex business key.

// InputKey is where the task's input is saved: tasks/<K>/input.json.
func InputKey(k string) (string, error) {
	if err := checkBusinessKey(k); err != nil {
		return "", err
	}
	return "tasks/" + k + "/input.json", nil
}

// AttemptKey names attempt n's immutable output: tasks/<K>/attempt-<NNN>/output.json,
// NNN zero-padded to three digits (wider past 999). Attempts count from 1.
func AttemptKey(k string, n int) (string, error) {
	if err := checkBusinessKey(k); err != nil {
		return "", err
	}
	if n < 1 {
		return "", invalid("attempt number %d: attempts count from 1", n)
	}
	return fmt.Sprintf("tasks/%s/attempt-%03d/output.json", k, n), nil
}

// ApprovedKey is the published result: tasks/<K>/approved/result.md.
func ApprovedKey(k string) (string, error) {
	if err := checkBusinessKey(k); err != nil {
		return "", err
	}
	return "tasks/" + k + "/approved/result.md", nil
}

func checkBusinessKey(k string) error {
	if len(k) != 64 {
		return invalid("business key must be 64 lowercase hex characters, got %d characters", len(k))
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return invalid("business key must be lowercase hex, got %q at %d", c, i)
		}
	}
	return nil
}

// maxKeyLen is OSS's limit on object names.
const maxKeyLen = 1023

// checkKey accepts the keys both stores can hold with the same meaning:
// relative slash-separated paths without empty, "." or ".." segments, so a
// key can neither escape the local directory nor alias another key. Segments
// may not start with "." (the local store's temp files) nor end in
// ".meta.json" (its metadata files).
func checkKey(key string) error {
	switch {
	case key == "":
		return invalid("empty object key")
	case len(key) > maxKeyLen:
		return invalid("object key longer than %d bytes", maxKeyLen)
	case !utf8.ValidString(key):
		return invalid("object key is not UTF-8")
	}
	for _, seg := range strings.Split(key, "/") {
		switch {
		case seg == "":
			return invalid("object key %q has an empty segment (leading, trailing or double slash)", key)
		case seg == "." || seg == "..":
			return invalid("object key %q has a %q segment", key, seg)
		case strings.HasPrefix(seg, "."):
			return invalid("object key %q has a segment starting with '.'", key)
		case strings.HasSuffix(seg, metaSuffix):
			return invalid("object key %q ends a segment in %q", key, metaSuffix)
		}
		for _, r := range seg {
			if r < 0x20 || r == 0x7f || r == '\\' {
				return invalid("object key %q has a control character or backslash", key)
			}
		}
	}
	return nil
}
