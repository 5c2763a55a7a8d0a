package ossfake

import (
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// OSS's limits on object tags ("Object tagging"): at most 10 per object,
// unique keys of 1 to 128 characters, values of at most 256.
const (
	maxTags     = 10
	maxTagKey   = 128
	maxTagValue = 256
)

// tagging checks a PUT's x-oss-tagging against the fake's configuration and
// OSS's rules, and returns the tags to store.
func (s *Server) tagging(r *http.Request, key string) (map[string]string, *apiError) {
	h := r.Header.Get("X-Oss-Tagging")
	if h != "" && s.cfg.TaggingDenied {
		return nil, &apiError{Status: 403, Code: "AccessDenied", Message: "You have no right to access this object because of bucket acl."}
	}
	tags, e := parseTagging(h)
	if e != nil {
		return nil, e
	}
	if s.cfg.RequireTag != "" && strings.HasPrefix(key, s.cfg.RequireTagPrefix) {
		if _, ok := tags[s.cfg.RequireTag]; !ok {
			return nil, &apiError{Status: 400, Code: "MissingTag",
				Message: "ossfake: a PUT under " + s.cfg.RequireTagPrefix + " must carry tag " + s.cfg.RequireTag + " in x-oss-tagging"}
		}
	}
	return tags, nil
}

// parseTagging reads x-oss-tagging: URL-encoded key=value pairs joined by &.
func parseTagging(h string) (map[string]string, *apiError) {
	bad := func(why string) *apiError {
		return &apiError{Status: 400, Code: "InvalidArgument", Message: "x-oss-tagging is invalid: " + why}
	}
	if h == "" {
		return nil, nil
	}
	q, err := url.ParseQuery(h)
	if err != nil {
		return nil, bad(err.Error())
	}
	if len(q) > maxTags {
		return nil, bad("more than 10 tags")
	}
	tags := make(map[string]string, len(q))
	for k, vs := range q {
		switch {
		case len(vs) != 1:
			return nil, bad("tag key " + k + " repeated")
		case k == "" || utf8.RuneCountInString(k) > maxTagKey || !tagChars(k):
			return nil, bad("tag key " + k)
		case utf8.RuneCountInString(vs[0]) > maxTagValue || !tagChars(vs[0]):
			return nil, bad("value of tag " + k)
		}
		tags[k] = vs[0]
	}
	return tags, nil
}

// tagChars: letters, digits, space and + - = . _ : /.
func tagChars(s string) bool {
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune(" +-=._:/", r) {
			return false
		}
	}
	return true
}
