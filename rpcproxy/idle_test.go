package rpcproxy

import (
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Bytes a node sends on a keep-alive connection while no request is
// outstanding answer nobody. The proxy drops such a connection, as Go's
// Transport does (golang.org/issue/32310), so that no client ever gets an
// answer to another client's request, a 408 meant for an idle connection,
// or a 502 for a stray line ending. Five clients call one after another;
// after each answer the node sends something unasked.
func TestUnsolicitedUpstreamBytes_NeverReachTheNextClient(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		unasked   func(id string) string
		sameWrite bool // sent with the answer, in one write
		closes    bool // and then the node closes its side, as it said
	}{
		{"a second answer with the first", func(id string) string { return okAnswer(`"stale ` + jsonEscape(id) + `"`) }, true, false},
		{"a second answer on the idle connection", func(id string) string { return okAnswer(`"stale ` + jsonEscape(id) + `"`) }, false, false},
		{"an idle 408 and Connection: close", func(string) string {
			return "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
		}, false, true},
		{"a stray CRLF", func(string) string { return "\r\n" }, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			idle := make(chan struct{})   // the test: the client has its answer
			dropped := make(chan bool, 1) // the node: whether the proxy hung up after the unasked bytes
			node := newScriptedNode(t, func(conn net.Conn, ex rawExchange) bool {
				if c.sameWrite {
					if _, err := conn.Write([]byte(okAnswer(ex.id) + c.unasked(ex.id))); err != nil {
						dropped <- true
						return true
					}
				} else {
					if _, err := conn.Write([]byte(okAnswer(ex.id))); err != nil {
						return true
					}
					<-idle
					if _, err := conn.Write([]byte(c.unasked(ex.id))); err != nil {
						dropped <- true
						return true
					}
				}
				if c.closes {
					_ = conn.(*net.TCPConn).CloseWrite()
				}
				// Either the proxy hangs up, or (the old proxy) it sends the
				// next client's call on this connection, which is served.
				hungUp := proxyHungUp(conn, ex.br, 10*time.Second)
				dropped <- hungUp
				return hungUp
			})
			_, url := newProxyTo(t, node.url, Config{Rate: noLimit})

			var kept []int
			for i := range 5 {
				id := strconv.Itoa(100 + i)
				r := post(t, url, callJSON(id, "eth_blockNumber"))
				require.Equal(t, http.StatusOK, r.status, "client %d got: %s", i, r.body)
				require.JSONEq(t, `{"jsonrpc":"2.0","id":`+id+`,"result":"answer to `+id+`"}`, r.body, "client %d", i)
				if !c.sameWrite {
					idle <- struct{}{}
				}
				if !<-dropped {
					kept = append(kept, i)
				}
			}
			require.Empty(t, kept, "the proxy kept the connection on which the node had sent bytes unasked after these clients")
			require.Len(t, node.received(), 5, "every call reached the node once")
		})
	}
}

// A node that closes a keep-alive connection while it is idle (its idle
// timeout): the proxy notices, drops the connection, and the next call
// goes out on a fresh one.
func TestUpstreamClosesIdleConnection_NextCallOnFreshOne(t *testing.T) {
	t.Parallel()
	dropped := make(chan bool, 1)
	node := newScriptedNode(t, func(conn net.Conn, ex rawExchange) bool {
		if _, err := conn.Write([]byte(okAnswer(ex.id))); err != nil {
			return true
		}
		_ = conn.(*net.TCPConn).CloseWrite() // FIN, and nothing more from this side
		dropped <- proxyHungUp(conn, ex.br, 10*time.Second)
		return true
	})
	_, url := newProxyTo(t, node.url, Config{Rate: noLimit})
	for i := range 3 {
		id := strconv.Itoa(i + 1)
		r := post(t, url, callJSON(id, "eth_blockNumber"))
		require.Equal(t, http.StatusOK, r.status, r.body)
		require.JSONEq(t, `{"jsonrpc":"2.0","id":`+id+`,"result":"answer to `+id+`"}`, r.body)
		require.True(t, <-dropped, "the proxy kept a connection the node had closed")
	}
	require.Equal(t, 3, node.connections())
	require.Len(t, node.received(), 3, "nothing was sent twice")
}
