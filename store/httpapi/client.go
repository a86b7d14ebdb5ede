package httpapi

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ClientAddr is the address a request counts against for per-client limits:
// the peer address, or — when the peer is one of the trusted reverse
// proxies — the rightmost X-Forwarded-For entry that is not a trusted proxy
// (entries further left were written by the client and are not believed).
// IPv6 addresses are masked to v6Prefix bits (one host usually owns a /64).
// The zero Addr when the peer address does not parse.
func ClientAddr(r *http.Request, trusted []netip.Prefix, v6Prefix int) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	a = a.Unmap()
	if len(trusted) > 0 && isTrusted(trusted, a) {
		a = forwardedFor(r.Header.Values("X-Forwarded-For"), trusted, a)
	}
	if a.Is6() {
		if p, err := a.Prefix(v6Prefix); err == nil {
			return p.Addr()
		}
	}
	return a
}

func isTrusted(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// forwardedFor walks X-Forwarded-For from the right and returns the first
// address that is not a trusted proxy; an unparsable entry stops the walk
// at the last good address.
func forwardedFor(values []string, trusted []netip.Prefix, peer netip.Addr) netip.Addr {
	client := peer
	for i := len(values) - 1; i >= 0; i-- {
		entries := strings.Split(values[i], ",")
		for j := len(entries) - 1; j >= 0; j-- {
			entry := strings.TrimSpace(entries[j])
			a, err := netip.ParseAddr(entry)
			if err != nil {
				ap, err := netip.ParseAddrPort(entry)
				if err != nil {
					return client
				}
				a = ap.Addr()
			}
			client = a.Unmap()
			if !isTrusted(trusted, client) {
				return client
			}
		}
	}
	return client
}
