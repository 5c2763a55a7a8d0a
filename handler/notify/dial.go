package notify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// LookupFunc resolves a host name, like (*net.Resolver).LookupNetIP.
type LookupFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

// permKey carries a Post's perm to the dialer. The transport dials with the
// request's context values, and it pools connections by scheme, host and
// port, from which the allow list alone decides the perm: a pooled
// connection is never reused under a laxer perm than it was dialed with.
type permKey struct{}

// forbiddenAddrError is a dial refused because of where it would connect.
// It names the class of address, not the address: the answer goes back
// upstream, and which internal address a name resolves to is not theirs
// to learn.
type forbiddenAddrError struct{ class AddrClass }

func (e *forbiddenAddrError) Error() string {
	return fmt.Sprintf("the host's address is %s, which its NOTIFY_ALLOWED_HOSTS entry does not allow", e.class)
}

// dialer resolves the host itself and dials each address in turn; the
// check runs in the socket's Control hook, on the very address connect(2)
// gets, so neither DNS rebinding nor a second resolution can slip past it.
type dialer struct {
	lookup LookupFunc
	d      net.Dialer
}

func newDialer(lookup LookupFunc) *dialer {
	if lookup == nil {
		lookup = net.DefaultResolver.LookupNetIP
	}
	// Timeout and keep-alive as net/http's default transport has them.
	return &dialer{lookup: lookup, d: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, ControlContext: checkDial}}
}

// checkDial refuses a socket whose destination the Post's perm does not
// allow; a dial without a perm in its context may reach public addresses only.
func checkDial(ctx context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &forbiddenAddrError{AddrReserved} // fail closed on anything but ip:port
	}
	p, _ := ctx.Value(permKey{}).(perm)
	if c := ClassifyAddr(ap.Addr()); !p.allows(c) {
		return &forbiddenAddrError{c}
	}
	return nil
}

// DialContext is the transport's dial.
func (x *dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else if ips, err = x.lookup(ctx, ipNetwork(network), host); err != nil {
		return nil, err
	}
	var errs []error
	for _, ip := range ips {
		c, err := x.d.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstFailure(errs)
}

// firstFailure picks the error to report: a refusal only when every address
// was refused (then it is final), else the first other failure (retryable:
// the allowed address may answer next time).
func firstFailure(errs []error) error {
	if len(errs) == 0 {
		return errors.New("no addresses")
	}
	for _, err := range errs {
		if _, ok := errors.AsType[*forbiddenAddrError](err); !ok {
			return err
		}
	}
	return errs[0]
}

func ipNetwork(network string) string {
	switch network {
	case "tcp4":
		return "ip4"
	case "tcp6":
		return "ip6"
	}
	return "ip"
}
