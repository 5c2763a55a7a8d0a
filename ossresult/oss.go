package ossresult

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aliyun/aliyun-oss-go-sdk/oss"
)

// OSSConfig configures the OSS store (OSS_ENDPOINT, OSS_BUCKET, OSS_REGION).
type OSSConfig struct {
	// Endpoint, e.g. https://oss-cn-hangzhou-internal.aliyuncs.com; without a
	// scheme, https is assumed (the SDK would assume http). The SDK addresses
	// buckets virtual-host style, except on an IP endpoint
	// (http://127.0.0.1:port, as in tests) where it uses path style.
	Endpoint string
	Bucket   string
	// Region is the V4 signing region, e.g. cn-hangzhou.
	Region string
	// HTTPTimeout bounds each HTTP attempt (default 15s); the caller's
	// context bounds the whole operation, retries included.
	HTTPTimeout time.Duration
	// MaxRetries is how many times a retryable failure is retried (5xx,
	// network, timeout): 0 means the default 3, negative means none.
	MaxRetries int
}

const (
	defaultHTTPTimeout = 15 * time.Second
	defaultMaxRetries  = 3
	// credCacheSize bounds the per-credential clients kept: FC rotates STS
	// credentials, so only the latest few are ever in use.
	credCacheSize = 8
)

// Credentials are one invocation's access key (from the FC request headers,
// else the ALIBABA_CLOUD_* environment). The secret is never printed.
type Credentials struct {
	AccessKeyID, AccessKeySecret, SecurityToken string
}

// String redacts the secret and the token so credentials can't leak into logs.
func (c Credentials) String() string {
	return fmt.Sprintf("Credentials{AccessKeyID:%s AccessKeySecret:[redacted] SecurityToken:%s}",
		c.AccessKeyID, redacted(c.SecurityToken))
}

// GoString keeps %#v from printing the secret too.
func (c Credentials) GoString() string { return c.String() }

func redacted(s string) string {
	if s == "" {
		return `""`
	}
	return "[redacted]"
}

// OSS is the OSS result store for one bucket. Bind it to an invocation's
// credentials with [OSS.With]. Safe for concurrent use.
type OSS struct {
	cfg    OSSConfig
	client *http.Client // shared by every credential's SDK client: one connection pool

	mu    sync.Mutex
	cache []cachedBucket // most recently used first
}

type cachedBucket struct {
	id [sha256.Size]byte
	b  *OSSBucket
}

// NewOSS checks cfg and prepares the store; it does no network I/O.
func NewOSS(cfg OSSConfig) (*OSS, error) {
	switch {
	case cfg.Endpoint == "":
		return nil, errors.New("ossresult: OSS endpoint is empty (OSS_ENDPOINT)")
	case cfg.Bucket == "":
		return nil, errors.New("ossresult: OSS bucket is empty (OSS_BUCKET)")
	case cfg.Region == "":
		return nil, errors.New("ossresult: OSS region is empty (OSS_REGION); V4 signing needs it")
	}
	if !strings.Contains(cfg.Endpoint, "://") {
		cfg.Endpoint = "https://" + cfg.Endpoint
	}
	if cfg.HTTPTimeout <= 0 {
		cfg.HTTPTimeout = defaultHTTPTimeout
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = defaultMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	// Probe the endpoint and bucket name once, so With cannot fail on them.
	if _, err := newBucket(cfg, nil, Credentials{AccessKeyID: "probe", AccessKeySecret: "probe"}); err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 32
	tr.ResponseHeaderTimeout = cfg.HTTPTimeout
	client := &http.Client{
		Transport: tr,
		// OSS answers 3xx only for misaddressed requests: surface them, don't
		// re-send a signed request elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &OSS{cfg: cfg, client: client}, nil
}

// With returns the bucket handle bound to creds, reusing the one made for
// the same credential triple among the last few.
func (s *OSS) With(creds Credentials) (*OSSBucket, error) {
	if creds.AccessKeyID == "" || creds.AccessKeySecret == "" {
		return nil, &Error{Op: "with", kind: ErrPermission,
			Err: errors.New("no OSS access key (FC request headers or ALIBABA_CLOUD_ACCESS_KEY_ID/SECRET)")}
	}
	id := creds.fingerprint()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, c := range s.cache {
		if c.id == id {
			copy(s.cache[1:i+1], s.cache[:i])
			s.cache[0] = c
			return c.b, nil
		}
	}
	b, err := newBucket(s.cfg, s.client, creds)
	if err != nil {
		return nil, err
	}
	if len(s.cache) < credCacheSize {
		s.cache = append(s.cache, cachedBucket{})
	}
	copy(s.cache[1:], s.cache[:len(s.cache)-1])
	s.cache[0] = cachedBucket{id: id, b: b}
	return b, nil
}

// fingerprint identifies the triple without keeping the secret as a map key;
// the length prefixes keep ("ab","c") and ("a","bc") apart.
// Every invocation asks (With), so the bytes are laid out in a buffer of
// its own, not printed into the hash.
func (c Credentials) fingerprint() [sha256.Size]byte {
	var buf [2048]byte // an STS token fits; a longer one grows it
	b := buf[:0]
	for _, f := range [...]string{c.AccessKeyID, c.AccessKeySecret, c.SecurityToken} {
		b = append(append(append(strconv.AppendInt(b, int64(len(f)), 10), ':'), f...), ';')
	}
	return sha256.Sum256(b)
}

func newBucket(cfg OSSConfig, client *http.Client, creds Credentials) (*OSSBucket, error) {
	opts := []oss.ClientOption{
		oss.AuthVersion(oss.AuthV4),
		oss.Region(cfg.Region),
		oss.SecurityToken(creds.SecurityToken),
		oss.EnableCRC(true), // the default, stated: PUT responses are checked against x-oss-hash-crc64ecma
	}
	if client != nil {
		opts = append(opts, oss.HTTPClient(client))
	}
	c, err := oss.New(cfg.Endpoint, creds.AccessKeyID, creds.AccessKeySecret, opts...)
	if err != nil {
		return nil, fmt.Errorf("ossresult: OSS endpoint %q: %w", cfg.Endpoint, err)
	}
	b, err := c.Bucket(cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("ossresult: OSS bucket %q: %w", cfg.Bucket, err)
	}
	return &OSSBucket{bucket: b, name: cfg.Bucket, timeout: cfg.HTTPTimeout, retries: cfg.MaxRetries}, nil
}
