package ossresult_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/ossresult"
	"github.com/idemgate/idemgate/ossresult/ossfake"
	"github.com/idemgate/idemgate/ossresult/resulttest"
)

const (
	testBucket = "idemgate-results"
	testRegion = "cn-hangzhou"
)

// anInput is an input.json key of the layout (tagged on PUT).
var anInput = "tasks/" + strings.Repeat("ab", 32) + "/input.json"

var stsCreds = ossresult.Credentials{AccessKeyID: "STS.fakeKeyId", AccessKeySecret: "fake-secret", SecurityToken: "fake-sts-token"}

func newFake(t *testing.T) *ossfake.Server {
	t.Helper()
	// Every object under tasks/ must arrive tagged: the lifecycle rules depend on it.
	f := ossfake.New(ossfake.Config{Bucket: testBucket, Region: testRegion,
		AccessKeyID: stsCreds.AccessKeyID, AccessKeySecret: stsCreds.AccessKeySecret, SecurityToken: stsCreds.SecurityToken,
		RequireTag: ossresult.TagKind, RequireTagPrefix: "tasks/"})
	t.Cleanup(f.Close)
	return f
}

func newOSS(t *testing.T, endpoint string, mod func(*ossresult.OSSConfig)) *ossresult.OSS {
	t.Helper()
	cfg := ossresult.OSSConfig{Endpoint: endpoint, Bucket: testBucket, Region: testRegion, HTTPTimeout: 5 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	s, err := ossresult.NewOSS(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func bucketOn(t *testing.T, f *ossfake.Server, mod func(*ossresult.OSSConfig)) *ossresult.OSSBucket {
	t.Helper()
	b, err := newOSS(t, f.Endpoint(), mod).With(stsCreds)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fakeKeys(f *ossfake.Server) []string {
	keys := make([]string, 0)
	for k := range f.Objects() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestOSSSuite(t *testing.T) {
	resulttest.Run(t, func(t *testing.T) resulttest.Subject {
		f := newFake(t)
		return resulttest.Subject{Store: bucketOn(t, f, nil), Keys: func(*testing.T) []string { return fakeKeys(f) },
			Kind: func(_ *testing.T, key string) string { return f.Objects()[key].Tags[ossresult.TagKind] }}
	})
}

type logLine struct {
	method string
	status int
}

func requestLog(f *ossfake.Server) []logLine {
	var out []logLine
	for _, r := range f.Requests() {
		out = append(out, logLine{r.Method, r.Status})
	}
	return out
}

// What reaches OSS: metadata, content type, and on a re-put the 409 and the
// HEAD that compares checksums (not a GET of the body).
func TestOSSWireFormat(t *testing.T) {
	f := newFake(t)
	b := bucketOn(t, f, nil)
	k := resulttest.NewKey()
	key, _ := ossresult.AttemptKey(k, 3)
	body := []byte(`{"summary":"x"}`)
	m := ossresult.Meta{IdempotencyKey: k, RequestID: "req-7"}
	ref, err := b.PutOnce(context.Background(), key, body, "application/json", m)
	if err != nil {
		t.Fatal(err)
	}
	if want := "oss://" + testBucket + "/" + key; ref != want {
		t.Fatalf("ref = %q, want %q", ref, want)
	}
	o := f.Objects()[key]
	if o.Meta["idempotency-key"] != k || o.Meta["request-id"] != "req-7" || o.ContentType != "application/json" ||
		!maps.Equal(o.Tags, map[string]string{"idemgate-kind": "attempt"}) {
		t.Fatalf("stored object = %+v", o)
	}
	if _, err := b.PutOnce(context.Background(), key, body, "application/json", m); err != nil {
		t.Fatal(err)
	}
	want := []logLine{{"PUT", 200}, {"PUT", 409}, {"HEAD", 200}}
	if got := requestLog(f); !slices.Equal(got, want) {
		t.Fatalf("requests = %v, want %v", got, want)
	}
}

func TestOSSAuthFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		creds ossresult.Credentials
		cfg   func(*ossresult.OSSConfig)
		code  string
	}{
		{"wrong secret", ossresult.Credentials{AccessKeyID: stsCreds.AccessKeyID, AccessKeySecret: "wrong", SecurityToken: stsCreds.SecurityToken}, nil, "SignatureDoesNotMatch"},
		{"wrong region", stsCreds, func(c *ossresult.OSSConfig) { c.Region = "cn-shanghai" }, "SignatureDoesNotMatch"},
		{"unknown access key", ossresult.Credentials{AccessKeyID: "STS.other", AccessKeySecret: stsCreds.AccessKeySecret, SecurityToken: stsCreds.SecurityToken}, nil, "InvalidAccessKeyId"},
		{"STS token missing", ossresult.Credentials{AccessKeyID: stsCreds.AccessKeyID, AccessKeySecret: stsCreds.AccessKeySecret}, nil, "InvalidAccessKeyId"},
		{"STS token wrong", ossresult.Credentials{AccessKeyID: stsCreds.AccessKeyID, AccessKeySecret: stsCreds.AccessKeySecret, SecurityToken: "stale"}, nil, "InvalidSecurityToken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			b, err := newOSS(t, f.Endpoint(), tc.cfg).With(tc.creds)
			if err != nil {
				t.Fatal(err)
			}
			_, err = b.PutOnce(context.Background(), anInput, []byte("{}"), "application/json", ossresult.Meta{})
			e, ok := errors.AsType[*ossresult.Error](err)
			if !ok || !errors.Is(err, ossresult.ErrPermission) || ossresult.Retryable(err) || e.Status != 403 || e.Code != tc.code {
				t.Fatalf("PutOnce = %v; want non-retryable ErrPermission, 403 %s", err, tc.code)
			}
			if _, _, err := b.Get(context.Background(), anInput); !errors.Is(err, ossresult.ErrPermission) {
				t.Fatalf("Get = %v, want ErrPermission", err)
			}
			if n := len(f.Requests()); n != 2 {
				t.Fatalf("%d requests: a permission failure must not be retried", n)
			}
			if len(f.Objects()) != 0 {
				t.Fatal("an unauthenticated put stored an object")
			}
		})
	}
}

// A role made before objects were tagged lacks oss:PutObjectTagging: the
// PUT is refused, FINAL, and the error says what to grant. Keys outside the
// layout carry no tag and are unaffected.
func TestOSSTaggingDenied(t *testing.T) {
	f := ossfake.New(ossfake.Config{Bucket: testBucket, Region: testRegion, AccessKeyID: stsCreds.AccessKeyID,
		AccessKeySecret: stsCreds.AccessKeySecret, SecurityToken: stsCreds.SecurityToken, TaggingDenied: true})
	t.Cleanup(f.Close)
	b := bucketOn(t, f, nil)
	_, err := b.PutOnce(context.Background(), anInput, []byte("{}"), "application/json", ossresult.Meta{})
	if !errors.Is(err, ossresult.ErrPermission) || ossresult.Retryable(err) || !strings.Contains(err.Error(), "oss:PutObjectTagging") {
		t.Fatalf("PutOnce = %v; want non-retryable ErrPermission naming oss:PutObjectTagging", err)
	}
	if _, err := b.PutOnce(context.Background(), "misc/x", []byte("{}"), "application/json", ossresult.Meta{}); err != nil {
		t.Fatalf("untagged PutOnce = %v", err)
	}
}

func TestOSSRetries(t *testing.T) {
	for _, tc := range []struct {
		name       string
		maxRetries int
		fault      func(*ossfake.Server)
		wantErr    bool
		want       []logLine
	}{
		{"503 then success", 0, func(f *ossfake.Server) { f.FailNext(1, 503) }, false,
			[]logLine{{"PUT", 503}, {"PUT", 200}}},
		{"502 twice then success", 3, func(f *ossfake.Server) { f.FailNext(2, 502) }, false,
			[]logLine{{"PUT", 502}, {"PUT", 502}, {"PUT", 200}}},
		{"budget spent", 2, func(f *ossfake.Server) { f.FailNext(10, 503) }, true,
			[]logLine{{"PUT", 503}, {"PUT", 503}, {"PUT", 503}}},
		{"retries off", -1, func(f *ossfake.Server) { f.FailNext(10, 503) }, true,
			[]logLine{{"PUT", 503}}},
		// The first PUT took effect but its answer was lost: the retry meets
		// 409, the HEAD shows the same checksum, and that is success.
		{"lost answer", 0, func(f *ossfake.Server) { f.FailNextAfterApply(1, 503) }, false,
			[]logLine{{"PUT", 503}, {"PUT", 409}, {"HEAD", 200}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			b := bucketOn(t, f, func(c *ossresult.OSSConfig) { c.MaxRetries = tc.maxRetries })
			tc.fault(f)
			_, err := b.PutOnce(context.Background(), anInput, []byte("{}"), "application/json", ossresult.Meta{})
			if tc.wantErr {
				if !ossresult.Retryable(err) {
					t.Fatalf("PutOnce = %v, want a retryable error", err)
				}
			} else if err != nil {
				t.Fatalf("PutOnce = %v", err)
			}
			if got := requestLog(f); !slices.Equal(got, tc.want) {
				t.Fatalf("requests = %v, want %v", got, tc.want)
			}
			if n := len(f.Objects()); n != map[bool]int{true: 0, false: 1}[tc.wantErr] {
				t.Fatalf("%d objects", n)
			}
		})
	}
}

func TestOSSGetRetries(t *testing.T) {
	f := newFake(t)
	b := bucketOn(t, f, nil)
	if _, err := b.PutOnce(context.Background(), "k", []byte("v"), "", ossresult.Meta{RequestID: "r"}); err != nil {
		t.Fatal(err)
	}
	f.FailNext(2, 503)
	body, m, err := b.Get(context.Background(), "k")
	if err != nil || string(body) != "v" || m.RequestID != "r" {
		t.Fatalf("Get = %q %+v %v", body, m, err)
	}
}

// A store that never recovers: the error comes back retryable, before the
// caller's deadline, however large the retry budget.
func TestOSSUnavailableHonoursDeadline(t *testing.T) {
	f := newFake(t)
	b := bucketOn(t, f, func(c *ossresult.OSSConfig) { c.MaxRetries = 1000 })
	f.FailNext(1<<30, 503)
	const deadline = 800 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	_, err := b.PutOnce(ctx, "k", []byte("v"), "", ossresult.Meta{})
	elapsed := time.Since(start)
	if !ossresult.Retryable(err) || errors.Is(err, ossresult.ErrPermission) {
		t.Fatalf("PutOnce = %v, want retryable", err)
	}
	if elapsed > deadline+200*time.Millisecond {
		t.Fatalf("took %v, past the %v deadline", elapsed, deadline)
	}
	if n := len(f.Requests()); n < 3 {
		t.Fatalf("only %d attempts in %v", n, elapsed)
	}
}

func TestOSSTransportFailures(t *testing.T) {
	stop := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-stop }))
	defer hang.Close()
	defer close(stop) // before Close, which waits for handlers
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, tc := range []struct{ name, endpoint string }{
		{"connection refused", closed.URL},
		{"per-attempt timeout", hang.URL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := newOSS(t, tc.endpoint, func(c *ossresult.OSSConfig) {
				c.HTTPTimeout, c.MaxRetries = 100*time.Millisecond, 1
			}).With(stsCreds)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = b.PutOnce(context.Background(), "k", []byte("v"), "", ossresult.Meta{})
			if !ossresult.Retryable(err) {
				t.Fatalf("PutOnce = %v, want retryable", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("took %v", d)
			}
		})
	}
}

func TestOSSCredentialCache(t *testing.T) {
	s := newOSS(t, "https://oss-cn-hangzhou.aliyuncs.com", nil)
	first, err := s.With(stsCreds)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := s.With(stsCreds); again != first {
		t.Fatal("the same credentials built a second handle")
	}
	rotated := stsCreds
	rotated.SecurityToken = "rotated"
	if other, _ := s.With(rotated); other == first {
		t.Fatal("rotated STS token reused the old handle")
	}
	for i := range 8 { // push the first out of the bounded cache
		if _, err := s.With(ossresult.Credentials{AccessKeyID: fmt.Sprint("ak", i), AccessKeySecret: "s"}); err != nil {
			t.Fatal(err)
		}
	}
	if again, _ := s.With(stsCreds); again == first {
		t.Fatal("cache is not bounded: the oldest handle survived 9 newer ones")
	}
	if _, err := s.With(ossresult.Credentials{}); !errors.Is(err, ossresult.ErrPermission) || ossresult.Retryable(err) {
		t.Fatalf("With(no credentials) = %v, want ErrPermission", err)
	}
	for _, out := range []string{fmt.Sprint(stsCreds), fmt.Sprintf("%v %+v %#v %s", stsCreds, stsCreds, stsCreds, stsCreds)} {
		if strings.Contains(out, stsCreds.AccessKeySecret) || strings.Contains(out, stsCreds.SecurityToken) {
			t.Fatalf("credentials print their secret: %s", out)
		}
	}
}

func TestNewOSSValidates(t *testing.T) {
	ok := ossresult.OSSConfig{Endpoint: "https://oss-cn-hangzhou.aliyuncs.com", Bucket: "b-1", Region: "cn-hangzhou"}
	for _, tc := range []struct {
		name string
		mod  func(*ossresult.OSSConfig)
		want string // substring of the error, "" = valid
	}{
		{"valid", func(*ossresult.OSSConfig) {}, ""},
		{"no endpoint", func(c *ossresult.OSSConfig) { c.Endpoint = "" }, "OSS_ENDPOINT"},
		{"no bucket", func(c *ossresult.OSSConfig) { c.Bucket = "" }, "OSS_BUCKET"},
		{"no region", func(c *ossresult.OSSConfig) { c.Region = "" }, "OSS_REGION"},
		{"bad bucket name", func(c *ossresult.OSSConfig) { c.Bucket = "Bad_Bucket" }, "bucket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.mod(&cfg)
			_, err := ossresult.NewOSS(cfg)
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("NewOSS = %v, want %q", err, tc.want)
			}
		})
	}
}

// corruptCRC puts a proxy in front of the fake that falsifies
// x-oss-hash-crc64ecma, as a body damaged in transit would look.
func corruptCRC(t *testing.T, f *ossfake.Server) string {
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		f.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		if w.Header().Get("X-Oss-Hash-Crc64ecma") != "" {
			w.Header().Set("X-Oss-Hash-Crc64ecma", "12345")
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(p.Close)
	return p.URL
}

// The SDK's CRC check stays on: a PUT or GET whose checksum disagrees is a
// retryable failure, never a silent success.
func TestOSSChecksumMismatch(t *testing.T) {
	f := newFake(t)
	good := bucketOn(t, f, nil)
	if _, err := good.PutOnce(context.Background(), "stored", []byte("v"), "", ossresult.Meta{}); err != nil {
		t.Fatal(err)
	}
	bad, err := newOSS(t, corruptCRC(t, f), func(c *ossresult.OSSConfig) { c.MaxRetries = -1 }).With(stsCreds)
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.PutOnce(context.Background(), "new", []byte("v"), "", ossresult.Meta{})
	if !ossresult.Retryable(err) || !strings.Contains(err.Error(), "crc") {
		t.Fatalf("PutOnce with a bad CRC answer = %v, want a retryable CRC error", err)
	}
	if _, _, err := bad.Get(context.Background(), "stored"); !ossresult.Retryable(err) || !strings.Contains(err.Error(), "CRC") {
		t.Fatalf("Get with a bad CRC answer = %v, want a retryable CRC error", err)
	}
}
