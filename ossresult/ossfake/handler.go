package ossfake

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"hash/crc64"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
)

// apiError is an OSS error answer.
type apiError struct {
	Status           int
	Code, Message    string
	StringToSign     string // SignatureDoesNotMatch tells the client what it should have signed
	CanonicalRequest string
}

// errorXML is OSS's error body.
type errorXML struct {
	XMLName          xml.Name `xml:"Error"`
	Code             string   `xml:"Code"`
	Message          string   `xml:"Message"`
	RequestID        string   `xml:"RequestId"`
	HostID           string   `xml:"HostId"`
	StringToSign     string   `xml:"StringToSign,omitempty"`
	CanonicalRequest string   `xml:"CanonicalRequest,omitempty"`
}

var crcTable = crc64.MakeTable(crc64.ECMA)

// ServeHTTP answers one OSS request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	bucket, key := s.route(r)
	w.Header().Set("X-Oss-Request-Id", s.requestID())
	w.Header().Set("Server", "AliyunOSS")

	s.mu.Lock()
	failBefore := s.failBefore > 0
	if failBefore {
		s.failBefore--
	}
	failStatus := s.failStatus
	s.mu.Unlock()
	if failBefore {
		s.finish(w, r, key, injected(failStatus))
		return
	}
	if e := s.authenticate(r, bucket, key); e != nil {
		s.finish(w, r, key, e)
		return
	}

	s.mu.Lock()
	failAfter := s.failAfter > 0
	if failAfter {
		s.failAfter--
	}
	s.mu.Unlock()
	out := w
	if failAfter {
		out = httptest.NewRecorder() // the work is done, its answer is lost
	}
	e := s.serveObject(out, r, bucket, key)
	if failAfter {
		e = injected(failStatus)
		out = w
	}
	s.finish(out, r, key, e)
}

func (s *Server) serveObject(w http.ResponseWriter, r *http.Request, bucket, key string) *apiError {
	switch {
	case bucket != s.cfg.Bucket:
		return &apiError{Status: 404, Code: "NoSuchBucket", Message: "The specified bucket does not exist."}
	case key == "" || r.URL.RawQuery != "":
		return &apiError{Status: 501, Code: "NotImplemented", Message: "the fake serves only plain object PUT, GET, HEAD and DELETE"}
	}
	switch r.Method {
	case http.MethodPut:
		return s.put(w, r, key)
	case http.MethodGet, http.MethodHead:
		return s.get(w, r, key)
	case http.MethodDelete: // as OSS: 204 whether or not it existed
		s.mu.Lock()
		delete(s.objects, key)
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	return &apiError{Status: 405, Code: "MethodNotAllowed", Message: "The specified method is not allowed against this resource."}
}

func (s *Server) put(w http.ResponseWriter, r *http.Request, key string) *apiError {
	s.mu.Lock()
	s.puts[key]++
	s.mu.Unlock()
	body, err := io.ReadAll(r.Body)
	if err != nil || (r.ContentLength >= 0 && int64(len(body)) != r.ContentLength) {
		return &apiError{Status: 400, Code: "IncompleteBody", Message: "You did not provide the number of bytes specified by the Content-Length HTTP header."}
	}
	tags, e := s.tagging(r, key)
	if e != nil {
		return e
	}
	sum := md5.Sum(body)
	if v := r.Header.Get("Content-MD5"); v != "" {
		if got, err := base64.StdEncoding.DecodeString(v); err != nil || len(got) != md5.Size {
			return &apiError{Status: 400, Code: "InvalidDigest", Message: "The Content-MD5 you specified is not valid."}
		} else if !bytes.Equal(got, sum[:]) {
			return &apiError{Status: 400, Code: "BadDigest", Message: "The Content-MD5 you specified did not match what we received."}
		}
	}
	obj := Object{
		Body:        body,
		ContentType: r.Header.Get("Content-Type"),
		Meta:        map[string]string{},
		Tags:        tags,
		CRC64:       crc64.Checksum(body, crcTable),
		ETag:        `"` + strings.ToUpper(hex.EncodeToString(sum[:])) + `"`,
		Modified:    s.cfg.Now().UTC(),
	}
	if obj.ContentType == "" {
		obj.ContentType = "application/octet-stream"
	}
	for name, vals := range r.Header {
		if n, ok := strings.CutPrefix(strings.ToLower(name), "x-oss-meta-"); ok {
			obj.Meta[n] = vals[0]
		}
	}
	forbid := strings.EqualFold(r.Header.Get("X-Oss-Forbid-Overwrite"), "true")

	s.mu.Lock()
	_, exists := s.objects[key]
	if !(forbid && exists) {
		s.objects[key] = obj
	}
	s.mu.Unlock()
	if forbid && exists {
		return &apiError{Status: 409, Code: "FileAlreadyExists", Message: "The object you specified already exists and can not be overwritten."}
	}
	h := w.Header()
	h.Set("ETag", obj.ETag)
	h.Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
	h.Set("X-Oss-Hash-Crc64ecma", strconv.FormatUint(obj.CRC64, 10))
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, key string) *apiError {
	s.mu.Lock()
	obj, ok := s.objects[key]
	s.mu.Unlock()
	if !ok {
		return &apiError{Status: 404, Code: "NoSuchKey", Message: "The specified key does not exist."}
	}
	h := w.Header()
	h.Set("Content-Type", obj.ContentType)
	h.Set("Content-Length", strconv.Itoa(len(obj.Body)))
	h.Set("ETag", obj.ETag)
	h.Set("Last-Modified", obj.Modified.Format(http.TimeFormat))
	h.Set("X-Oss-Hash-Crc64ecma", strconv.FormatUint(obj.CRC64, 10))
	h.Set("X-Oss-Object-Type", "Normal")
	h.Set("X-Oss-Storage-Class", "Standard")
	for n, v := range obj.Meta {
		h.Set("X-Oss-Meta-"+n, v)
	}
	if len(obj.Tags) > 0 {
		h.Set("X-Oss-Tagging-Count", strconv.Itoa(len(obj.Tags)))
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(obj.Body)
	}
	return nil
}

// finish writes e (if any) as OSS does and logs the request. HEAD answers
// have no body, so OSS puts the error XML, base64-encoded, in x-oss-err.
func (s *Server) finish(w http.ResponseWriter, r *http.Request, key string, e *apiError) {
	entry := Request{Method: r.Method, Key: key, Status: http.StatusOK}
	if e != nil {
		entry.Status, entry.Code = e.Status, e.Code
		body, _ := xml.MarshalIndent(errorXML{Code: e.Code, Message: e.Message,
			RequestID: w.Header().Get("X-Oss-Request-Id"), HostID: r.Host,
			StringToSign: e.StringToSign, CanonicalRequest: e.CanonicalRequest}, "", "  ")
		body = append([]byte(xml.Header), body...)
		h := w.Header()
		h.Set("Content-Type", "application/xml")
		if r.Method == http.MethodHead {
			h.Set("X-Oss-Err", base64.StdEncoding.EncodeToString(body))
			w.WriteHeader(e.Status)
		} else {
			h.Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(e.Status)
			_, _ = w.Write(body)
		}
	}
	s.mu.Lock()
	s.log = append(s.log, entry)
	s.mu.Unlock()
}

func injected(status int) *apiError {
	code := "InternalError"
	if status == http.StatusServiceUnavailable {
		code = "ServiceUnavailable"
	}
	return &apiError{Status: status, Code: code, Message: "injected fault"}
}

// route splits bucket and key, virtual-host style (bucket.host/key) or path
// style (host/bucket/key). The key is the decoded path.
func (s *Server) route(r *http.Request) (bucket, key string) {
	if strings.HasPrefix(r.Host, s.cfg.Bucket+".") {
		return s.cfg.Bucket, strings.TrimPrefix(r.URL.Path, "/")
	}
	bucket, key, _ = strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	return bucket, key
}

func (s *Server) requestID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	return fmt.Sprintf("%024X", s.nextID)
}
