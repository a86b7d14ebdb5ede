package rpcproxy

import (
	"hash/maphash"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// clientKey names one token bucket: a client address (IPv6 masked to
// Config.IPv6PrefixLen) or the hash of a client API key.
type clientKey struct {
	addr   netip.Addr
	apiKey uint64
	byKey  bool
}

// clientKeyOf returns the bucket key for r.
func (p *Proxy) clientKeyOf(r *http.Request) clientKey {
	if p.keyHeader != "" {
		if v := r.Header[p.keyHeader]; len(v) > 0 && v[0] != "" {
			return clientKey{apiKey: maphash.String(p.seed, v[0]), byKey: true}
		}
	}
	addr := peerAddr(r.RemoteAddr)
	if len(p.cfg.TrustedProxies) > 0 && trusted(p.cfg.TrustedProxies, addr) {
		addr = forwardedFor(r.Header["X-Forwarded-For"], p.cfg.TrustedProxies, addr)
	}
	return clientKey{addr: p.maskIPv6(addr)}
}

// maskIPv6 keeps the leading Config.IPv6PrefixLen bits of an IPv6
// address: one host usually owns a whole /64.
func (p *Proxy) maskIPv6(addr netip.Addr) netip.Addr {
	if addr.Is6() && p.cfg.IPv6PrefixLen < 128 {
		if pre, err := addr.Prefix(p.cfg.IPv6PrefixLen); err == nil {
			return pre.Addr()
		}
	}
	return addr
}

// peerAddr parses http.Request.RemoteAddr. Unparseable addresses (a Unix
// socket, say) give the zero Addr: such clients share one bucket.
func peerAddr(remote string) netip.Addr {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		a, err := netip.ParseAddr(remote)
		if err != nil {
			return netip.Addr{}
		}
		return a.Unmap()
	}
	return ap.Addr().Unmap()
}

func trusted(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// forwardedFor walks X-Forwarded-For from the right — the entries appended by
// the proxies nearest to us — and returns the first address that is not a
// trusted proxy. Entries further left were written by the client and are not
// believed. An unparseable entry stops the walk at the last good address.
func forwardedFor(values []string, proxies []netip.Prefix, peer netip.Addr) netip.Addr {
	client := peer
	for i := len(values) - 1; i >= 0; i-- {
		v := values[i]
		for v != "" {
			var entry string
			if j := strings.LastIndexByte(v, ','); j >= 0 {
				entry, v = v[j+1:], v[:j]
			} else {
				entry, v = v, ""
			}
			entry = strings.TrimSpace(entry)
			a, err := netip.ParseAddr(entry)
			if err != nil {
				ap, err2 := netip.ParseAddrPort(entry)
				if err2 != nil {
					return client
				}
				a = ap.Addr()
			}
			client = a.Unmap()
			if !trusted(proxies, client) {
				return client
			}
		}
	}
	return client
}

// limiter holds one token bucket per client. Buckets that have refilled
// completely are indistinguishable from new ones and are dropped by a sweep
// (at most once per sweepEvery); buckets idle for longer than idle are
// dropped too. At max buckets the oldest-idle ones are not searched for: a
// sweep runs if the last one is at least a second old, and otherwise an
// arbitrary bucket is evicted, so memory stays bounded even under a flood of
// new clients.
type limiter struct {
	rate  rate.Limit
	burst int
	idle  time.Duration
	max   int

	mu        sync.Mutex
	buckets   map[clientKey]*bucket
	lastSweep time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

const sweepEvery = time.Minute

func newLimiter(r rate.Limit, burst int, idle time.Duration, max int, now time.Time) *limiter {
	return &limiter{rate: r, burst: burst, idle: idle, max: max, buckets: map[clientKey]*bucket{}, lastSweep: now}
}

// take takes up to n tokens from k's bucket and returns how many it got.
func (l *limiter) take(k clientKey, n int, now time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) >= sweepEvery {
		l.sweepLocked(now)
	}
	b := l.buckets[k]
	if b == nil {
		if len(l.buckets) >= l.max {
			if now.Sub(l.lastSweep) >= time.Second {
				l.sweepLocked(now)
			}
			for victim := range l.buckets {
				if len(l.buckets) < l.max {
					break
				}
				delete(l.buckets, victim)
			}
		}
		b = &bucket{lim: rate.NewLimiter(l.rate, l.burst)}
		l.buckets[k] = b
	}
	b.seen = now
	got := min(n, int(b.lim.TokensAt(now)))
	if got > 0 {
		b.lim.AllowN(now, got)
	}
	return max(got, 0)
}

func (l *limiter) sweepLocked(now time.Time) {
	l.lastSweep = now
	full := float64(l.burst)
	for k, b := range l.buckets {
		if now.Sub(b.seen) >= l.idle || b.lim.TokensAt(now) >= full {
			delete(l.buckets, k)
		}
	}
}

func (l *limiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
