package invoice

import (
	"cmp"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/evmpay/evmpay/store/httpapi"
)

// LookupLimit bounds how many failed lookup-token reads (a token that
// matches no invoice, or no token at all) one client address may make: a
// guesser gets 429 with Retry-After, while a page polling with its right
// token never fails and is never slowed.
type LookupLimit struct {
	// Rate is how many failed lookups per second a client earns back.
	// Defaults to 0.2 (one every 5 s).
	Rate rate.Limit
	// Burst is how many failed lookups a client may make at once (a payer
	// who mistypes a link a few times). Defaults to 10.
	Burst int
	// IPv6PrefixLen groups IPv6 clients by prefix (one host usually owns
	// a /64). Defaults to 64.
	IPv6PrefixLen int
	// TrustedProxies are the networks of the reverse proxies in front of
	// the API: behind one, the client is the rightmost X-Forwarded-For
	// address that is not a trusted proxy (otherwise every payer would
	// share the proxy's address, and one guesser would block them all).
	// Defaults to none: the peer address.
	TrustedProxies []netip.Prefix
}

func (l *LookupLimit) fill() {
	l.Rate = cmp.Or(l.Rate, 0.2)
	l.Burst = cmp.Or(l.Burst, 10)
	l.IPv6PrefixLen = cmp.Or(l.IPv6PrefixLen, 64)
}

// lookupLimiter keeps a token bucket of failed lookups per client address.
type lookupLimiter struct {
	cfg     LookupLimit
	mu      sync.Mutex
	buckets map[netip.Addr]*rate.Limiter
	swept   time.Time
}

func newLookupLimiter(cfg LookupLimit) *lookupLimiter {
	return &lookupLimiter{cfg: cfg, buckets: map[netip.Addr]*rate.Limiter{}}
}

// client is the address a request counts against.
func (l *lookupLimiter) client(r *http.Request) netip.Addr {
	return httpapi.ClientAddr(r, l.cfg.TrustedProxies, l.cfg.IPv6PrefixLen)
}

// maxLookupBuckets bounds the clients remembered at once: past it, a
// bucket is evicted for each new client (a flood of addresses costs no
// more memory).
const maxLookupBuckets = 1 << 16

// blocked reports whether the client has no failed lookup left, and how
// long until it has one.
func (l *lookupLimiter) blocked(r *http.Request, now time.Time) (time.Duration, bool) {
	k := l.client(r)
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[k]
	if b == nil || b.TokensAt(now) >= 1 {
		return 0, false
	}
	wait := time.Duration(float64(time.Second) * (1 - b.TokensAt(now)) / float64(l.cfg.Rate))
	return wait, true
}

// failed spends one of the client's failed lookups.
func (l *lookupLimiter) failed(r *http.Request, now time.Time) {
	k := l.client(r)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	b := l.buckets[k]
	if b == nil {
		if len(l.buckets) >= maxLookupBuckets {
			for victim := range l.buckets {
				delete(l.buckets, victim)
				break
			}
		}
		b = rate.NewLimiter(l.cfg.Rate, l.cfg.Burst)
		l.buckets[k] = b
	}
	b.AllowN(now, 1)
}

// sweep drops, at most once a minute, the buckets that are full again:
// they hold nothing a new bucket would not.
func (l *lookupLimiter) sweep(now time.Time) {
	if now.Sub(l.swept) < time.Minute {
		return
	}
	l.swept = now
	for k, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.cfg.Burst) {
			delete(l.buckets, k)
		}
	}
}

// retryAfter is a Retry-After value in whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(int(math.Max(1, math.Ceil(d.Seconds()))))
}
