package jcs

import (
	"strings"
	"testing"
)

func TestNestedDeeper(t *testing.T) {
	for _, tc := range []struct {
		name  string
		text  string
		limit int
		want  bool
	}{
		{"scalar", `1`, 0, false},
		{"at the limit", `[[{"a":[]}]]`, 4, false},
		{"one over", `[[{"a":[[]]}]]`, 4, true},
		{"limit zero", `[]`, 0, true},
		{"many siblings, shallow", "[" + strings.Repeat("{},[],", 10) + "0]", 2, false},
		{"brackets inside a string", `["[[[[{{{{"]`, 1, false},
		{"escaped quote does not end the string", `["\"[[[[", "x"]`, 1, false},
		{"escaped backslash ends before the quote", `["\\", [[[]]]]`, 3, true},
		{"white space between", " [ [ \n[ ] ] ] ", 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NestedDeeper([]byte(tc.text), tc.limit); got != tc.want {
				t.Fatalf("NestedDeeper(%s, %d) = %v, want %v", tc.text, tc.limit, got, tc.want)
			}
		})
	}
}
