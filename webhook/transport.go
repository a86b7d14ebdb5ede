package webhook

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// errBlockedDestination is the dial error for a destination refused by
// Config.BlockPrivateNetworks.
var errBlockedDestination = errors.New("destination address not allowed")

// blockedPrefixes are refused by BlockPrivateNetworks on top of what
// netip.Addr's predicates catch (loopback, private, link-local, multicast,
// unspecified).
var blockedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("192.88.99.0/24"),  // 6to4 relay anycast
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and broadcast
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64: may reach private IPv4
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("100::/64"),        // discard
	netip.MustParsePrefix("2001::/32"),       // Teredo: may embed private IPv4
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4: may embed private IPv4
	netip.MustParsePrefix("fec0::/10"),       // deprecated site-local
}

// publicAddr reports whether a may be dialled under BlockPrivateNetworks.
func publicAddr(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsUnspecified() ||
		a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() ||
		a.IsMulticast() {
		return false
	}
	for _, p := range blockedPrefixes {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// ErrNotPublicHost is what CheckPublicHost returns for a host that is not a
// valid public webhook destination.
var ErrNotPublicHost = errors.New("not a valid public host")

// CheckPublicHost reports whether host (a URL's host without port or
// brackets, as url.URL.Hostname returns it) may be a webhook destination
// when private networks are refused. It is the create/update-time half of
// BlockPrivateNetworks, for the merchant API to refuse a bad webhook_url at
// once (invoice.MerchantRules.WebhookHost):
//
//   - an IP literal must be public by the rules the dialer applies (no
//     loopback, private, link-local, unspecified, multicast or reserved
//     address: http://127.0.0.1, http://169.254.169.254, http://[::1],
//     http://0.0.0.0);
//   - a host whose last label is a number ("0", "2130706433", "0x7f000001",
//     "0177.0.0.1", "127.1") is not a dotted-quad address but what many
//     resolvers and browsers read as an IPv4 address: refused;
//   - "localhost" and names under it (RFC 6761) are loopback by definition.
//
// Any other name passes: what it resolves to is checked when it is dialled,
// every time, which also stops DNS rebinding. Errors wrap ErrNotPublicHost.
func CheckPublicHost(host string) error {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "" {
		return ErrNotPublicHost
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if !publicAddr(a) {
			return fmt.Errorf("%w: a loopback, private, link-local or reserved address", ErrNotPublicHost)
		}
		return nil
	}
	labels := strings.Split(h, ".")
	if numericLabel(labels[len(labels)-1]) {
		return fmt.Errorf("%w: a numeric host that is not a dotted-quad IPv4 address", ErrNotPublicHost)
	}
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return fmt.Errorf("%w: localhost is loopback", ErrNotPublicHost)
	}
	return nil
}

// numericLabel reports whether a host label is a number in the forms
// inet_aton and the WHATWG URL parser accept: decimal, octal (leading 0) or
// hexadecimal (0x…).
func numericLabel(l string) bool {
	digits := l
	if strings.HasPrefix(l, "0x") {
		digits = l[2:]
		return strings.Trim(digits, "0123456789abcdef") == ""
	}
	return l != "" && strings.Trim(digits, "0123456789") == ""
}

// refusePrivate is a net.Dialer Control function: it runs after DNS, on
// the address about to be dialled, so a name that resolves (or rebinds) to
// a private address is refused too.
func refusePrivate(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !publicAddr(ap.Addr()) {
		return errBlockedDestination
	}
	return nil
}

// newTransport returns the default transport: http.DefaultTransport's
// settings, enough idle connections per host for PerEndpoint concurrent
// requests, and the private-address check when block is set.
func newTransport(block bool, perEndpoint int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if block {
		dialer.Control = refusePrivate
		t.Proxy = nil // the check must see the destination, not a proxy
	}
	t.DialContext = dialer.DialContext
	t.MaxIdleConnsPerHost = max(perEndpoint, 2)
	return t
}

// newClient wraps rt in a client that never follows redirects; attempts
// are bounded by their context, not by the client.
func newClient(rt http.RoundTripper) *http.Client {
	return &http.Client{
		Transport: rt,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
