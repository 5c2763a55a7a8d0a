package notify

import (
	"net/netip"
	"testing"
)

// Pure classification: no address here is ever dialed.
func TestClassifyAddr(t *testing.T) {
	for _, tc := range []struct {
		name, ip string
		want     AddrClass
	}{
		{"public v4", "8.8.8.8", AddrPublic},
		{"public v4 next to CGNAT", "100.128.0.1", AddrPublic},
		{"public v4 below CGNAT", "100.63.255.255", AddrPublic},
		{"public v4 next to 172.16/12", "172.32.0.1", AddrPublic},
		{"public v6", "2606:4700::1111", AddrPublic},
		{"loopback", "127.0.0.1", AddrLoopback},
		{"loopback second address", "127.0.0.2", AddrLoopback},
		{"loopback top of 127/8", "127.255.255.254", AddrLoopback},
		{"loopback v6", "::1", AddrLoopback},
		{"loopback v4-mapped", "::ffff:127.0.0.1", AddrLoopback},
		{"rfc1918 10/8", "10.1.2.3", AddrPrivate},
		{"rfc1918 172.16/12 low", "172.16.0.1", AddrPrivate},
		{"rfc1918 172.16/12 high", "172.31.255.255", AddrPrivate},
		{"rfc1918 192.168/16", "192.168.0.10", AddrPrivate},
		{"rfc1918 v4-mapped", "::ffff:10.0.0.1", AddrPrivate},
		{"ULA fc00::/7", "fd12:3456:789a::1", AddrPrivate},
		{"ULA low half", "fc00::1", AddrPrivate},
		{"site-local v6 (deprecated)", "fec0::1", AddrPrivate},
		{"local-use NAT64", "64:ff9b:1::a00:1", AddrPrivate},
		{"CGNAT low", "100.64.0.1", AddrShared},
		{"CGNAT high", "100.127.255.254", AddrShared},
		{"CGNAT next to metadata", "100.100.100.201", AddrShared},
		{"metadata", "100.100.100.200", AddrMetadata},
		{"metadata v4-mapped", "::ffff:100.100.100.200", AddrMetadata},
		{"metadata via NAT64", "64:ff9b::6464:64c8", AddrMetadata},
		{"metadata via 6to4", "2002:6464:64c8::1", AddrMetadata},
		{"link-local v4", "169.254.169.254", AddrLinkLocal},
		{"link-local v6", "fe80::1", AddrLinkLocal},
		{"link-local v6 with zone", "fe80::1%eth0", AddrLinkLocal},
		{"private via NAT64", "64:ff9b::a00:1", AddrPrivate},
		{"public via NAT64", "64:ff9b::808:808", AddrPublic},
		{"loopback via 6to4", "2002:7f00:1::", AddrLoopback},
		{"unspecified v4", "0.0.0.0", AddrUnspecified},
		{"unspecified v6", "::", AddrUnspecified},
		{"this network", "0.1.2.3", AddrReserved},
		{"multicast v4", "224.0.0.1", AddrMulticast},
		{"multicast v4 high", "239.255.255.250", AddrMulticast},
		{"multicast v6", "ff02::1", AddrMulticast},
		{"broadcast", "255.255.255.255", AddrReserved},
		{"class E", "240.0.0.1", AddrReserved},
		{"TEST-NET-1", "192.0.2.1", AddrReserved},
		{"TEST-NET-3", "203.0.113.9", AddrReserved},
		{"benchmarking", "198.18.0.1", AddrReserved},
		{"IETF assignments v4", "192.0.0.170", AddrReserved},
		{"documentation v6", "2001:db8::1", AddrReserved},
		{"Teredo", "2001:0:4136:e378::1", AddrReserved},
		{"discard v6", "100::1", AddrReserved},
		{"IPv4-compatible (deprecated)", "::a00:1", AddrReserved},
		{"outside 2000::/3", "4000::1", AddrReserved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClassifyAddr(netip.MustParseAddr(tc.ip)); got != tc.want {
				t.Errorf("ClassifyAddr(%s) = %s, want %s", tc.ip, got, tc.want)
			}
		})
	}
	if got := ClassifyAddr(netip.Addr{}); got != AddrReserved {
		t.Errorf("zero Addr = %s, want reserved", got)
	}
}

// What each permission lets through: the metadata service, link-local and
// the rest never, whatever the entry says.
func TestPermAllows(t *testing.T) {
	all := perm{private: true, loopback: true}
	for _, tc := range []struct {
		name  string
		p     perm
		class AddrClass
		want  bool
	}{
		{"public by default", perm{}, AddrPublic, true},
		{"loopback refused by default", perm{}, AddrLoopback, false},
		{"private refused by default", perm{}, AddrPrivate, false},
		{"CGNAT refused by default", perm{}, AddrShared, false},
		{"private flag: private", perm{private: true}, AddrPrivate, true},
		{"private flag: CGNAT", perm{private: true}, AddrShared, true},
		{"private flag: not loopback", perm{private: true}, AddrLoopback, false},
		{"loopback flag: loopback", perm{loopback: true}, AddrLoopback, true},
		{"loopback flag: not private", perm{loopback: true}, AddrPrivate, false},
		{"both: metadata still refused", all, AddrMetadata, false},
		{"both: link-local still refused", all, AddrLinkLocal, false},
		{"both: unspecified still refused", all, AddrUnspecified, false},
		{"both: multicast still refused", all, AddrMulticast, false},
		{"both: reserved still refused", all, AddrReserved, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.allows(tc.class); got != tc.want {
				t.Errorf("%+v allows %s = %v, want %v", tc.p, tc.class, got, tc.want)
			}
		})
	}
}
