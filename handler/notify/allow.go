package notify

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// AllowList is the parsed NOTIFY_ALLOWED_HOSTS: which notify URLs may be
// posted to, and which address classes each may resolve to. The zero value
// allows nothing. Grammar (entries separated by commas, blanks ignored):
//
//	entry  = [scheme "://"] host [":" port] *(";" flag)
//	scheme = "https" (the default) | "http"
//	host   = name | "*." name | "*" | IPv4 | "[" IPv6 "]"
//	flag   = "private" | "loopback"
//
// An entry allows exactly its scheme, and its port (without one: 443 for
// https, 80 for http). "*.example.com" matches every name below
// example.com, not example.com itself; "*" matches every name over https
// (no flags, so still public addresses only). The flags let the addresses
// the host resolves to be private (RFC 1918, ULA, CGNAT) or loopback;
// link-local, the metadata service, unspecified, multicast and reserved
// addresses are never dialed. Where several entries match a URL, their
// flags add up.
type AllowList struct {
	entries []allowEntry
}

type allowEntry struct {
	scheme string
	host   string // lower-case name, canonical IP, ".example.com" for a wildcard, "*" for any
	port   string
	perm   perm
}

// perm is which non-public address classes a URL may reach.
type perm struct {
	private, loopback bool
}

func (p perm) allows(c AddrClass) bool {
	switch c {
	case AddrPublic:
		return true
	case AddrPrivate, AddrShared:
		return p.private
	case AddrLoopback:
		return p.loopback
	}
	return false
}

// ParseAllowList parses NOTIFY_ALLOWED_HOSTS. Its errors quote the entry,
// which holds no secret.
func ParseAllowList(s string) (AllowList, error) {
	var a AllowList
	var errs []error
	for i, raw := range strings.Split(s, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		e, err := parseEntry(raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("entry %d %q: %w", i+1, raw, err))
			continue
		}
		a.entries = append(a.entries, e)
	}
	return a, errors.Join(errs...)
}

// MustParseAllowList is ParseAllowList for literals in tests and examples.
func MustParseAllowList(s string) AllowList {
	a, err := ParseAllowList(s)
	if err != nil {
		panic(err)
	}
	return a
}

// Empty reports whether the list allows nothing.
func (a AllowList) Empty() bool { return len(a.entries) == 0 }

// String is the list in canonical form (for the startup log).
func (a AllowList) String() string {
	parts := make([]string, len(a.entries))
	for i, e := range a.entries {
		parts[i] = e.String()
	}
	return strings.Join(parts, ",")
}

func (e allowEntry) String() string {
	host := e.host
	switch {
	case strings.HasPrefix(host, "."):
		host = "*" + host
	case strings.Contains(host, ":"):
		host = "[" + host + "]"
	}
	s := e.scheme + "://" + host + ":" + e.port
	if e.perm.private {
		s += ";private"
	}
	if e.perm.loopback {
		s += ";loopback"
	}
	return s
}

func parseEntry(raw string) (allowEntry, error) {
	spec, flags, hasFlags := strings.Cut(raw, ";")
	spec = strings.TrimSpace(spec)
	e := allowEntry{scheme: "https"}
	if s, rest, ok := strings.Cut(spec, "://"); ok {
		e.scheme, spec = strings.ToLower(s), rest
	}
	if e.scheme != "https" && e.scheme != "http" {
		return e, fmt.Errorf("scheme %q: want https:// (the default) or http://", e.scheme)
	}
	if strings.ContainsAny(spec, "/?#@") {
		return e, errors.New("want a host with an optional port, not a URL with a path, query or user")
	}
	host, port, err := splitHostPort(spec, e.scheme)
	if err != nil {
		return e, err
	}
	e.port = port
	if e.host, err = entryHost(host); err != nil {
		return e, err
	}
	for f := range strings.SplitSeq(flags, ";") {
		switch strings.ToLower(strings.TrimSpace(f)) {
		case "private":
			e.perm.private = true
		case "loopback":
			e.perm.loopback = true
		case "":
			if hasFlags {
				return e, errors.New("empty flag")
			}
		default:
			return e, fmt.Errorf("unknown flag %q: want private or loopback", f)
		}
	}
	if e.host == "*" && (e.scheme != "https" || e.perm != (perm{})) {
		return e, errors.New(`"*" allows any host over https to public addresses only: no http://, no flags`)
	}
	return e, nil
}

// splitHostPort splits "host[:port]" (IPv6 in brackets) and defaults the
// port to the scheme's.
func splitHostPort(spec, scheme string) (host, port string, err error) {
	if !strings.HasPrefix(spec, "[") && strings.Count(spec, ":") > 1 {
		return "", "", errors.New("an IPv6 address goes in brackets: [::1]:8080")
	}
	host, port, err = net.SplitHostPort(spec)
	if err != nil { // no port
		host, port = strings.TrimSuffix(strings.TrimPrefix(spec, "["), "]"), defaultPort(scheme)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port != strconv.Itoa(n) {
		return "", "", fmt.Errorf("port %q: want 1 to 65535", port)
	}
	return host, port, nil
}

func defaultPort(scheme string) string {
	if scheme == "http" {
		return "80"
	}
	return "443"
}

// entryHost checks and canonicalises an entry's host.
func entryHost(h string) (string, error) {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "*" {
		return h, nil
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		if ip.Zone() != "" {
			return "", errors.New("an address with a zone is link-local, which is never allowed")
		}
		return ip.Unmap().String(), nil
	}
	name, wild := strings.CutPrefix(h, "*.")
	if !validName(name) {
		return "", fmt.Errorf("host %q: want a DNS name (ASCII; punycode for others), *.name, * or an IP address", h)
	}
	if wild {
		if !strings.Contains(name, ".") {
			return "", fmt.Errorf("wildcard %q would match a whole top-level domain", h)
		}
		return "." + name, nil
	}
	return name, nil
}

// validName accepts LDH labels (letters, digits, hyphen; underscores too,
// which some internal zones use) of 1 to 63 bytes, at most 253 in all.
func validName(name string) bool {
	if name == "" || len(name) > 253 {
		return false
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// permit returns what u may reach, and whether any entry matches it at all.
func (a AllowList) permit(u *url.URL) (perm, bool) {
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.Unmap().String()
	}
	port := u.Port()
	if port == "" {
		port = defaultPort(u.Scheme)
	}
	var p perm
	found := false
	for _, e := range a.entries {
		if e.scheme == u.Scheme && e.port == port && e.matches(host) {
			found = true
			p.private = p.private || e.perm.private
			p.loopback = p.loopback || e.perm.loopback
		}
	}
	return p, found
}

func (e allowEntry) matches(host string) bool {
	switch {
	case e.host == "*":
		_, err := netip.ParseAddr(host)
		return err != nil && validName(host) // names only: an IP literal needs its own entry
	case strings.HasPrefix(e.host, "."):
		return strings.HasSuffix(host, e.host) && validName(host)
	}
	return host == e.host
}
