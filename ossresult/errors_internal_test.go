package ossresult

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"testing"

	"github.com/aliyun/aliyun-oss-go-sdk/oss"
)

func TestClassify(t *testing.T) {
	svc := func(status int, code string) error { return oss.ServiceError{StatusCode: status, Code: code} }
	for _, tc := range []struct {
		name      string
		resp      *oss.Response
		err       error
		kind      error
		retryable bool
	}{
		{"400 bad request", nil, svc(400, "InvalidArgument"), nil, false},
		{"401", nil, svc(401, "Unauthorized"), ErrPermission, false},
		{"403 signature", nil, svc(403, "SignatureDoesNotMatch"), ErrPermission, false},
		{"403 skew", nil, svc(403, "RequestTimeTooSkewed"), ErrPermission, false},
		{"404 key", nil, svc(404, "NoSuchKey"), ErrNotFound, false},
		{"404 bucket is configuration", nil, svc(404, "NoSuchBucket"), nil, false},
		{"409 other", nil, svc(409, "OperationAborted"), nil, false},
		{"408", nil, svc(408, "RequestTimeout"), nil, true},
		{"429", nil, svc(429, "TooManyRequests"), nil, true},
		{"500", nil, svc(500, "InternalError"), nil, true},
		{"503", nil, svc(503, "ServiceUnavailable"), nil, true},
		{"502 without OSS XML", &oss.Response{StatusCode: 502, Headers: http.Header{}},
			errors.New("oss: service returned invalid response body, status = 502 Bad Gateway"), nil, true},
		{"connection reset", nil, &net.OpError{Op: "read", Err: syscall.ECONNRESET}, nil, true},
		{"deadline", nil, fmt.Errorf("Put: %w", context.DeadlineExceeded), nil, true},
		{"truncated", nil, io.ErrUnexpectedEOF, nil, true},
		{"local SDK error", nil, errors.New("object name is empty"), nil, false},
		{"request the client refused to send", nil,
			&url.Error{Op: "Put", URL: "http://x/k", Err: errors.New(`net/http: invalid header field value for "X"`)}, nil, false},
		{"url-wrapped reset", nil, &url.Error{Op: "Put", URL: "http://x/k", Err: syscall.ECONNRESET}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := classify("put", "k", tc.resp, tc.err)
			if tc.kind != nil && !errors.Is(err, tc.kind) {
				t.Fatalf("%v: want %v", err, tc.kind)
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("%v lost its cause", err)
			}
			if Retryable(err) != tc.retryable {
				t.Fatalf("Retryable(%v) = %v", err, !tc.retryable)
			}
			if Retryable(fmt.Errorf("wrapped: %w", err)) != tc.retryable {
				t.Fatal("wrapping changed the class")
			}
		})
	}
}

func TestRetryablePlainErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"conflict", ErrConflict, false},
		{"not found", fmt.Errorf("x: %w", ErrNotFound), false},
		{"permission", ErrPermission, false},
		{"invalid", invalid("bad"), false},
		{"timeout", context.DeadlineExceeded, true},
		{"dns", &net.DNSError{Err: "no such host", IsTimeout: true}, true},
		{"other", errors.New("boom"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Retryable(tc.err); got != tc.want {
				t.Fatalf("Retryable = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	for n := range 40 {
		d := backoff(n)
		ceil := min(backoffBase<<min(n, 16), backoffCap)
		if d < ceil/2 || d >= ceil {
			t.Fatalf("backoff(%d) = %v, want in [%v, %v)", n, d, ceil/2, ceil)
		}
	}
}
