package rpcproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// upstream is the proxy's HTTP/1.1 client to the node: a pool of
// keep-alive connections, each used by one request at a time, written and
// read on the handler's own goroutine.
//
// net/http's Transport hands every request to a per-connection writer
// goroutine and its answer back from a reader goroutine; with an instantly
// answering node those two hand-offs (and the wake-ups they cost) were the
// largest share of the proxy's own CPU in the profile (BENCHMARKS.md). The
// node speaks plain HTTP/1.1 JSON-RPC, one POST at a time, so this client
// does only that: one write of the request, http.ReadResponse for the
// answer, and the connection back to the pool once its body is read.
type upstream struct {
	addr    string      // host:port
	tls     *tls.Config // nil for http
	head    []byte      // the request line and fixed headers, up to "Content-Length: "
	dialer  net.Dialer
	maxIdle int

	mu   sync.Mutex
	idle []*upConn
}

// upConn is one keep-alive connection to the node.
type upConn struct {
	c         net.Conn
	br        *bufio.Reader
	buf       []byte    // the request being written
	idleSince time.Time // when it went back to the pool
}

// idleTimeout closes a pooled connection unused for this long (as
// http.Transport's IdleConnTimeout did).
const idleTimeout = 90 * time.Second

func newUpstream(u *url.URL, auth []string, maxIdle int) *upstream {
	host := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	up := &upstream{
		addr:    host,
		dialer:  net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second},
		maxIdle: maxIdle,
	}
	if u.Scheme == "https" {
		up.tls = &tls.Config{ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}}
	}
	path := u.RequestURI()
	h := []byte("POST " + path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUser-Agent: evmpay-rpcproxy\r\nContent-Type: application/json\r\n")
	for _, a := range auth {
		h = append(h, "Authorization: "+a+"\r\n"...)
	}
	h = append(h, "Content-Length: "...)
	up.head = h
	return up
}

// roundTrip posts body and returns the node's answer. The caller must close
// the response body; reading it to the end (or closing it after a complete
// read) returns the connection to the pool. ctx bounds the whole exchange,
// the body included.
func (up *upstream) roundTrip(ctx context.Context, body []byte) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		uc, reused, err := up.get(ctx)
		if err != nil {
			return nil, err
		}
		resp, err := up.exchange(ctx, uc, body)
		if err == nil {
			return resp, nil
		}
		uc.c.Close()
		// A pooled connection the node closed while it sat idle fails at
		// once: try again, once, on a fresh one. JSON-RPC calls are safe to
		// repeat (eth_sendRawTransaction is idempotent by transaction hash).
		if reused && attempt == 0 && ctx.Err() == nil && staleConn(err) {
			continue
		}
		return nil, err
	}
}

// staleConn reports the errors of a connection the peer had closed: end of
// file, or a failed read or write (reset, broken pipe); not a timeout.
func staleConn(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	var oe *net.OpError
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &oe)
}

// longAgo is a deadline in the past: it interrupts a blocked read or write.
var longAgo = time.Unix(1, 0)

func (up *upstream) exchange(ctx context.Context, uc *upConn, body []byte) (*http.Response, error) {
	if dl, ok := ctx.Deadline(); ok {
		if err := uc.c.SetDeadline(dl); err != nil {
			return nil, err
		}
	}
	// A cancelled caller interrupts the exchange wherever it blocks.
	stop := context.AfterFunc(ctx, func() { _ = uc.c.SetDeadline(longAgo) })
	uc.buf = append(uc.buf[:0], up.head...)
	uc.buf = strconv.AppendInt(uc.buf, int64(len(body)), 10)
	uc.buf = append(uc.buf, "\r\n\r\n"...)
	var err error
	if len(uc.buf)+len(body) <= 4096 {
		uc.buf = append(uc.buf, body...)
		_, err = uc.c.Write(uc.buf)
	} else {
		bufs := net.Buffers{uc.buf, body}
		_, err = bufs.WriteTo(uc.c)
	}
	if err == nil {
		var resp *http.Response
		resp, err = http.ReadResponse(uc.br, nil)
		if err == nil {
			resp.Body = &upBody{rc: resp.Body, up: up, uc: uc, stop: stop, keep: !resp.Close}
			return resp, nil
		}
	}
	stop()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, err
}

// upBody returns its connection to the pool when it has been read to the
// end and closed.
type upBody struct {
	rc   io.ReadCloser
	up   *upstream
	uc   *upConn
	stop func() bool
	keep bool // the node did not ask to close
	eof  bool
	done bool
}

func (b *upBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *upBody) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	err := b.rc.Close()
	// stop reports false when the cancellation already poisoned the
	// connection's deadline: such a connection is not reused.
	if b.stop() && b.keep && b.eof && err == nil && b.uc.br.Buffered() == 0 {
		if b.uc.c.SetDeadline(time.Time{}) == nil {
			b.up.put(b.uc)
			return nil
		}
	}
	b.uc.c.Close()
	return err
}

func (up *upstream) get(ctx context.Context) (uc *upConn, reused bool, err error) {
	up.mu.Lock()
	for n := len(up.idle); n > 0; n = len(up.idle) {
		uc = up.idle[n-1]
		up.idle = up.idle[:n-1]
		if time.Since(uc.idleSince) < idleTimeout {
			up.mu.Unlock()
			return uc, true, nil
		}
		uc.c.Close() // the most recently used is stale: so are the rest
		for _, old := range up.idle {
			old.c.Close()
		}
		up.idle = up.idle[:0]
	}
	up.mu.Unlock()
	var c net.Conn
	if up.tls != nil {
		d := tls.Dialer{NetDialer: &up.dialer, Config: up.tls}
		c, err = d.DialContext(ctx, "tcp", up.addr)
	} else {
		c, err = up.dialer.DialContext(ctx, "tcp", up.addr)
	}
	if err != nil {
		return nil, false, err
	}
	return &upConn{c: c, br: bufio.NewReaderSize(c, 4096), buf: make([]byte, 0, 512)}, false, nil
}

func (up *upstream) put(uc *upConn) {
	uc.idleSince = time.Now()
	up.mu.Lock()
	if len(up.idle) < up.maxIdle {
		up.idle = append(up.idle, uc)
		uc = nil
	}
	up.mu.Unlock()
	if uc != nil {
		uc.c.Close()
	}
}

// closeIdle closes the pooled connections; those in use are closed when
// their request ends.
func (up *upstream) closeIdle() {
	up.mu.Lock()
	idle := up.idle
	up.idle = nil
	up.mu.Unlock()
	for _, uc := range idle {
		uc.c.Close()
	}
}
