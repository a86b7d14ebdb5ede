package nodes

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/ethereum/go-ethereum/rpc"
	"github.com/prometheus/client_golang/prometheus"
)

// Config tunes a Pool. The zero value is usable: every field documents its
// default.
type Config struct {
	// ChainID is the EVM chain id (eth_chainId) every node must answer; a
	// node answering another is excluded and logged at error level. Zero
	// pins the chain id most nodes answer at the first check (a tie goes to
	// the node listed first) for the pool's life: set it in production, so
	// that a wrong node answering alone at the first check is not believed.
	// Defaults to 0.
	ChainID uint64
	// MaxLag is how many blocks a node's head may be behind the highest
	// head of the usable nodes before reads skip it. Whatever the lag, a
	// read never goes to a node whose head is below the highest head the
	// pool has already served from. Defaults to 3.
	MaxLag uint64
	// CheckInterval is the time between two health checks of every node
	// (eth_chainId and eth_blockNumber in one batch, then the block at the
	// head the node reported). Defaults to 1 second.
	CheckInterval time.Duration
	// CheckTimeout bounds one node's health check. Defaults to 2 seconds.
	CheckTimeout time.Duration
	// RequestTimeout bounds one attempt of a request at one node; when it
	// passes the node is marked down and the request goes to the next one.
	// The caller's context bounds the whole request. Defaults to 10 seconds.
	RequestTimeout time.Duration
	// MaxWait is how long a request waits for a usable node (healthy,
	// within MaxLag, at or above the head already served) when there is
	// none, checking the nodes again meanwhile, before it fails with
	// ErrNoNode. Defaults to 10 seconds.
	MaxWait time.Duration
	// MaxResponseBytes is the largest answer a node may give to one
	// request; a larger one fails the request (it is not a node fault, so
	// no other node is tried). Defaults to 64 MiB.
	MaxResponseBytes int64
	// Guard, when set, is asked about every node after its health check
	// passed, at most every GuardInterval and whenever the node was not
	// usable before; a node it returns an error for is excluded until it
	// passes. The client talks to that node alone; url is the node's URL
	// as configured (it may carry credentials: never log it, use
	// RedactURL). A host passes the chain identity check here so that it
	// applies per node. Defaults to nil (no extra check).
	Guard func(ctx context.Context, url string, c *rpc.Client) error
	// GuardInterval is the longest time between two Guard calls for a
	// usable node. Defaults to 10 seconds.
	GuardInterval time.Duration
	// Transport carries every request to the nodes (TLS settings, a dialer
	// of your own). Defaults to an http.Transport with a 5 s dial timeout,
	// the system's TLS roots, no environment proxy, no compression and 64
	// idle connections per node.
	Transport http.RoundTripper

	// Registerer receives the pool's Prometheus collectors. Two pools on
	// one registry need prometheus.WrapRegistererWith with a label each
	// (say the chain). Defaults to a new private registry, available from
	// Pool.Gatherer.
	Registerer prometheus.Registerer
	// Logger receives node state changes: a node down, back, behind, on
	// another chain (error), failovers (warn). Defaults to a logger that
	// discards everything.
	Logger *slog.Logger
}

const (
	defaultMaxLag         = 3
	defaultCheckInterval  = time.Second
	defaultCheckTimeout   = 2 * time.Second
	defaultRequestTimeout = 10 * time.Second
	defaultMaxWait        = 10 * time.Second
	defaultMaxResponse    = 64 << 20
	defaultGuardInterval  = 10 * time.Second
)

func (c Config) withDefaults() Config {
	c.MaxLag = cmp.Or(c.MaxLag, defaultMaxLag)
	c.CheckInterval = cmp.Or(c.CheckInterval, defaultCheckInterval)
	c.CheckTimeout = cmp.Or(c.CheckTimeout, defaultCheckTimeout)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, defaultRequestTimeout)
	c.MaxWait = cmp.Or(c.MaxWait, defaultMaxWait)
	c.MaxResponseBytes = cmp.Or(c.MaxResponseBytes, defaultMaxResponse)
	c.GuardInterval = cmp.Or(c.GuardInterval, defaultGuardInterval)
	if c.Transport == nil {
		c.Transport = newTransport()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.CheckInterval < 0, c.CheckTimeout < 0, c.RequestTimeout < 0, c.MaxWait < 0, c.GuardInterval < 0:
		return errors.New("nodes: CheckInterval, CheckTimeout, RequestTimeout, MaxWait and GuardInterval must not be negative")
	case c.MaxResponseBytes < 0:
		return errors.New("nodes: MaxResponseBytes must not be negative")
	}
	return nil
}

func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:                  nil, // never through an environment proxy
		DialContext:            (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:    10 * time.Second,
		DisableCompression:     true,
		MaxIdleConns:           256,
		MaxIdleConnsPerHost:    64,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
}
