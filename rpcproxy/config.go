package rpcproxy

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Config tunes a Proxy. The zero value is usable: every field documents its
// default.
type Config struct {
	// Rate is how many calls per second each client may make on average;
	// every call of a batch counts. Set rate.Inf to turn rate limiting off.
	// Defaults to 50.
	Rate rate.Limit
	// Burst is the size of each client's token bucket: how many calls a
	// client that has been quiet may make at once. Defaults to 100.
	Burst int
	// ClientKeyHeader, when set, names a request header (say "X-Api-Key")
	// whose value keys the client's bucket instead of its address; requests
	// without it fall back to the address. Anyone can send any value, so use
	// it only behind a layer that authenticates the key. Defaults to "" (key
	// by address).
	ClientKeyHeader string
	// TrustedProxies lists the networks of the reverse proxies in front of
	// this one. Only when the direct peer is inside one of them is
	// X-Forwarded-For believed: the client is the rightmost address in it
	// that is not itself a trusted proxy. Defaults to none (X-Forwarded-For
	// is ignored).
	TrustedProxies []netip.Prefix
	// IPv6PrefixLen is how many leading bits of an IPv6 client address make
	// up its bucket key, since one host usually owns a whole /64. Set 128 to
	// key on the full address. Defaults to 64.
	IPv6PrefixLen int
	// MaxBuckets caps the number of client buckets held in memory. Buckets
	// that have refilled completely or have been idle for BucketIdleTimeout
	// are dropped first; at the cap an arbitrary bucket is dropped (its
	// client starts again with a full bucket). Defaults to 100000.
	MaxBuckets int
	// BucketIdleTimeout drops a bucket that has not been used for this long
	// even if it has not refilled yet (only matters for very low rates).
	// Defaults to 10 minutes.
	BucketIdleTimeout time.Duration

	// MaxBatchSize is the largest batch accepted; a larger one is refused
	// whole with HTTP 413. Defaults to 100.
	MaxBatchSize int
	// MaxBodyBytes is the largest request body accepted (HTTP 413 above).
	// The body is held in a buffer that grows with the bytes received,
	// never to a length the client only declared. Defaults to 1 MiB.
	MaxBodyBytes int64
	// MaxResponseBytes is the largest answer the node may give to one
	// request. An answer that declares more gets HTTP 502 (-32020); a
	// streamed answer without a declared length that runs over is cut off
	// (the client's connection is closed mid-answer, so it cannot mistake
	// it for a whole one); a buffered one (partly refused batch) fails its
	// calls with -32020. Defaults to 64 MiB.
	MaxResponseBytes int64
	// MaxBufferedBytes bounds the memory of all request bodies being read
	// and all node answers being buffered (to splice partly refused
	// batches) at once, across clients. A request that would go over it is
	// refused with HTTP 503 (-32012) and Retry-After. It must be larger
	// than MaxBodyBytes. Defaults to 128 MiB.
	MaxBufferedBytes int64
	// MaxConcurrentRequests caps the requests being handled at once; one
	// more is refused with HTTP 503 (-32012) before its body is read.
	// Defaults to 1024.
	MaxConcurrentRequests int
	// MaxConcurrentRequestsPerClient caps one client's requests being
	// handled at once (the client as the rate limit keys it: address,
	// trusted X-Forwarded-For or ClientKeyHeader); one more is refused with
	// HTTP 429 (-32024) before its body is read. Defaults to 64.
	MaxConcurrentRequestsPerClient int
	// MaxConns caps the open connections of a listener wrapped by
	// Proxy.LimitListener; one more is closed as soon as it is accepted.
	// Defaults to 4096.
	MaxConns int
	// MaxConnsPerClient caps the open connections from one client address
	// (IPv6: its IPv6PrefixLen prefix) on a listener wrapped by
	// Proxy.LimitListener. Peers in TrustedProxies are exempt (they carry
	// many clients) and count only towards MaxConns. Defaults to 128.
	MaxConnsPerClient int
	// UpstreamTimeout bounds one round trip to the node, body included;
	// when it passes before the response headers arrive the client gets
	// HTTP 504. Defaults to 30 seconds.
	UpstreamTimeout time.Duration
	// MaxIdleUpstreamConns is how many keep-alive connections to the node
	// are kept for reuse; set it at least to the expected number of
	// concurrent requests so that connections are not closed and redialled
	// (which leaves sockets in TIME_WAIT). Defaults to 256.
	MaxIdleUpstreamConns int
	// Upstream, when set, carries every request to the node(s) instead of
	// the proxy's own http.Transport: a *nodes.Pool (rpcproxy/nodes) puts
	// several nodes behind the proxy, with health checks, failover and
	// transactions sent to every node. The proxy's request is a POST of
	// the (possibly rebuilt) body with Content-Type application/json and a
	// context bounded by UpstreamTimeout; an error that is a net.Error is
	// answered as an unreachable node (502, -32010). TLSClientConfig,
	// DialContext and MaxIdleUpstreamConns do not apply to it. Defaults to
	// nil: one node at the URL given to New, through the proxy's Transport.
	Upstream http.RoundTripper
	// TLSClientConfig is the TLS configuration for an https node (a
	// private CA in RootCAs, a client certificate). It is cloned. Defaults
	// to nil: the system's roots, the server name from the URL.
	TLSClientConfig *tls.Config
	// DialContext opens every connection to the node (network "tcp",
	// address host:port from the URL); TLS, for https, runs on top of it.
	// Defaults to a net.Dialer with a 5 s timeout and 30 s TCP keep-alive.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)

	// AllowMethods, when not empty, is an allow list: only methods matching
	// an entry are forwarded. An entry ending in "_" is a namespace ("eth_"),
	// any other an exact method name; matching ignores ASCII case. Defaults
	// to empty (every method not denied is forwarded).
	AllowMethods []string
	// DenyMethods lists methods or namespaces that are never forwarded, even
	// when allowed. debug_ is always blocked whatever the lists say.
	// Defaults to DefaultDenyMethods() when nil; set an empty non-nil slice
	// to deny nothing besides debug_.
	DenyMethods []string

	// Registerer receives the proxy's Prometheus collectors. Defaults to a
	// new private registry, available from Proxy.Gatherer.
	Registerer prometheus.Registerer
	// Logger receives upstream failures (warn) and refused requests
	// (debug). Defaults to a logger that discards everything.
	Logger *slog.Logger
	// Now is the clock of the token buckets. Defaults to time.Now.
	Now func() time.Time
}

const (
	defaultRate       = 50
	defaultBurst      = 100
	defaultMaxBatch   = 100
	defaultMaxBody    = 1 << 20
	defaultMaxResp    = 64 << 20
	defaultTimeout    = 30 * time.Second
	defaultIdleConns  = 256
	defaultMaxBuckets = 100_000
	defaultIdle       = 10 * time.Minute
	defaultBuffered   = 128 << 20
	defaultConcurrent = 1024
	defaultPerClient  = 64
	defaultConns      = 4096
	defaultConnsPer   = 128
)

func (c Config) withDefaults() Config {
	c.Rate = cmp.Or(c.Rate, defaultRate)
	c.Burst = cmp.Or(c.Burst, defaultBurst)
	c.IPv6PrefixLen = cmp.Or(c.IPv6PrefixLen, 64)
	c.MaxBuckets = cmp.Or(c.MaxBuckets, defaultMaxBuckets)
	c.BucketIdleTimeout = cmp.Or(c.BucketIdleTimeout, defaultIdle)
	c.MaxBatchSize = cmp.Or(c.MaxBatchSize, defaultMaxBatch)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, defaultMaxBody)
	c.MaxResponseBytes = cmp.Or(c.MaxResponseBytes, defaultMaxResp)
	c.UpstreamTimeout = cmp.Or(c.UpstreamTimeout, defaultTimeout)
	c.MaxIdleUpstreamConns = cmp.Or(c.MaxIdleUpstreamConns, defaultIdleConns)
	c.MaxBufferedBytes = cmp.Or(c.MaxBufferedBytes, defaultBuffered)
	c.MaxConcurrentRequests = cmp.Or(c.MaxConcurrentRequests, defaultConcurrent)
	c.MaxConcurrentRequestsPerClient = cmp.Or(c.MaxConcurrentRequestsPerClient, defaultPerClient)
	c.MaxConns = cmp.Or(c.MaxConns, defaultConns)
	c.MaxConnsPerClient = cmp.Or(c.MaxConnsPerClient, defaultConnsPer)
	if c.DenyMethods == nil {
		c.DenyMethods = DefaultDenyMethods()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Rate < 0:
		return errors.New("rpcproxy: Rate must not be negative")
	case c.Burst < 0:
		return errors.New("rpcproxy: Burst must not be negative")
	case c.IPv6PrefixLen < 0 || c.IPv6PrefixLen > 128:
		return errors.New("rpcproxy: IPv6PrefixLen must be within 1..128")
	case c.MaxBuckets < 0:
		return errors.New("rpcproxy: MaxBuckets must not be negative")
	case c.BucketIdleTimeout < 0:
		return errors.New("rpcproxy: BucketIdleTimeout must not be negative")
	case c.MaxBatchSize < 0:
		return errors.New("rpcproxy: MaxBatchSize must not be negative")
	case c.MaxBodyBytes < 0:
		return errors.New("rpcproxy: MaxBodyBytes must not be negative")
	case c.MaxResponseBytes < 0:
		return errors.New("rpcproxy: MaxResponseBytes must not be negative")
	case c.UpstreamTimeout < 0:
		return errors.New("rpcproxy: UpstreamTimeout must not be negative")
	case c.MaxIdleUpstreamConns < 0:
		return errors.New("rpcproxy: MaxIdleUpstreamConns must not be negative")
	case c.MaxBufferedBytes <= c.MaxBodyBytes:
		return errors.New("rpcproxy: MaxBufferedBytes must be larger than MaxBodyBytes")
	case c.MaxConcurrentRequests < 0 || c.MaxConcurrentRequestsPerClient < 0:
		return errors.New("rpcproxy: MaxConcurrentRequests and MaxConcurrentRequestsPerClient must not be negative")
	case c.MaxConns < 0 || c.MaxConnsPerClient < 0:
		return errors.New("rpcproxy: MaxConns and MaxConnsPerClient must not be negative")
	}
	for _, p := range c.TrustedProxies {
		if !p.IsValid() {
			return errors.New("rpcproxy: TrustedProxies holds an invalid prefix")
		}
	}
	return nil
}
