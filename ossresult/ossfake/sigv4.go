package ossfake

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// V4 header signing, as OSS documents it ("Include a V4 signature in the
// Authorization header") and as the Go SDK v3.0.2 produces it (auth.go,
// getSignedStrV4):
//
//	Authorization: OSS4-HMAC-SHA256 Credential=<ak>/<yyyymmdd>/<region>/oss/aliyun_v4_request,
//	               [AdditionalHeaders=<h1;h2>,] Signature=<hex>
//	CanonicalRequest = Method \n CanonicalURI \n CanonicalQuery \n CanonicalHeaders \n
//	                   AdditionalHeaders \n x-oss-content-sha256
//	StringToSign     = "OSS4-HMAC-SHA256" \n Timestamp \n <yyyymmdd>/<region>/oss/aliyun_v4_request \n
//	                   hex(sha256(CanonicalRequest))
//	SigningKey       = HMAC chain of "aliyun_v4"+secret over yyyymmdd, region, "oss", "aliyun_v4_request"
//
// CanonicalURI is "/<bucket>/<key>" URI-encoded except "/" (also for
// virtual-host requests); CanonicalHeaders are every x-oss-* header plus
// content-type and content-md5 plus the additional headers, lower-cased,
// trimmed and sorted, each "name:value\n". Timestamp is x-oss-date
// (20060102T150405Z) or, failing that, the Date header verbatim: SDK v3.0.2
// sends only Date, and OSS accepts either.

const (
	v4Algorithm   = "OSS4-HMAC-SHA256"
	v4Terminator  = "aliyun_v4_request"
	v4Product     = "oss"
	isoTimeFormat = "20060102T150405Z"
)

// authenticate checks identity, STS token, request time and signature, in
// that order; the region and date the server expects are its own, so a
// request signed for another region or day cannot match.
func (s *Server) authenticate(r *http.Request, bucket, key string) *apiError {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return &apiError{Status: 403, Code: "AccessDenied", Message: "You have no right to access this object because of bucket acl."}
	}
	rest, ok := strings.CutPrefix(auth, v4Algorithm+" ")
	if !ok {
		return &apiError{Status: 403, Code: "AccessDenied", Message: "this fake accepts only V4 (OSS4-HMAC-SHA256) signatures"}
	}
	fields := map[string]string{}
	for part := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		fields[k] = v
	}
	cred := strings.Split(fields["Credential"], "/")
	sig := fields["Signature"]
	if len(cred) != 5 || sig == "" || cred[3] != v4Product || cred[4] != v4Terminator {
		return &apiError{Status: 400, Code: "InvalidArgument", Message: "Authorization header is malformed: " + auth}
	}
	if cred[0] != s.cfg.AccessKeyID {
		return &apiError{Status: 403, Code: "InvalidAccessKeyId", Message: "The OSS Access Key Id you provided does not exist in our records."}
	}
	if e := s.checkToken(r.Header.Get("X-Oss-Security-Token")); e != nil {
		return e
	}

	stamp, when, e := requestTime(r)
	if e != nil {
		return e
	}
	now := s.cfg.Now()
	if d := now.Sub(when); d > s.cfg.MaxSkew || d < -s.cfg.MaxSkew {
		return &apiError{Status: 403, Code: "RequestTimeTooSkewed",
			Message: "The difference between the request time and the current time is too large."}
	}
	day := when.UTC().Format("20060102")
	if sha := r.Header.Get("X-Oss-Content-Sha256"); sha != "UNSIGNED-PAYLOAD" {
		return &apiError{Status: 400, Code: "InvalidArgument", Message: "x-oss-content-sha256 must be UNSIGNED-PAYLOAD, got " + strconv.Quote(sha)}
	}

	additional := fields["AdditionalHeaders"]
	canon := canonicalRequest(r, bucket, key, additional)
	scope := day + "/" + s.cfg.Region + "/" + v4Product + "/" + v4Terminator
	hashed := sha256.Sum256([]byte(canon))
	toSign := v4Algorithm + "\n" + stamp + "\n" + scope + "\n" + hex.EncodeToString(hashed[:])
	want := hmacSHA256(signingKey(s.cfg.AccessKeySecret, day, s.cfg.Region), toSign)
	got, err := hex.DecodeString(sig)
	if err != nil || !hmac.Equal(got, want) || cred[1] != day || cred[2] != s.cfg.Region {
		return &apiError{Status: 403, Code: "SignatureDoesNotMatch",
			Message:      "The request signature we calculated does not match the signature you provided. Check your key and signing method.",
			StringToSign: toSign, CanonicalRequest: canon}
	}
	return nil
}

func (s *Server) checkToken(token string) *apiError {
	switch {
	case s.cfg.SecurityToken == "" && token == "":
		return nil
	case s.cfg.SecurityToken == "":
		return &apiError{Status: 403, Code: "InvalidAccessKeyId", Message: "a security token was sent for a long-term access key"}
	case token == "":
		return &apiError{Status: 403, Code: "InvalidAccessKeyId", Message: "The OSS Access Key Id you provided does not exist in our records (STS key without x-oss-security-token)."}
	case !hmac.Equal([]byte(token), []byte(s.cfg.SecurityToken)):
		return &apiError{Status: 403, Code: "InvalidSecurityToken", Message: "The security token you provided is invalid."}
	}
	return nil
}

// requestTime returns the timestamp string that is signed and its time.
func requestTime(r *http.Request) (string, time.Time, *apiError) {
	if v := r.Header.Get("X-Oss-Date"); v != "" {
		t, err := time.Parse(isoTimeFormat, v)
		if err != nil {
			return "", t, &apiError{Status: 403, Code: "AccessDenied", Message: "x-oss-date is not in ISO8601 format: " + v}
		}
		return v, t, nil
	}
	v := r.Header.Get("Date")
	if v == "" {
		return "", time.Time{}, &apiError{Status: 403, Code: "AccessDenied", Message: "neither x-oss-date nor Date is present"}
	}
	t, err := time.Parse(http.TimeFormat, v)
	if err != nil {
		return "", t, &apiError{Status: 403, Code: "AccessDenied", Message: "Date is not in GMT format: " + v}
	}
	return v, t, nil
}

func canonicalRequest(r *http.Request, bucket, key, additional string) string {
	uri := "/"
	if bucket != "" {
		uri = "/" + bucket + "/" + uriEncode(key, true)
	}
	var extra []string
	if additional != "" {
		extra = strings.Split(strings.ToLower(additional), ";")
	}
	headers := map[string]string{}
	for name, vals := range r.Header {
		n := strings.ToLower(name)
		if strings.HasPrefix(n, "x-oss-") || n == "content-type" || n == "content-md5" || slices.Contains(extra, n) {
			headers[n] = strings.TrimSpace(vals[0])
		}
	}
	if slices.Contains(extra, "host") { // net/http moves Host out of the header map
		headers["host"] = r.Host
	}
	names := slices.Sorted(maps.Keys(headers))
	var b strings.Builder
	b.WriteString(r.Method + "\n" + uri + "\n" + canonicalQuery(r.URL.RawQuery) + "\n")
	for _, n := range names {
		b.WriteString(n + ":" + headers[n] + "\n")
	}
	b.WriteString("\n" + additional + "\n" + r.Header.Get("X-Oss-Content-Sha256"))
	return b.String()
}

// canonicalQuery re-encodes every parameter, sorts by name, and leaves a
// parameter without value as its bare name.
func canonicalQuery(raw string) string {
	type kv struct{ k, v string }
	var params []kv
	for pair := range strings.SplitSeq(raw, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		k, _ = url.QueryUnescape(k)
		v, _ = url.QueryUnescape(v)
		params = append(params, kv{uriEncode(k, false), uriEncode(v, false)})
	}
	slices.SortFunc(params, func(a, b kv) int { return strings.Compare(a.k+"\x00"+a.v, b.k+"\x00"+b.v) })
	parts := make([]string, len(params))
	for i, p := range params {
		parts[i] = p.k
		if p.v != "" {
			parts[i] += "=" + p.v
		}
	}
	return strings.Join(parts, "&")
}

// uriEncode is RFC 3986 percent-encoding: everything but A-Z a-z 0-9 - _ . ~
// (and "/" in paths) as upper-case %XX.
func uriEncode(s string, keepSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.', c == '~', c == '/' && keepSlash:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}

func signingKey(secret, day, region string) []byte {
	k := hmacSHA256([]byte("aliyun_v4"+secret), day)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, v4Product)
	return hmacSHA256(k, v4Terminator)
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}
