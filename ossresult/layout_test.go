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
