package notify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency"
)

// Pure: checkDial is the socket's Control hook; no address here is dialed.
func TestCheckDial(t *testing.T) {
	withPerm := func(p perm) context.Context { return context.WithValue(context.Background(), permKey{}, p) }
	for _, tc := range []struct {
		name, addr string
		ctx        context.Context
		refused    AddrClass // -1: allowed
	}{
		{"public, no perm in context", "8.8.8.8:443", context.Background(), -1},
		{"loopback, no perm in context", "127.0.0.1:80", context.Background(), AddrLoopback},
		{"loopback, default perm", "127.0.0.2:80", withPerm(perm{}), AddrLoopback},
		{"loopback allowed", "127.0.0.2:80", withPerm(perm{loopback: true}), -1},
		{"private refused", "10.0.0.7:443", withPerm(perm{loopback: true}), AddrPrivate},
		{"private allowed", "192.168.1.1:443", withPerm(perm{private: true}), -1},
		{"CGNAT allowed with private", "100.64.1.1:443", withPerm(perm{private: true}), -1},
		{"metadata refused with every flag", "100.100.100.200:80", withPerm(perm{private: true, loopback: true}), AddrMetadata},
		{"link-local refused", "169.254.169.254:80", withPerm(perm{private: true, loopback: true}), AddrLinkLocal},
		{"link-local v6 with zone refused", "[fe80::1%eth0]:80", withPerm(perm{private: true, loopback: true}), AddrLinkLocal},
		{"unspecified refused", "0.0.0.0:80", withPerm(perm{private: true, loopback: true}), AddrUnspecified},
		{"v4-mapped private refused", "[::ffff:10.0.0.1]:443", withPerm(perm{}), AddrPrivate},
		{"ULA refused", "[fd00::1]:443", withPerm(perm{loopback: true}), AddrPrivate},
		{"not ip:port fails closed", "hook.test:443", withPerm(perm{private: true, loopback: true}), AddrReserved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkDial(tc.ctx, "tcp", tc.addr, nil)
			if tc.refused < 0 {
				if err != nil {
					t.Fatalf("checkDial(%s) = %v, want allowed", tc.addr, err)
				}
				return
			}
			fe, ok := errors.AsType[*forbiddenAddrError](err)
			if !ok || fe.class != tc.refused {
				t.Fatalf("checkDial(%s) = %v, want refusal as %s", tc.addr, err, tc.refused)
			}
		})
	}
}

func TestFirstFailure(t *testing.T) {
	refused := &net.OpError{Op: "dial", Err: &forbiddenAddrError{AddrPrivate}}
	reset := &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		name      string
		errs      []error
		forbidden bool
	}{
		{"no addresses", nil, false},
		{"all refused", []error{refused, refused}, true},
		{"one refused, one unreachable", []error{refused, reset}, false},
		{"unreachable only", []error{reset}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := firstFailure(tc.errs)
			if _, ok := errors.AsType[*forbiddenAddrError](err); err == nil || ok != tc.forbidden {
				t.Fatalf("firstFailure = %v, want forbidden %v", err, tc.forbidden)
			}
		})
	}
}

// acceptLog is a listener that records every connection it accepts.
type acceptLog struct {
	net.Listener
	mu   sync.Mutex
	from []string
}

func (l *acceptLog) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.from = append(l.from, c.RemoteAddr().String())
		l.mu.Unlock()
	}
	return c, err
}

func (l *acceptLog) forget() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.from = nil
}

func (l *acceptLog) accepted() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.from...)
}

// receiverOn serves HTTP on a fresh port of ip (a loopback address).
func receiverOn(t *testing.T, ip string, hits *atomic.Int64) (*acceptLog, string) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		if os.Getenv("CI") == "true" { // Linux routes all of 127.0.0.0/8 to lo: CI must run this
			t.Fatalf("cannot listen on %s (CI=true): %v", ip, err)
		}
		t.Skipf("cannot listen on %s (set CI=true to make this a failure): %v", ip, err)
	}
	al := &acceptLog{Listener: ln}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(al) }()
	t.Cleanup(func() { _ = srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return al, port
}

// onlyMarker proves the listener accepted nothing before this call: it
// connects a marker and waits for it to be accepted. The kernel queues
// connections in arrival order, so anything the client had opened would
// come first.
func onlyMarker(t *testing.T, al *acceptLog) {
	t.Helper()
	c, err := net.Dial("tcp", al.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	marker := c.LocalAddr().String()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if got := al.accepted(); len(got) > 0 && got[len(got)-1] == marker {
			if len(got) != 1 {
				t.Fatalf("the listener accepted %d connections before the marker: %v", len(got)-1, got[:len(got)-1])
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("marker connection never accepted")
}

// testLookup resolves the names in m (to loopback addresses only) and
// counts the lookups; any other name does not exist.
func testLookup(m map[string][]string, n *atomic.Int64) LookupFunc {
	return func(_ context.Context, _, host string) ([]netip.Addr, error) {
		n.Add(1)
		var out []netip.Addr
		for _, s := range m[host] {
			ip := netip.MustParseAddr(s)
			if !ip.IsLoopback() {
				panic("test resolver must answer loopback addresses only: " + s)
			}
			out = append(out, ip)
		}
		if len(out) == 0 {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		return out, nil
	}
}

// The allow list admits hook.test; what it resolves to (127.0.0.2) is
// loopback, which its entry does not allow: refused at the socket, the
// listener never sees a connection. With ";loopback" the same POST lands.
func TestDialTimeRefusal(t *testing.T) {
	var hits atomic.Int64
	al, port := receiverOn(t, "127.0.0.2", &hits)
	for _, tc := range []struct {
		name, allow, url string
		resolve          map[string][]string
		delivered        bool
		wantLookups      int64
	}{
		{name: "allowed name resolving to loopback", allow: "http://hook.test:" + port,
			url: "http://hook.test:" + port + "/h", resolve: map[string][]string{"hook.test": {"127.0.0.2"}}, wantLookups: 1},
		{name: "allowed IP literal that is loopback", allow: "http://127.0.0.2:" + port,
			url: "http://127.0.0.2:" + port + "/h"},
		{name: "private flag does not cover loopback", allow: "http://hook.test:" + port + ";private",
			url: "http://hook.test:" + port + "/h", resolve: map[string][]string{"hook.test": {"127.0.0.2"}}, wantLookups: 1},
		{name: "loopback allowed explicitly", allow: "http://hook.test:" + port + ";loopback", delivered: true,
			url: "http://hook.test:" + port + "/h", resolve: map[string][]string{"hook.test": {"127.0.0.2"}}, wantLookups: 1},
		{name: "second address after a dead first one", allow: "http://hook.test:" + port + ";loopback", delivered: true,
			url: "http://hook.test:" + port + "/h", resolve: map[string][]string{"hook.test": {"127.0.0.3", "127.0.0.2"}}, wantLookups: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			al.forget() // earlier cases' connections and markers
			before := hits.Load()
			var lookups atomic.Int64
			c := New(Options{Timeout: 2 * time.Second, Allow: MustParseAllowList(tc.allow), Lookup: testLookup(tc.resolve, &lookups)})
			t.Cleanup(c.hc.CloseIdleConnections)
			err := c.Post(context.Background(), tc.url, "K1", "req-1", []byte(outcome))
			if n := lookups.Load(); n != tc.wantLookups {
				t.Errorf("%d lookups, want %d", n, tc.wantLookups)
			}
			if tc.delivered {
				if err != nil || hits.Load() != before+1 {
					t.Fatalf("Post = %v, receiver hits %d, want delivered once", err, hits.Load()-before)
				}
				return
			}
			onlyMarker(t, al)
			if c, code := idempotency.Classify(err); c != idempotency.ClassFinal || code != CodeForbidden {
				t.Fatalf("Post = %v (%s/%s), want FINAL %s", err, c, code, CodeForbidden)
			}
			if s := err.Error(); !strings.Contains(s, "is loopback") || strings.Contains(s, "127.0.0.2") && !strings.Contains(tc.url, "127.0.0.2") {
				t.Errorf("error %q should name the class, not the address", s)
			}
		})
	}
}

// Before any connection: a URL the list does not match is refused without
// a lookup or a dial.
func TestPostRefusesUnlistedURL(t *testing.T) {
	var hits atomic.Int64
	al, port := receiverOn(t, "127.0.0.1", &hits)
	for _, tc := range []struct {
		name, allow, url, msg string
	}{
		{"empty list", "", "http://127.0.0.1:" + port + "/h", "NOTIFY_ALLOWED_HOSTS is empty"},
		{"other host", "http://hooks.example.com:" + port + ";loopback", "http://127.0.0.1:" + port + "/h", "is not allowed"},
		{"other port", "http://127.0.0.1:1;loopback", "http://127.0.0.1:" + port + "/h", "is not allowed"},
		{"https entry, http URL", "127.0.0.1:" + port + ";loopback", "http://127.0.0.1:" + port + "/h", "https only"},
		{"metadata service by name", "hooks.example.com", "http://100.100.100.200/latest/meta-data/", "is not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lookups atomic.Int64
			c := New(Options{Allow: MustParseAllowList(tc.allow), Lookup: testLookup(nil, &lookups)})
			if err := c.Allowed(tc.url); err == nil {
				t.Error("Allowed accepted the URL")
			}
			err := c.Post(context.Background(), tc.url+"?token=S3CRET", "K1", "req-1", []byte(outcome))
			if cl, code := idempotency.Classify(err); cl != idempotency.ClassFinal || code != CodeForbidden {
				t.Fatalf("Post = %v (%s/%s), want FINAL %s", err, cl, code, CodeForbidden)
			}
			if !strings.Contains(err.Error(), tc.msg) || strings.Contains(err.Error(), "S3CRET") {
				t.Errorf("error %q: want it to contain %q and not the query", err, tc.msg)
			}
			if lookups.Load() != 0 || hits.Load() != 0 {
				t.Errorf("%d lookups, %d requests: want none", lookups.Load(), hits.Load())
			}
		})
	}
	onlyMarker(t, al)
	if err := New(Options{Allow: MustParseAllowList(fmt.Sprintf("http://127.0.0.1:%s;loopback", port))}).Allowed("http://127.0.0.1:" + port + "/h"); err != nil {
		t.Errorf("Allowed refused a listed URL: %v", err)
	}
}
