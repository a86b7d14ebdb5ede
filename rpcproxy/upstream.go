package rpcproxy

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// The node is reached through net/http's Transport, tuned for one node
// speaking HTTP/1.1 (docs/rpcproxy.md, "The HTTP client to the node",
// records why it is not a hand-written client). What the Transport gives
// that the proxy relies on:
//
//   - Bytes the node sends on an idle keep-alive connection (a second
//     answer, an idle 408, a stray line ending) are not taken for the
//     answer to a later request: the connection's reader sees them while
//     no request is outstanding and the connection is dropped
//     (golang.org/issue/32310; only bytes that arrive in the instant
//     between a connection's pick from the pool and that reader escape
//     it, as with every HTTP/1.1 client).
//   - A POST is sent again only when none of it was written (the pooled
//     connection was already dead); once written, the node may have acted
//     on it, and the client gets the error.
//   - Response framing (length, chunks, end of connection, 1xx, HTTP/1.0)
//     and the cap on the node's header bytes.

// maxUpstreamHeaderBytes caps the node's status line and headers.
const maxUpstreamHeaderBytes = 64 << 10

func newTransport(cfg Config) *http.Transport {
	dial := cfg.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	return &http.Transport{
		Proxy:                  nil, // never through an environment proxy
		DialContext:            dial,
		TLSClientConfig:        cfg.TLSClientConfig.Clone(),
		TLSHandshakeTimeout:    10 * time.Second,
		DisableCompression:     true, // the node's bytes are streamed as they are
		MaxIdleConns:           cfg.MaxIdleUpstreamConns,
		MaxIdleConnsPerHost:    cfg.MaxIdleUpstreamConns,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: maxUpstreamHeaderBytes,
		// HTTP/1.1 only: with a DialContext of its own the Transport does
		// not try HTTP/2, and nodes speak HTTP/1.1.
	}
}

// upstreamTarget is what every request to the node shares: its URL
// (without user info) and headers, read-only.
type upstreamTarget struct {
	url    *url.URL
	header http.Header
}

func newUpstreamTarget(u *url.URL, auth []string) upstreamTarget {
	t := *u
	t.User = nil
	h := http.Header{
		"Content-Type": headerJSON,
		"User-Agent":   {"evmpay-rpcproxy"},
	}
	if auth != nil {
		h["Authorization"] = auth
	}
	return upstreamTarget{url: &t, header: h}
}

// request is a POST of body to the node, bounded by ctx. The Transport
// reads body from its own goroutine, possibly after RoundTrip returned, so
// the caller must not reuse it. A *bytes.Reader (behind io.NopCloser) is
// one the Transport knows to be in memory: it writes the head and the body
// in one write.
func (t upstreamTarget) request(ctx context.Context, body []byte) *http.Request {
	req := &http.Request{
		Method:        http.MethodPost,
		URL:           t.url,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        t.header,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Host:          t.url.Host,
		// A request none of which was written may be sent again.
		GetBody: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil },
	}
	return req.WithContext(ctx)
}
