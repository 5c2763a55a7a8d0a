package ossfake_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aliyun/aliyun-oss-go-sdk/oss"

	"github.com/idemgate/idemgate/ossresult/ossfake"
)

const (
	bucketName = "results-bkt"
	region     = "cn-hangzhou"
	ak         = "LTAIfakeAccessKey"
	secret     = "fake-secret-0123456789"
)

func newFake(t *testing.T, mod func(*ossfake.Config)) *ossfake.Server {
	t.Helper()
	cfg := ossfake.Config{Bucket: bucketName, Region: region, AccessKeyID: ak, AccessKeySecret: secret}
	if mod != nil {
		mod(&cfg)
	}
	s := ossfake.New(cfg)
	t.Cleanup(s.Close)
	return s
}

// roundTripFunc lets a test touch a request after the SDK has signed it.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func sdkBucket(t *testing.T, endpoint string, opts ...oss.ClientOption) *oss.Bucket {
	t.Helper()
	return sdkBucketAs(t, endpoint, ak, secret, opts...)
}

func sdkBucketAs(t *testing.T, endpoint, id, key string, opts ...oss.ClientOption) *oss.Bucket {
	t.Helper()
	all := append([]oss.ClientOption{oss.AuthVersion(oss.AuthV4), oss.Region(region)}, opts...)
	c, err := oss.New(endpoint, id, key, all...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Bucket(bucketName)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The fake and the SDK must agree on canonicalisation for awkward keys and
// headers, or a correct client would be refused.
func TestSDKRoundTrip(t *testing.T) {
	s := newFake(t, nil)
	b := sdkBucket(t, s.Endpoint())
	for _, tc := range []struct{ name, key string }{
		{"plain", "tasks/abc/input.json"},
		{"reserved characters", "a b+c~d*e(1)!'%20=&?x.txt"},
		{"unicode", "结果/ключ/résumé.md"},
		{"deep", "x/y/z/1/2/3/attempt-001/output.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte("body of " + tc.key)
			err := b.PutObject(tc.key, bytes.NewReader(body), oss.ContentType("text/markdown"),
				oss.Meta("request-id", "req-1"), oss.ContentMD5(md5b64(body)))
			if err != nil {
				t.Fatalf("put: %v", err)
			}
			rc, err := b.GetObject(tc.key)
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			got, _ := io.ReadAll(rc)
			rc.Close()
			if !bytes.Equal(got, body) {
				t.Fatalf("get = %q, want %q", got, body)
			}
			h, err := b.GetObjectDetailedMeta(tc.key)
			if err != nil {
				t.Fatalf("head: %v", err)
			}
			wantCRC := strconv.FormatUint(crc64.Checksum(body, crc64.MakeTable(crc64.ECMA)), 10)
			if h.Get("X-Oss-Hash-Crc64ecma") != wantCRC || h.Get("X-Oss-Meta-Request-Id") != "req-1" ||
				h.Get("Content-Type") != "text/markdown" || h.Get("Content-Length") != strconv.Itoa(len(body)) {
				t.Fatalf("head headers = %v", h)
			}
			if o := s.Objects()[tc.key]; o.Meta["request-id"] != "req-1" || o.ETag != `"`+md5hexUpper(body)+`"` {
				t.Fatalf("stored object = %+v", o)
			}
		})
	}
}

func TestAdditionalHeadersAreSigned(t *testing.T) {
	s := newFake(t, nil)
	var ua string
	b := sdkBucket(t, s.Endpoint(), oss.AdditionalHeaders([]string{"host", "user-agent"}),
		oss.HTTPClient(&http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			ua = r.Header.Get("Authorization")
			return http.DefaultTransport.RoundTrip(r)
		})}))
	if err := b.PutObject("k", strings.NewReader("v")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ua, "AdditionalHeaders=host;user-agent,") {
		t.Fatalf("authorization %q does not name the additional headers", ua)
	}
}

// Virtual-host addressing (bucket.endpoint/key) signs the same canonical URI.
func TestVirtualHostStyle(t *testing.T) {
	s := newFake(t, nil)
	addr := s.Listener.Addr().String()
	dialer := &net.Dialer{}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return dialer.DialContext(ctx, network, addr) // every host name is the fake
	}}
	b := sdkBucket(t, "http://oss-cn-test.invalid", oss.HTTPClient(&http.Client{Transport: tr}))
	if err := b.PutObject("vh/key.txt", strings.NewReader("v")); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Objects()["vh/key.txt"]; !ok {
		t.Fatalf("objects = %v", s.Objects())
	}
}

// Every way of getting the signature wrong must be refused, and must store nothing.
func TestAuthenticationBites(t *testing.T) {
	tamper := func(f func(*http.Request)) oss.ClientOption {
		return oss.HTTPClient(&http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			f(r)
			return http.DefaultTransport.RoundTrip(r)
		})})
	}
	for _, tc := range []struct {
		name     string
		fake     func(*ossfake.Config)
		id, key  string
		opts     []oss.ClientOption
		status   int
		code     string
		putStore bool // the control case: nothing wrong
	}{
		{name: "control", putStore: true, status: 200},
		{name: "wrong secret", key: "not-the-secret", status: 403, code: "SignatureDoesNotMatch"},
		{name: "unknown access key", id: "LTAIsomeoneElse", status: 403, code: "InvalidAccessKeyId"},
		{name: "wrong region", opts: []oss.ClientOption{oss.Region("cn-shanghai")}, status: 403, code: "SignatureDoesNotMatch"},
		{name: "V1 signature", opts: []oss.ClientOption{oss.AuthVersion(oss.AuthV1)}, status: 403, code: "AccessDenied"},
		{name: "metadata changed after signing", status: 403, code: "SignatureDoesNotMatch",
			opts: []oss.ClientOption{tamper(func(r *http.Request) { r.Header.Set("X-Oss-Meta-Request-Id", "forged") })}},
		{name: "metadata added after signing", status: 403, code: "SignatureDoesNotMatch",
			opts: []oss.ClientOption{tamper(func(r *http.Request) { r.Header.Set("X-Oss-Meta-Extra", "x") })}},
		{name: "content type changed after signing", status: 403, code: "SignatureDoesNotMatch",
			opts: []oss.ClientOption{tamper(func(r *http.Request) { r.Header.Set("Content-Type", "text/html") })}},
		{name: "tagging changed after signing", status: 403, code: "SignatureDoesNotMatch",
			opts: []oss.ClientOption{tamper(func(r *http.Request) { r.Header.Set("X-Oss-Tagging", "idemgate-kind=approved") })}},
		{name: "tagging dropped after signing", status: 403, code: "SignatureDoesNotMatch",
			opts: []oss.ClientOption{tamper(func(r *http.Request) { r.Header.Del("X-Oss-Tagging") })}},
		{name: "forbid-overwrite dropped after signing", status: 403, code: "SignatureDoesNotMatch",
			opts: []oss.ClientOption{tamper(func(r *http.Request) { r.Header.Del("X-Oss-Forbid-Overwrite") })}},
		{name: "key changed after signing", status: 403, code: "SignatureDoesNotMatch",
			opts: []oss.ClientOption{tamper(func(r *http.Request) { r.URL.Path += "x"; r.URL.RawPath = "" })}},
		{name: "query added after signing", status: 403, code: "SignatureDoesNotMatch",
			opts: []oss.ClientOption{tamper(func(r *http.Request) { r.URL.RawQuery = "acl" })}},
		{name: "date changed after signing", status: 403, code: "SignatureDoesNotMatch",
			opts: []oss.ClientOption{tamper(func(r *http.Request) {
				r.Header.Set("Date", time.Now().UTC().Add(time.Minute).Format(http.TimeFormat))
			})}},
		{name: "payload hash removed", status: 400, code: "InvalidArgument",
			opts: []oss.ClientOption{tamper(func(r *http.Request) { r.Header.Del("X-Oss-Content-Sha256") })}},
		{name: "clock skew (expired date)", fake: func(c *ossfake.Config) {
			c.Now = func() time.Time { return time.Now().Add(20 * time.Minute) }
		}, status: 403, code: "RequestTimeTooSkewed"},
		{name: "STS token missing", fake: func(c *ossfake.Config) { c.SecurityToken = "sts-token" },
			status: 403, code: "InvalidAccessKeyId"},
		{name: "STS token wrong", fake: func(c *ossfake.Config) { c.SecurityToken = "sts-token" },
			opts: []oss.ClientOption{oss.SecurityToken("other-token")}, status: 403, code: "InvalidSecurityToken"},
		{name: "STS token right", fake: func(c *ossfake.Config) { c.SecurityToken = "sts-token" },
			opts: []oss.ClientOption{oss.SecurityToken("sts-token")}, status: 200, putStore: true},
		{name: "token sent to a long-term key", opts: []oss.ClientOption{oss.SecurityToken("stray")},
			status: 403, code: "InvalidAccessKeyId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFake(t, tc.fake)
			id, key := ak, secret
			if tc.id != "" {
				id = tc.id
			}
			if tc.key != "" {
				key = tc.key
			}
			b := sdkBucketAs(t, s.Endpoint(), id, key, tc.opts...)
			err := b.PutObject("tasks/k/input.json", strings.NewReader("{}"), oss.ForbidOverWrite(true),
				oss.Meta("request-id", "r1"), oss.ContentType("application/json"), tag("idemgate-kind", "input"))
			if tc.status == 200 {
				if err != nil {
					t.Fatalf("put: %v", err)
				}
			} else {
				se, ok := errors.AsType[oss.ServiceError](err)
				if !ok || se.StatusCode != tc.status || se.Code != tc.code {
					t.Fatalf("put error = %v, want HTTP %d %s", err, tc.status, tc.code)
				}
			}
			if got := len(s.Objects()); got != map[bool]int{true: 1, false: 0}[tc.putStore] {
				t.Fatalf("%d objects stored", got)
			}
		})
	}
}

func TestForbidOverwrite(t *testing.T) {
	s := newFake(t, nil)
	b := sdkBucket(t, s.Endpoint())
	if err := b.PutObject("k", strings.NewReader("one"), oss.ForbidOverWrite(true)); err != nil {
		t.Fatal(err)
	}
	err := b.PutObject("k", strings.NewReader("two"), oss.ForbidOverWrite(true))
	if se, ok := errors.AsType[oss.ServiceError](err); !ok || se.StatusCode != 409 || se.Code != "FileAlreadyExists" {
		t.Fatalf("second create-once put = %v, want 409 FileAlreadyExists", err)
	}
	if got := string(s.Objects()["k"].Body); got != "one" {
		t.Fatalf("body = %q after refused overwrite", got)
	}
	if err := b.PutObject("k", strings.NewReader("three")); err != nil { // a plain PUT overwrites, as on OSS
		t.Fatal(err)
	}
	if got := string(s.Objects()["k"].Body); got != "three" {
		t.Fatalf("body = %q after plain overwrite", got)
	}
	if n := s.Puts("k"); n != 3 {
		t.Fatalf("Puts = %d, want 3", n)
	}
}

func TestErrorsAndFaults(t *testing.T) {
	s := newFake(t, nil)
	b := sdkBucket(t, s.Endpoint())

	// HEAD has no body: the SDK reads the error from x-oss-err.
	_, err := b.GetObjectDetailedMeta("missing")
	if se, ok := errors.AsType[oss.ServiceError](err); !ok || se.StatusCode != 404 || se.Code != "NoSuchKey" {
		t.Fatalf("head missing = %v", err)
	}
	_, err = b.GetObject("missing")
	if se, ok := errors.AsType[oss.ServiceError](err); !ok || se.Code != "NoSuchKey" || se.RequestID == "" {
		t.Fatalf("get missing = %v", err)
	}

	s.FailNext(2, http.StatusServiceUnavailable)
	for i := range 2 {
		err := b.PutObject("k", strings.NewReader("v"))
		if se, ok := errors.AsType[oss.ServiceError](err); !ok || se.StatusCode != 503 || se.Code != "ServiceUnavailable" {
			t.Fatalf("put %d = %v, want injected 503", i, err)
		}
	}
	if len(s.Objects()) != 0 || s.Puts("k") != 0 {
		t.Fatal("a request failed before the fake was reached still counted")
	}
	if err := b.PutObject("k", strings.NewReader("v")); err != nil {
		t.Fatalf("put after the faults: %v", err)
	}

	s.FailNextAfterApply(1, http.StatusInternalServerError)
	err = b.PutObject("lost", strings.NewReader("w"))
	if se, ok := errors.AsType[oss.ServiceError](err); !ok || se.StatusCode != 500 {
		t.Fatalf("put with lost answer = %v", err)
	}
	if got := string(s.Objects()["lost"].Body); got != "w" {
		t.Fatalf("lost-answer put did not take effect: %q", got)
	}

	var statuses []int
	for _, r := range s.Requests() {
		statuses = append(statuses, r.Status)
	}
	want := []int{404, 404, 503, 503, 200, 500}
	if !slicesEqual(statuses, want) {
		t.Fatalf("request log statuses = %v, want %v", statuses, want)
	}
}

func TestBadDigest(t *testing.T) {
	s := newFake(t, nil)
	b := sdkBucket(t, s.Endpoint())
	err := b.PutObject("k", strings.NewReader("body"), oss.ContentMD5(md5b64([]byte("other"))))
	if se, ok := errors.AsType[oss.ServiceError](err); !ok || se.Code != "BadDigest" {
		t.Fatalf("put = %v, want BadDigest", err)
	}
}

func tag(kv ...string) oss.Option {
	var t oss.Tagging
	for i := 0; i+1 < len(kv); i += 2 {
		t.Tags = append(t.Tags, oss.Tag{Key: kv[i], Value: kv[i+1]})
	}
	return oss.SetTagging(t)
}

// Tags travel in x-oss-tagging (URL-encoded), are stored with the object,
// and are counted on HEAD as OSS does.
func TestTaggingStored(t *testing.T) {
	s := newFake(t, nil)
	b := sdkBucket(t, s.Endpoint())
	if err := b.PutObject("tagged", strings.NewReader("v"), tag("idemgate-kind", "attempt", "a b", "c/d:e+f=g")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutObject("plain", strings.NewReader("v")); err != nil {
		t.Fatal(err)
	}
	objs := s.Objects()
	if got, want := objs["tagged"].Tags, map[string]string{"idemgate-kind": "attempt", "a b": "c/d:e+f=g"}; !maps.Equal(got, want) {
		t.Fatalf("tags = %v, want %v", got, want)
	}
	if got := objs["plain"].Tags; len(got) != 0 {
		t.Fatalf("untagged object has tags %v", got)
	}
	for key, want := range map[string]string{"tagged": "2", "plain": ""} {
		h, err := b.GetObjectDetailedMeta(key)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.Get("X-Oss-Tagging-Count"); got != want {
			t.Errorf("%s: x-oss-tagging-count %q, want %q", key, got, want)
		}
	}
}

func TestTaggingChecked(t *testing.T) {
	eleven := make([]string, 11)
	for i := range eleven {
		eleven[i] = fmt.Sprintf("k%d=v", i)
	}
	for _, tc := range []struct {
		name, key, header string
		fake              func(*ossfake.Config)
		status            int
		code              string
	}{
		{name: "ten tags", key: "k", header: strings.Join(eleven[:10], "&"), status: 200},
		{name: "eleven tags", key: "k", header: strings.Join(eleven, "&"), status: 400, code: "InvalidArgument"},
		{name: "repeated key", key: "k", header: "a=1&a=2", status: 400, code: "InvalidArgument"},
		{name: "empty key", key: "k", header: "=v", status: 400, code: "InvalidArgument"},
		{name: "key too long", key: "k", header: strings.Repeat("k", 129) + "=v", status: 400, code: "InvalidArgument"},
		{name: "value too long", key: "k", header: "k=" + strings.Repeat("v", 257), status: 400, code: "InvalidArgument"},
		{name: "character outside the set", key: "k", header: "k=%3Cscript%3E", status: 400, code: "InvalidArgument"},
		{name: "not URL-encoded", key: "k", header: "k=a;b", status: 400, code: "InvalidArgument"},
		{name: "required tag present", key: "tasks/k", header: "idemgate-kind=input",
			fake: func(c *ossfake.Config) { c.RequireTag, c.RequireTagPrefix = "idemgate-kind", "tasks/" }, status: 200},
		{name: "required tag missing", key: "tasks/k", header: "",
			fake: func(c *ossfake.Config) { c.RequireTag, c.RequireTagPrefix = "idemgate-kind", "tasks/" }, status: 400, code: "MissingTag"},
		{name: "required tag missing, other tag sent", key: "tasks/k", header: "other=x",
			fake: func(c *ossfake.Config) { c.RequireTag, c.RequireTagPrefix = "idemgate-kind", "tasks/" }, status: 400, code: "MissingTag"},
		{name: "required tag outside its prefix", key: "misc/k", header: "",
			fake: func(c *ossfake.Config) { c.RequireTag, c.RequireTagPrefix = "idemgate-kind", "tasks/" }, status: 200},
		{name: "tagging denied", key: "k", header: "idemgate-kind=input",
			fake: func(c *ossfake.Config) { c.TaggingDenied = true }, status: 403, code: "AccessDenied"},
		{name: "tagging denied, untagged PUT", key: "k", header: "",
			fake: func(c *ossfake.Config) { c.TaggingDenied = true }, status: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFake(t, tc.fake)
			var opts []oss.Option
			if tc.header != "" {
				opts = append(opts, oss.SetHeader("X-Oss-Tagging", tc.header))
			}
			err := sdkBucket(t, s.Endpoint()).PutObject(tc.key, strings.NewReader("v"), opts...)
			if tc.status == 200 {
				if err != nil {
					t.Fatalf("put: %v", err)
				}
				return
			}
			if se, ok := errors.AsType[oss.ServiceError](err); !ok || se.StatusCode != tc.status || se.Code != tc.code {
				t.Fatalf("put = %v, want HTTP %d %s", err, tc.status, tc.code)
			}
			if n := len(s.Objects()); n != 0 {
				t.Fatalf("refused put stored %d objects", n)
			}
		})
	}
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
