// Package ossfake is an in-process Alibaba Cloud OSS for tests: an httptest
// server that speaks the REST protocol the official Go SDK uses for object
// PUT, GET and HEAD, and checks every request's V4 signature
// (OSS4-HMAC-SHA256) the way OSS does, so a client that signs wrongly, with
// the wrong secret, region, date or STS token, gets OSS's 403 errors.
//
// It also stores user metadata and object tags (x-oss-tagging, checked as
// OSS checks it, and signed like every x-oss-* header), computes
// x-oss-hash-crc64ecma and ETag like OSS, honours x-oss-forbid-overwrite
// (409 FileAlreadyExists), and injects faults ([Server.FailNext],
// [Server.FailNextAfterApply]). [Server.Objects], [Server.Puts] and
// [Server.Requests] let tests count what reached it.
//
// Not modelled: bucket operations, listing, multipart, versioning, ACLs,
// the tagging sub-resource (?tagging), signed-payload hashes and presigned
// URLs.
package ossfake

import (
	"maps"
	"net"
	"net/http/httptest"
	"sync"
	"time"
)

// Config describes the one bucket and the one identity the fake accepts.
type Config struct {
	Bucket, Region               string
	AccessKeyID, AccessKeySecret string
	// SecurityToken, when set, must arrive as x-oss-security-token (STS);
	// when empty, a request that carries a token is refused.
	SecurityToken string
	// MaxSkew is how far the request time may be from Now (OSS: 15 minutes).
	MaxSkew time.Duration
	// Now is the server's clock (default time.Now).
	Now func() time.Time
	// RequireTag, when set, is a tag key every PUT of a key starting with
	// RequireTagPrefix must carry in x-oss-tagging; without it the PUT is
	// refused 400 MissingTag (the fake's own check: an untagged object would
	// escape the lifecycle rules that select by tag).
	RequireTag, RequireTagPrefix string
	// TaggingDenied refuses every PUT that carries x-oss-tagging with 403
	// AccessDenied, as OSS does for a role without oss:PutObjectTagging.
	TaggingDenied bool
}

// Object is a stored object as OSS would report it.
type Object struct {
	Body        []byte
	ContentType string
	Meta        map[string]string // user metadata, names lowercased without x-oss-meta-
	Tags        map[string]string // object tags from x-oss-tagging
	CRC64       uint64            // CRC-64/ECMA-182 of Body
	ETag        string            // quoted upper-case hex MD5 of Body, as for a simple upload
	Modified    time.Time
}

// Request is one entry of the request log.
type Request struct {
	Method, Key string
	Status      int
	Code        string // OSS error code, "" on success
}

// Server is a running fake. Close it when done.
type Server struct {
	*httptest.Server
	cfg Config

	mu         sync.Mutex
	objects    map[string]Object
	puts       map[string]int
	log        []Request
	failBefore int // answer this many requests with failStatus before doing anything
	failAfter  int // apply this many requests, then answer failStatus (a lost response)
	failStatus int
	nextID     uint64
}

// New starts a fake OSS on a loopback port; its Endpoint is s.URL.
func New(cfg Config) *Server {
	s := newServer(cfg)
	s.Server = httptest.NewServer(s)
	return s
}

// Listen is New on addr instead of a loopback port: an address inside a
// network namespace of a benchmark rig (scripts/netrig).
func Listen(cfg Config, addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := newServer(cfg)
	s.Server = httptest.NewUnstartedServer(s)
	s.Listener.Close()
	s.Listener = ln
	s.Start()
	return s, nil
}

func newServer(cfg Config) *Server {
	if cfg.MaxSkew == 0 {
		cfg.MaxSkew = 15 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Server{cfg: cfg, objects: map[string]Object{}, puts: map[string]int{}}
}

// Endpoint is the URL to give the SDK (an IP endpoint, so path style).
func (s *Server) Endpoint() string { return s.URL }

// FailNext answers the next n requests with status (e.g. 503) and OSS's
// error XML, before authenticating or touching any object.
func (s *Server) FailNext(n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failBefore, s.failAfter, s.failStatus = n, 0, status
}

// FailNextAfterApply carries out the next n requests, then answers them with
// status instead of the real answer: the client sees a failure although the
// write took effect, as when a response is lost.
func (s *Server) FailNextAfterApply(n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failBefore, s.failAfter, s.failStatus = 0, n, status
}

// Objects returns a copy of the stored objects by key.
func (s *Server) Objects() map[string]Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Object, len(s.objects))
	for k, o := range s.objects {
		o.Body = append([]byte(nil), o.Body...)
		o.Meta = maps.Clone(o.Meta)
		o.Tags = maps.Clone(o.Tags)
		out[k] = o
	}
	return out
}

// Puts is how many authenticated PUT requests named key, whatever their outcome.
func (s *Server) Puts(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.puts[key]
}

// Requests returns the request log in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
}
