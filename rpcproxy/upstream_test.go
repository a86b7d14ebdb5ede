package rpcproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rawNode is an upstream that answers every request on a connection with
// the same bytes, written as they are, and counts the connections it
// accepted; after answering, it closes the connection when closeAfter.
func rawNode(t *testing.T, answer string, closeAfter bool) (url string, conns *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	conns = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if _, err := io.WriteString(c, answer); err != nil || closeAfter {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String(), conns
}

const rawResult = `{"jsonrpc":"2.0","id":1,"result":"0x1"}`

// Every way an HTTP/1.x node may frame its answer reaches the client whole,
// with its status and content type, and the connection is kept exactly
// when the framing allows it.
func TestUpstreamResponseFraming(t *testing.T) {
	t.Parallel()
	cl := strconv.Itoa(len(rawResult))
	for _, c := range []struct {
		name       string
		answer     string
		closeAfter bool
		status     int
		ctype      string
		reused     bool // the three calls share one connection
	}{
		{"content length", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + cl + "\r\n\r\n" + rawResult,
			false, 200, "application/json", true},
		{"chunked with a trailer", "HTTP/1.1 200 OK\r\ncontent-type: application/json; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"7\r\n" + rawResult[:7] + "\r\n" + strconv.FormatInt(int64(len(rawResult)-7), 16) + "\r\n" + rawResult[7:] + "\r\n0\r\nX-Trailer: 1\r\n\r\n",
			false, 200, "application/json; charset=utf-8", true},
		{"connection close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: " + cl + "\r\n\r\n" + rawResult,
			true, 200, "application/json", false},
		{"until the connection ends", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + rawResult,
			true, 200, "application/json", false},
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + cl + "\r\n\r\n" + rawResult,
			true, 200, "application/json", false},
		{"HTTP/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Type: application/json\r\nContent-Length: " + cl + "\r\n\r\n" + rawResult,
			false, 200, "application/json", true},
		{"100 Continue first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + cl + "\r\n\r\n" + rawResult,
			false, 200, "application/json", true},
		{"an error status", "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: " + cl + "\r\n\r\n" + rawResult,
			false, 503, "application/json", true},
		{"no content type", "HTTP/1.1 200 OK\r\nContent-Length: " + cl + "\r\n\r\n" + rawResult,
			false, 200, "application/json", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			node, conns := rawNode(t, c.answer, c.closeAfter)
			_, url := newProxyTo(t, node, Config{Rate: noLimit})
			for range 3 {
				r := post(t, url, callJSON("1", "eth_blockNumber"))
				require.Equal(t, c.status, r.status, r.body)
				require.JSONEq(t, rawResult, r.body)
				require.Equal(t, c.ctype, r.header.Get("Content-Type"))
			}
			if c.reused {
				require.EqualValues(t, 1, conns.Load(), "one keep-alive connection for the three calls")
			} else {
				require.EqualValues(t, 3, conns.Load(), "a connection per call")
			}
		})
	}
}

// An answer that is not HTTP/1.x is the node's failure: 502, and the
// connection is not reused.
func TestUpstreamResponse_Malformed_502(t *testing.T) {
	t.Parallel()
	for _, answer := range []string{
		"SSH-2.0-OpenSSH_9.6\r\n\r\n",
		"HTTP/1.1 2OO OK\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n{}",
		"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n{}",
	} {
		node, conns := rawNode(t, answer, false)
		_, url := newProxyTo(t, node, Config{Rate: noLimit})
		for range 2 {
			r := post(t, url, callJSON("1", "eth_blockNumber"))
			require.Equal(t, http.StatusBadGateway, r.status, "%q: %s", answer, r.body)
		}
		require.EqualValues(t, 2, conns.Load(), "%q: a connection per call", answer)
	}
}

// A client that goes away while its call waits for the node ends the
// exchange: the proxy closes its connection to the node (so that a node
// that stops work for a closed request, as go-ethereum does, stops), long
// before the upstream timeout.
func TestClientGone_UpstreamConnectionClosed(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	got, closed := make(chan struct{}), make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		close(got) // the node has the call
		// Never answer; wait for the proxy to hang up.
		_, _ = br.ReadByte()
		close(closed)
	}()
	_, url := newProxyTo(t, "http://"+ln.Addr().String(), Config{Rate: noLimit, UpstreamTimeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(callJSON("1", "eth_getLogs")))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	go func() {
		select {
		case <-got: // the client leaves while its call waits at the node
		case <-time.After(30 * time.Second): // the test fails below: the call never reached the node
		}
		cancel()
	}()
	_, err = http.DefaultClient.Do(req)
	require.ErrorIs(t, err, context.Canceled)
	select {
	case <-got:
	default:
		t.Fatal("the call never reached the node")
	}
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("the proxy kept its connection to the node after the client left")
	}
}

// A call the node has read is never sent again, whatever happens to the
// connection afterwards: the node may have acted on it. Like net/http for
// a POST, the proxy retries only a request none of which was written; here
// the client gets 502 and the node saw the call once.
func TestRequestWrittenToNode_NeverSentAgain(t *testing.T) {
	t.Parallel()
	for _, reset := range []bool{false, true} {
		t.Run(map[bool]string{false: "closed", true: "reset"}[reset], func(t *testing.T) {
			t.Parallel()
			node := newScriptedNode(t, func(c net.Conn, ex rawExchange) bool {
				if ex.seq == 0 { // the first call on a connection is answered; the connection stays open
					_, err := io.WriteString(c, okAnswer(ex.id))
					return err != nil
				}
				if reset {
					_ = c.(*net.TCPConn).SetLinger(0)
				}
				return true // read the second, then hang up without an answer
			})
			_, url := newProxyTo(t, node.url, Config{Rate: noLimit})

			require.Equal(t, http.StatusOK, post(t, url, callJSON("1", "eth_blockNumber")).status)
			r := post(t, url, `{"jsonrpc":"2.0","id":2,"method":"eth_sendRawTransaction","params":["0x02"]}`)
			require.Equal(t, http.StatusBadGateway, r.status, r.body)
			requireErrorCode(t, decodeOne(t, r.body), CodeUpstreamUnavailable)
			sent := 0
			for _, b := range node.received() {
				if strings.Contains(b, "eth_sendRawTransaction") {
					sent++
				}
			}
			require.Equal(t, 1, sent, "the node got the call more than once")
		})
	}
}

// The node's header bytes are capped (64 KiB): an answer whose headers go
// on and on, in short lines, is the node's failure, not the proxy's memory.
func TestUpstreamHeaderBytes_Capped_502(t *testing.T) {
	t.Parallel()
	filler := strings.Repeat("X-Filler: "+strings.Repeat("a", 100)+"\r\n", 2000) // 220 KB, every line short
	node := newScriptedNode(t, func(c net.Conn, ex rawExchange) bool {
		a := okAnswer(ex.id)
		_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\n"+filler+a[len("HTTP/1.1 200 OK\r\n"):])
		return err != nil
	})
	_, url := newProxyTo(t, node.url, Config{Rate: noLimit})

	r := post(t, url, callJSON("1", "eth_blockNumber"))
	require.Equal(t, http.StatusBadGateway, r.status, r.body)
	requireErrorCode(t, decodeOne(t, r.body), CodeUpstreamBadResponse)
}

// MaxResponseBytes bounds streamed answers too: one that declares more is
// refused before a byte reaches the client (502); one without a length
// that runs over is cut off, so that the client sees a broken answer, never
// a short one that looks whole.
func TestStreamedAnswer_OverMaxResponseBytes(t *testing.T) {
	t.Parallel()
	result := `{"jsonrpc":"2.0","id":1,"result":"` + strings.Repeat("a", 8192) + `"}`
	for _, chunked := range []bool{false, true} {
		t.Run(map[bool]string{false: "declared length", true: "chunked"}[chunked], func(t *testing.T) {
			t.Parallel()
			node := newScriptedNode(t, func(c net.Conn, ex rawExchange) bool {
				a := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(result)) + "\r\n\r\n" + result
				if chunked {
					a = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
						strconv.FormatInt(int64(len(result)), 16) + "\r\n" + result + "\r\n0\r\n\r\n"
				}
				_, err := io.WriteString(c, a)
				return err != nil
			})
			_, url := newProxyTo(t, node.url, Config{Rate: noLimit, MaxResponseBytes: 4096})

			req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(callJSON("1", "eth_getLogs")))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if !chunked {
				require.NoError(t, err)
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				require.Equal(t, http.StatusBadGateway, resp.StatusCode, string(b))
				requireErrorCode(t, decodeOne(t, string(b)), CodeUpstreamTooLarge)
				return
			}
			if err == nil { // the head may have gone out before the limit was reached
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				require.Error(t, err, "the client got a complete-looking answer of %d bytes", len(b))
				require.LessOrEqual(t, len(b), 4096+1)
			}
		})
	}
}

// An https node: the proxy verifies its certificate with the TLS config
// it was given, and refuses a node it cannot verify.
func TestHTTPSUpstream(t *testing.T) {
	t.Parallel()
	node := &echoNode{}
	srv := httptest.NewTLSServer(node)
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())

	_, url := newProxyTo(t, srv.URL, Config{Rate: noLimit, TLSClientConfig: &tls.Config{RootCAs: roots}})
	for range 2 {
		r := post(t, url, callJSON("1", "eth_chainId"))
		require.Equal(t, http.StatusOK, r.status, r.body)
		require.JSONEq(t, `{"jsonrpc":"2.0","id":1,"result":"eth_chainId"}`, r.body)
	}
	require.Len(t, node.received(), 2)

	_, url = newProxyTo(t, srv.URL, Config{Rate: noLimit}) // system roots: the test CA is not among them
	r := post(t, url, callJSON("1", "eth_chainId"))
	require.Equal(t, http.StatusBadGateway, r.status, r.body)
	require.Len(t, node.received(), 2)
}

// Config.DialContext makes every connection to the node: here it resolves
// a name that no resolver knows.
func TestUpstreamDialer_Injected(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(&echoNode{})
	t.Cleanup(upstream.Close)
	var dials atomic.Int32
	var d net.Dialer
	_, url := newProxyTo(t, "http://node.invalid:8545", Config{Rate: noLimit,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr != "node.invalid:8545" {
				return nil, fmt.Errorf("unexpected address %q", addr)
			}
			dials.Add(1)
			return d.DialContext(ctx, network, upstream.Listener.Addr().String())
		}})

	for range 3 {
		require.Equal(t, http.StatusOK, post(t, url, callJSON("1", "eth_chainId")).status)
	}
	require.EqualValues(t, 1, dials.Load(), "one pooled connection")
}
