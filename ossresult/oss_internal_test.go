package ossresult

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
)

// The credential fingerprint is the digest of "len:field;" for the three
// fields, so that the cache tells ("ab","c") from ("a","bc"); a token longer
// than its buffer must not change it.
func TestCredentialsFingerprint(t *testing.T) {
	printed := func(c Credentials) [sha256.Size]byte {
		return sha256.Sum256(fmt.Appendf(nil, "%d:%s;%d:%s;%d:%s;", len(c.AccessKeyID), c.AccessKeyID,
			len(c.AccessKeySecret), c.AccessKeySecret, len(c.SecurityToken), c.SecurityToken))
	}
	for _, tc := range []struct {
		name string
		c    Credentials
	}{
		{"empty", Credentials{}},
		{"no token", Credentials{AccessKeyID: "ak", AccessKeySecret: "sk"}},
		{"token", Credentials{AccessKeyID: "ak", AccessKeySecret: "sk", SecurityToken: "tok"}},
		{"token longer than the buffer", Credentials{AccessKeyID: "ak", AccessKeySecret: "sk", SecurityToken: strings.Repeat("t", 5000)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := tc.c.fingerprint(), printed(tc.c); got != want {
				t.Fatalf("fingerprint %x, want %x", got, want)
			}
		})
	}
	a := Credentials{AccessKeyID: "ab", AccessKeySecret: "c"}.fingerprint()
	b := Credentials{AccessKeyID: "a", AccessKeySecret: "bc"}.fingerprint()
	if a == b {
		t.Fatal(`("ab","c") and ("a","bc") have one fingerprint`)
	}
}
