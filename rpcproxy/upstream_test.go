package rpcproxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// A node that closes each keep-alive connection right after answering on
// it (as nodes and load balancers do with idle connections): the next call
// finds its pooled connection dead and is sent again, once, on a fresh one.
func TestUpstreamClosesPooledConnection_CallSentAgainOnFreshOne(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	var conns atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close() // after one answer, without saying so
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				body := `{"jsonrpc":"2.0","id":1,"result":"0x1"}`
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "+
					strconv.Itoa(len(body))+"\r\n\r\n"+body)
			}()
		}
	}()
	_, url := newProxyTo(t, "http://"+ln.Addr().String(), Config{Rate: noLimit})
	for range 3 {
		r := post(t, url, callJSON("1", "eth_blockNumber"))
		require.Equal(t, http.StatusOK, r.status, r.body)
		require.JSONEq(t, `{"jsonrpc":"2.0","id":1,"result":"0x1"}`, r.body)
	}
	require.GreaterOrEqual(t, conns.Load(), int32(3), "each call needed a fresh connection")
}
