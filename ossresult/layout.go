package ossresult

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Object layout (docs/design.md §8). K is the 64-hex business key.

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

// Object kinds. Every object of the layout is tagged TagKind=<kind> when it is
// written (x-oss-tagging on OSS, the metadata file locally), because OSS
// lifecycle rules select by prefix and tag, not by pattern: a rule on
// tasks/ with tag idemgate-kind=attempt expires attempt outputs and leaves
// approved results alone.
const (
	TagKind      = "idemgate-kind"
	KindInput    = "input"    // tasks/<K>/input.json
	KindAttempt  = "attempt"  // tasks/<K>/attempt-<NNN>/output.json
	KindApproved = "approved" // tasks/<K>/approved/result.md
)

// KindOf returns the kind of a key of the layout above, "" for any other key.
func KindOf(key string) string {
	parts := strings.Split(key, "/")
	if len(parts) < 3 || parts[0] != "tasks" || checkBusinessKey(parts[1]) != nil {
		return ""
	}
	switch rest := parts[2:]; {
	case len(rest) == 1 && rest[0] == "input.json":
		return KindInput
	case len(rest) == 2 && rest[0] == "approved" && rest[1] == "result.md":
		return KindApproved
	case len(rest) == 2 && rest[1] == "output.json" && attemptDir(rest[0]):
		return KindAttempt
	}
	return ""
}

// attemptDir matches what AttemptKey writes: attempt-NNN, at least three
// digits, zero-padded only up to three, n >= 1.
func attemptDir(s string) bool {
	digits, ok := strings.CutPrefix(s, "attempt-")
	if !ok || len(digits) < 3 || (len(digits) > 3 && digits[0] == '0') {
		return false
	}
	n := 0
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
		n = min(n*10+int(digits[i]-'0'), 1<<30)
	}
	return n >= 1
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
