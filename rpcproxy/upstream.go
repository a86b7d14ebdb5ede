package rpcproxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
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
	br        *bufio.Reader // reads through Read below
	buf       []byte        // the request being written
	idleSince time.Time     // when it went back to the pool

	// The exchange under way: its client's context and its deadline.
	ctx      context.Context
	deadline time.Time
}

// cancelPoll is how often a read waiting for the node checks whether the
// client went away.
const cancelPoll = 100 * time.Millisecond

// Read reads from the node until the exchange's deadline, waking every
// cancelPoll to end early when the client has gone away (its request
// context is done). A context.AfterFunc per request did the same at once,
// but registering it with the request's context cost a seventh of the
// proxy's own CPU (BENCHMARKS.md); a call answered within cancelPoll, which
// is nearly every call, costs one read deadline this way.
func (uc *upConn) Read(p []byte) (int, error) {
	for {
		until := uc.deadline
		if poll := time.Now().Add(cancelPoll); poll.Before(until) {
			until = poll
		}
		if err := uc.c.SetReadDeadline(until); err != nil {
			return 0, err
		}
		n, err := uc.c.Read(p)
		if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) || !until.Before(uc.deadline) {
			return n, err
		}
		if err := uc.ctx.Err(); err != nil {
			return 0, err
		}
	}
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

// upResponse is what the proxy uses of the node's answer.
type upResponse struct {
	status int
	// contentType and contentLength are the headers as the node sent them
	// (nil when absent), ready for the client's header map.
	contentType, contentLength []string
	// length is the body's length, -1 when not known in advance.
	length int64
	body   *upBody
}

// roundTrip posts body and returns the node's answer. The caller must close
// the response body; reading it to the end (or closing it after a complete
// read) returns the connection to the pool. The exchange, the body
// included, ends at deadline, or when ctx (the client's request) is
// cancelled.
func (up *upstream) roundTrip(ctx context.Context, deadline time.Time, body []byte) (*upResponse, error) {
	for attempt := 0; ; attempt++ {
		uc, reused, err := up.get(ctx, deadline)
		if err != nil {
			return nil, err
		}
		resp, err := up.exchange(ctx, deadline, uc, body)
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

func (up *upstream) exchange(ctx context.Context, deadline time.Time, uc *upConn, body []byte) (*upResponse, error) {
	uc.ctx, uc.deadline = ctx, deadline
	if err := uc.c.SetWriteDeadline(deadline); err != nil {
		return nil, err
	}
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
		resp := &upResponse{body: &upBody{up: up, uc: uc}}
		if err = readResponse(uc.br, resp); err == nil {
			return resp, nil
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, err
}

// errBadResponse is an answer that is not the HTTP/1.x this client reads.
var errBadResponse = errors.New("rpcproxy: malformed response from the node")

// readResponse reads the status line and headers of the node's answer
// from br and frames its body. net/http's ReadResponse builds a header map
// and a Response for every answer, a sixth of the proxy's own CPU per
// request in the profile (BENCHMARKS.md); the proxy needs four headers:
// Content-Type and Content-Length, which it forwards, and Transfer-Encoding
// and Connection, which frame the body and say whether the connection can
// be reused. Informational (1xx) answers are skipped.
func readResponse(br *bufio.Reader, r *upResponse) error {
	for {
		line, err := readLine(br)
		if err != nil {
			return err
		}
		// "HTTP/1.1 200 OK": version, status code, reason (optional).
		if len(line) < 12 || string(line[:7]) != "HTTP/1." || line[8] != ' ' || (len(line) > 12 && line[12] != ' ') {
			return errBadResponse
		}
		status, ok := parseDigits(line[9:12], 3)
		if !ok || status < 100 {
			return errBadResponse
		}
		http10 := line[7] == '0'
		keep := !http10 // HTTP/1.1 keeps the connection unless told otherwise
		r.status, r.contentType, r.contentLength, r.length = status, nil, nil, -1
		chunked := false
		for {
			line, err = readLine(br)
			if err != nil {
				return err
			}
			if len(line) == 0 {
				break
			}
			colon := bytes.IndexByte(line, ':')
			if colon <= 0 {
				return errBadResponse
			}
			name, value := line[:colon], bytes.TrimSpace(line[colon+1:])
			switch {
			case bytes.EqualFold(name, []byte("Content-Length")):
				n, ok := parseDigits(value, 18)
				if !ok || r.length >= 0 && int64(n) != r.length {
					return errBadResponse
				}
				r.length, r.contentLength = int64(n), []string{string(value)}
			case bytes.EqualFold(name, []byte("Content-Type")):
				r.contentType = headerJSON
				if string(value) != headerJSON[0] {
					r.contentType = []string{string(value)}
				}
			case bytes.EqualFold(name, []byte("Transfer-Encoding")):
				if !bytes.EqualFold(value, []byte("chunked")) {
					return errBadResponse // the node sends no other coding: nothing asked for one
				}
				chunked = true
			case bytes.EqualFold(name, []byte("Connection")):
				for _, tok := range bytes.Split(value, []byte(",")) {
					switch tok = bytes.TrimSpace(tok); {
					case bytes.EqualFold(tok, []byte("close")):
						keep = false
					case bytes.EqualFold(tok, []byte("keep-alive")) && http10:
						keep = true
					}
				}
			}
		}
		if status < 200 {
			continue // 100 Continue and the like: the answer follows
		}
		b := r.body
		b.keep = keep
		switch {
		case status == http.StatusNoContent || status == http.StatusNotModified:
			r.length, r.contentLength = 0, nil
			b.left = 0
		case chunked:
			r.length, r.contentLength = -1, nil
			b.chunked = httputil.NewChunkedReader(br)
		case r.length >= 0:
			b.left = r.length
		default:
			b.left, b.keep = -1, false // the body ends when the node closes
		}
		return nil
	}
}

// readLine returns the next line of br without its line ending; the slice
// is valid until the next read.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, errBadResponse // a header line longer than the buffer
		}
		return nil, err
	}
	return bytes.TrimSuffix(line[:len(line)-1], []byte("\r")), nil
}

// upBody is the node's answer's body, framed by its length, by chunks or
// by the end of the connection. It returns its connection to the pool when
// it has been read to the end and closed.
type upBody struct {
	up      *upstream
	uc      *upConn
	chunked io.Reader // non-nil: the body is chunked
	left    int64     // bytes of a body of known length still to read; -1: until the connection ends
	keep    bool      // the node did not ask to close
	eof     bool
	done    bool
}

func (b *upBody) Read(p []byte) (int, error) {
	if b.eof {
		return 0, io.EOF
	}
	switch {
	case b.chunked != nil:
		n, err := b.chunked.Read(p)
		if err == io.EOF {
			// The last chunk may be followed by trailer fields, then an
			// empty line: read them so the connection is clean.
			for {
				line, terr := readLine(b.uc.br)
				if terr != nil {
					return n, terr
				}
				if len(line) == 0 {
					break
				}
			}
			b.eof = true
		}
		return n, err
	case b.left == 0:
		b.eof = true
		return 0, io.EOF
	case b.left > 0:
		if int64(len(p)) > b.left {
			p = p[:b.left]
		}
		n, err := b.uc.br.Read(p)
		b.left -= int64(n)
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if b.left == 0 && err == nil {
			b.eof = true
			err = io.EOF
		}
		return n, err
	}
	n, err := b.uc.br.Read(p)
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
	b.uc.ctx = nil
	if b.keep && b.eof && b.uc.br.Buffered() == 0 {
		b.up.put(b.uc) // the next exchange sets its own deadlines
		return nil
	}
	return b.uc.c.Close()
}

func (up *upstream) get(ctx context.Context, deadline time.Time) (uc *upConn, reused bool, err error) {
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
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if up.tls != nil {
		d := tls.Dialer{NetDialer: &up.dialer, Config: up.tls}
		c, err = d.DialContext(ctx, "tcp", up.addr)
	} else {
		c, err = up.dialer.DialContext(ctx, "tcp", up.addr)
	}
	if err != nil {
		return nil, false, err
	}
	uc = &upConn{c: c, buf: make([]byte, 0, 512)}
	uc.br = bufio.NewReaderSize(uc, 4096)
	return uc, false, nil
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
