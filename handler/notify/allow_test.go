package notify

import (
	"net/url"
	"strings"
	"testing"
)

func TestParseAllowList(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     string // canonical form; "" with wantErr
		wantErr  string
	}{
		{name: "empty", in: "", want: ""},
		{name: "blanks only", in: " , ,", want: ""},
		{name: "bare host is https on 443", in: "hooks.example.com", want: "https://hooks.example.com:443"},
		{name: "case and trailing dot", in: "HTTPS://Hooks.Example.COM.", want: "https://hooks.example.com:443"},
		{name: "host and port", in: "api.example.com:8443", want: "https://api.example.com:8443"},
		{name: "wildcard", in: "*.example.com", want: "https://*.example.com:443"},
		{name: "any host", in: "*", want: "https://*:443"},
		{name: "plain http defaults to 80", in: "http://hooks.internal", want: "http://hooks.internal:80"},
		{name: "plain http with port and private", in: "http://hooks.internal:8080;private",
			want: "http://hooks.internal:8080;private"},
		{name: "both flags, any order and case", in: "h.test ; LOOPBACK;private", want: "https://h.test:443;private;loopback"},
		{name: "several entries", in: "a.example.com, *.b.example.com:8443 ,http://10.0.0.5:8080;private",
			want: "https://a.example.com:443,https://*.b.example.com:8443,http://10.0.0.5:8080;private"},
		{name: "ipv6 literal", in: "http://[::1]:9000;loopback", want: "http://[::1]:9000;loopback"},
		{name: "ipv4-mapped literal is the IPv4 address", in: "[::ffff:10.0.0.1]:443;private", want: "https://10.0.0.1:443;private"},
		{name: "underscore label", in: "my_hook.internal", want: "https://my_hook.internal:443"},

		{name: "ftp scheme", in: "ftp://files.example.com", wantErr: `scheme "ftp"`},
		{name: "path", in: "https://hooks.example.com/x", wantErr: "not a URL with a path"},
		{name: "userinfo", in: "u:p@hooks.example.com", wantErr: "not a URL with a path"},
		{name: "port zero", in: "hooks.example.com:0", wantErr: "port"},
		{name: "port too big", in: "hooks.example.com:65536", wantErr: "port"},
		{name: "port not a number", in: "hooks.example.com:https", wantErr: "port"},
		{name: "empty port", in: "hooks.example.com:", wantErr: "port"},
		{name: "unbracketed ipv6", in: "::1", wantErr: "brackets"},
		{name: "unknown flag", in: "h.test;public", wantErr: `unknown flag "public"`},
		{name: "empty flag", in: "h.test;", wantErr: "empty flag"},
		{name: "wildcard over a TLD", in: "*.com", wantErr: "top-level domain"},
		{name: "wildcard in the middle", in: "a.*.example.com", wantErr: "want a DNS name"},
		{name: "unicode host", in: "hööks.example.com", wantErr: "punycode"},
		{name: "label starts with hyphen", in: "-x.example.com", wantErr: "want a DNS name"},
		{name: "empty label", in: "a..example.com", wantErr: "want a DNS name"},
		{name: "any host with a flag", in: "*;private", wantErr: `"*" allows any host`},
		{name: "any host over http", in: "http://*", wantErr: `"*" allows any host`},
		{name: "zone", in: "[fe80::1%25eth0]", wantErr: "zone"},
		{name: "bad entry named by position", in: "ok.example.com,bad/entry", wantErr: `entry 2 "bad/entry"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParseAllowList(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseAllowList(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseAllowList(%q): %v", tc.in, err)
			}
			if got := a.String(); got != tc.want {
				t.Errorf("ParseAllowList(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if a.Empty() != (tc.want == "") {
				t.Errorf("Empty() = %v", a.Empty())
			}
		})
	}
}

func TestAllowListPermit(t *testing.T) {
	list := MustParseAllowList(strings.Join([]string{
		"hooks.example.com",
		"api.example.com:8443",
		"*.corp.example.com",
		"http://hooks.internal:8080;private",
		"hooks.internal;loopback", // https, 443: flags only for that scheme and port
		"*.lab.example.com;private",
		"x.lab.example.com;loopback", // flags of matching entries add up
		"http://127.0.0.1:9000;loopback",
		"[2001:db8::5]:8443",
	}, ","))
	anyHost := MustParseAllowList("*,http://hooks.internal:8080;private")
	none, all := perm{}, perm{private: true, loopback: true}
	for _, tc := range []struct {
		name, url string
		list      *AllowList // nil: the list above
		ok        bool
		perm      perm
	}{
		{name: "exact host", url: "https://hooks.example.com/h/SECRET", ok: true},
		{name: "exact host, explicit default port", url: "https://hooks.example.com:443/h", ok: true},
		{name: "exact host, upper case and trailing dot", url: "https://HOOKS.example.com./h", ok: true},
		{name: "exact host over http", url: "http://hooks.example.com/h"},
		{name: "exact host, other port", url: "https://hooks.example.com:8443/h"},
		{name: "sibling host", url: "https://evil.example.com/h"},
		{name: "suffix trick", url: "https://hooks.example.com.evil.test/h"},
		{name: "host with port", url: "https://api.example.com:8443/v1", ok: true},
		{name: "host with port, default port", url: "https://api.example.com/v1"},
		{name: "wildcard one level", url: "https://a.corp.example.com/", ok: true},
		{name: "wildcard two levels", url: "https://a.b.corp.example.com/", ok: true},
		{name: "wildcard does not match its apex", url: "https://corp.example.com/"},
		{name: "wildcard does not match a look-alike", url: "https://evilcorp.example.com/"},
		{name: "http entry", url: "http://hooks.internal:8080/h", ok: true, perm: perm{private: true}},
		{name: "http entry refuses https on its port", url: "https://hooks.internal:8080/h"},
		{name: "https entry of the same host keeps its own flags", url: "https://hooks.internal/h", ok: true, perm: perm{loopback: true}},
		{name: "flags add up", url: "https://x.lab.example.com/", ok: true, perm: all},
		{name: "wildcard flags alone", url: "https://y.lab.example.com/", ok: true, perm: perm{private: true}},
		{name: "ip literal entry", url: "http://127.0.0.1:9000/h", ok: true, perm: perm{loopback: true}},
		{name: "ip literal, other spelling of loopback", url: "http://127.1:9000/h"},
		{name: "ipv6 literal entry", url: "https://[2001:db8:0::5]:8443/h", ok: true},
		{name: "any host", list: &anyHost, url: "https://whatever.example.net/h", ok: true, perm: none},
		{name: "any host is https only", list: &anyHost, url: "http://whatever.example.net/h"},
		{name: "any host is not any IP", list: &anyHost, url: "https://10.0.0.1/h"},
		{name: "any host plus a flagged entry", list: &anyHost, url: "http://hooks.internal:8080/", ok: true, perm: perm{private: true}},
		{name: "empty list", list: &AllowList{}, url: "https://hooks.example.com/h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			l := list
			if tc.list != nil {
				l = *tc.list
			}
			p, ok := l.permit(u)
			if ok != tc.ok || p != tc.perm {
				t.Errorf("permit(%s) = %+v, %v; want %+v, %v", tc.url, p, ok, tc.perm, tc.ok)
			}
		})
	}
}
