package ossresult_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/ossresult"
)

func TestLayout(t *testing.T) {
	k := strings.Repeat("0a", 32)
	for _, tc := range []struct {
		name string
		got  func() (string, error)
		want string // "" = ErrInvalid
	}{
		{"input", func() (string, error) { return ossresult.InputKey(k) }, "tasks/" + k + "/input.json"},
		{"approved", func() (string, error) { return ossresult.ApprovedKey(k) }, "tasks/" + k + "/approved/result.md"},
		{"attempt 1 padded", func() (string, error) { return ossresult.AttemptKey(k, 1) }, "tasks/" + k + "/attempt-001/output.json"},
		{"attempt 42 padded", func() (string, error) { return ossresult.AttemptKey(k, 42) }, "tasks/" + k + "/attempt-042/output.json"},
		{"attempt 1000 wider", func() (string, error) { return ossresult.AttemptKey(k, 1000) }, "tasks/" + k + "/attempt-1000/output.json"},
		{"attempt 0", func() (string, error) { return ossresult.AttemptKey(k, 0) }, ""},
		{"upper-case key", func() (string, error) { return ossresult.InputKey(strings.ToUpper(k)) }, ""},
		{"short key", func() (string, error) { return ossresult.InputKey(k[:63]) }, ""},
		{"traversal key", func() (string, error) { return ossresult.ApprovedKey("../" + k[3:]) }, ""},
		{"non-hex key", func() (string, error) { return ossresult.AttemptKey(strings.Repeat("g", 64), 1) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.got()
			if tc.want == "" {
				if !errors.Is(err, ossresult.ErrInvalid) {
					t.Fatalf("= %q, %v; want ErrInvalid", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("= %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestKindOf(t *testing.T) {
	k := strings.Repeat("0a", 32)
	must := func(key string, err error) string {
		if err != nil {
			t.Fatal(err)
		}
		return key
	}
	for _, tc := range []struct {
		name, key, want string
	}{
		{"input", must(ossresult.InputKey(k)), ossresult.KindInput},
		{"attempt 1", must(ossresult.AttemptKey(k, 1)), ossresult.KindAttempt},
		{"attempt 999", must(ossresult.AttemptKey(k, 999)), ossresult.KindAttempt},
		{"attempt 1000", must(ossresult.AttemptKey(k, 1000)), ossresult.KindAttempt},
		{"approved", must(ossresult.ApprovedKey(k)), ossresult.KindApproved},
		{"attempt 0", "tasks/" + k + "/attempt-000/output.json", ""},
		{"attempt unpadded", "tasks/" + k + "/attempt-1/output.json", ""},
		{"attempt over-padded", "tasks/" + k + "/attempt-0001/output.json", ""},
		{"attempt not a number", "tasks/" + k + "/attempt-0x1/output.json", ""},
		{"attempt other file", "tasks/" + k + "/attempt-001/input.json", ""},
		{"approved other file", "tasks/" + k + "/approved/result.json", ""},
		{"input one level deeper", "tasks/" + k + "/x/input.json", ""},
		{"trailing segment", must(ossresult.InputKey(k)) + "/x", ""},
		{"upper-case business key", "tasks/" + strings.ToUpper(k) + "/input.json", ""},
		{"short business key", "tasks/" + k[:62] + "/input.json", ""},
		{"other prefix", "results/" + k + "/input.json", ""},
		{"not the layout", "misc/empty", ""},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ossresult.KindOf(tc.key); got != tc.want {
				t.Errorf("KindOf(%q) = %q, want %q", tc.key, got, tc.want)
			}
		})
	}
}
