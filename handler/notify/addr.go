package notify

import "net/netip"

// AddrClass says what an IP address reaches. Only [AddrPublic] may be
// dialed by default; an allow-list entry may add [AddrPrivate] (which
// includes [AddrShared]) and [AddrLoopback]. The other classes are never
// dialed: no webhook receiver lives there, and the metadata service hands
// out the function role's credentials.
type AddrClass int

// Address classes, from [ClassifyAddr].
const (
	AddrPublic      AddrClass = iota // globally routable unicast
	AddrLoopback                     // 127.0.0.0/8, ::1
	AddrPrivate                      // RFC 1918, ULA fc00::/7, site-local fec0::/10, local-use NAT64 64:ff9b:1::/48
	AddrShared                       // CGNAT 100.64.0.0/10 (RFC 6598), where Alibaba Cloud's internal services live
	AddrLinkLocal                    // 169.254.0.0/16, fe80::/10
	AddrMetadata                     // 100.100.100.200, the instance metadata service
	AddrUnspecified                  // 0.0.0.0, :: (Linux connects them to the local host)
	AddrMulticast                    // 224.0.0.0/4, ff00::/8
	AddrReserved                     // anything else that is not global unicast: documentation, benchmarking, broadcast, 240/4, …
)

var addrClassNames = [...]string{"public", "loopback", "private", "shared (CGNAT)", "link-local",
	"instance metadata", "unspecified", "multicast", "reserved"}

func (c AddrClass) String() string {
	if c < 0 || int(c) >= len(addrClassNames) {
		return "unknown"
	}
	return addrClassNames[c]
}

// MetadataAddr is Alibaba Cloud's instance metadata service (ECS and FC),
// inside the CGNAT range, refused even where private addresses are allowed.
var MetadataAddr = netip.MustParseAddr("100.100.100.200")

type prefixClass struct {
	p netip.Prefix
	c AddrClass
}

func pc(s string, c AddrClass) prefixClass { return prefixClass{netip.MustParsePrefix(s), c} }

// v4Special is every IPv4 block that is not global unicast (IANA special-
// purpose registry). The first match wins, so the metadata address comes
// before the CGNAT block that contains it.
var v4Special = []prefixClass{
	pc("100.100.100.200/32", AddrMetadata),
	pc("0.0.0.0/32", AddrUnspecified),
	pc("0.0.0.0/8", AddrReserved), // "this network"
	pc("10.0.0.0/8", AddrPrivate),
	pc("100.64.0.0/10", AddrShared),
	pc("127.0.0.0/8", AddrLoopback),
	pc("169.254.0.0/16", AddrLinkLocal),
	pc("172.16.0.0/12", AddrPrivate),
	pc("192.0.0.0/24", AddrReserved),   // IETF protocol assignments
	pc("192.0.2.0/24", AddrReserved),   // TEST-NET-1
	pc("192.88.99.0/24", AddrReserved), // 6to4 relay anycast (deprecated)
	pc("192.168.0.0/16", AddrPrivate),
	pc("198.18.0.0/15", AddrReserved),   // benchmarking
	pc("198.51.100.0/24", AddrReserved), // TEST-NET-2
	pc("203.0.113.0/24", AddrReserved),  // TEST-NET-3
	pc("224.0.0.0/4", AddrMulticast),
	pc("240.0.0.0/4", AddrReserved), // includes 255.255.255.255
}

// v6Special: like v4Special. IPv6 outside 2000::/3 is not global unicast.
var v6Special = []prefixClass{
	pc("::/128", AddrUnspecified),
	pc("::1/128", AddrLoopback),
	pc("64:ff9b:1::/48", AddrPrivate), // local-use NAT64 (RFC 8215)
	pc("100::/64", AddrReserved),      // discard-only
	pc("2001::/23", AddrReserved),     // IETF protocol assignments (Teredo, …)
	pc("2001:db8::/32", AddrReserved), // documentation
	pc("3fff::/20", AddrReserved),     // documentation (RFC 9637)
	pc("fc00::/7", AddrPrivate),
	pc("fe80::/10", AddrLinkLocal),
	pc("fec0::/10", AddrPrivate), // deprecated site-local
	pc("ff00::/8", AddrMulticast),
}

var (
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
)

// ClassifyAddr says what ip reaches. IPv6 forms that carry an IPv4 address
// (IPv4-mapped, NAT64 64:ff9b::/96, 6to4 2002::/16) are classified by that
// IPv4 address, since that is where the packets end up.
func ClassifyAddr(ip netip.Addr) AddrClass {
	ip = ip.WithZone("").Unmap()
	switch {
	case !ip.IsValid():
		return AddrReserved
	case ip.Is4():
		return classify(ip, v4Special, AddrPublic)
	case nat64.Contains(ip):
		b := ip.As16()
		return ClassifyAddr(netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(ip):
		b := ip.As16()
		return ClassifyAddr(netip.AddrFrom4([4]byte(b[2:6])))
	}
	def := AddrReserved
	if globalUnicast6.Contains(ip) {
		def = AddrPublic
	}
	return classify(ip, v6Special, def)
}

func classify(ip netip.Addr, table []prefixClass, def AddrClass) AddrClass {
	for _, e := range table {
		if e.p.Contains(ip) {
			return e.c
		}
	}
	return def
}
