package rpcproxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A node that closes each keep-alive connection right after answering on
// it (as nodes and load balancers do with idle connections): the next call
// finds its pooled connection dead and is sent again, once, on a fresh one.
func TestUpstreamClosesPooledConnection_CallSentAgainOnFreshOne(t *testing.T) {
	t.Parallel()
	body := `{"jsonrpc":"2.0","id":1,"result":"0x1"}`
	node, conns := rawNode(t, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "+
		strconv.Itoa(len(body))+"\r\n\r\n"+body, true) // closed after one answer, without saying so
	_, url := newProxyTo(t, node, Config{Rate: noLimit})
	for range 3 {
		r := post(t, url, callJSON("1", "eth_blockNumber"))
		require.Equal(t, http.StatusOK, r.status, r.body)
		require.JSONEq(t, `{"jsonrpc":"2.0","id":1,"result":"0x1"}`, r.body)
	}
	require.GreaterOrEqual(t, conns.Load(), int32(3), "each call needed a fresh connection")
}

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
	closed := make(chan struct{})
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
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	_, err = http.DefaultClient.Do(req)
	require.ErrorIs(t, err, context.Canceled)
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("the proxy kept its connection to the node after the client left")
	}
}
