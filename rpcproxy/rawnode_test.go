package rpcproxy

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A misbehaving node: a raw TCP listener whose answers a test writes byte
// by byte, as a broken or hostile node (or a load balancer in front of one)
// might. Requests are parsed with net/http; answers are whatever the test
// writes.

// rawExchange is one request a scriptedNode received.
type rawExchange struct {
	conn int    // the connection's number, from 0, in accept order
	seq  int    // the request's number on its connection, from 0
	body []byte // the request body
	id   string // the JSON-RPC id of a single call ("" for a batch)
	br   *bufio.Reader
}

// scriptedNode is a raw upstream. For every request it calls answer, which
// writes whatever it likes to c and reports whether to close the
// connection afterwards. It records every request body it got.
type scriptedNode struct {
	url string

	mu     sync.Mutex
	bodies []string
	conns  int
}

func newScriptedNode(t *testing.T, answer func(c net.Conn, ex rawExchange) (closeConn bool)) *scriptedNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	n := &scriptedNode{url: "http://" + ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.mu.Lock()
			connNo := n.conns
			n.conns++
			n.mu.Unlock()
			go n.serve(c, connNo, answer)
		}
	}()
	return n
}

func (n *scriptedNode) serve(c net.Conn, connNo int, answer func(net.Conn, rawExchange) bool) {
	defer c.Close()
	br := bufio.NewReader(c)
	for seq := 0; ; seq++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		n.mu.Lock()
		n.bodies = append(n.bodies, string(body))
		n.mu.Unlock()
		var call struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(body, &call)
		if answer(c, rawExchange{conn: connNo, seq: seq, body: body, id: string(call.ID), br: br}) {
			return
		}
	}
}

func (n *scriptedNode) received() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.bodies...)
}

func (n *scriptedNode) connections() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.conns
}

// okAnswer is a complete keep-alive HTTP/1.1 answer whose JSON-RPC result
// names id, so that a client can tell whose answer it got.
func okAnswer(id string) string {
	body := `{"jsonrpc":"2.0","id":` + id + `,"result":"answer to ` + jsonEscape(id) + `"}`
	return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// proxyHungUp waits up to d for the proxy's next move on the connection
// and reports whether it closed it (true) or sent another request on it or
// did nothing (false). Nothing is consumed from br.
func proxyHungUp(c net.Conn, br *bufio.Reader, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	_, err := br.Peek(1)
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// rawClient is one client connection to the proxy from the given local
// address ("" for any), on which a test writes raw bytes.
func rawClient(t *testing.T, proxyURL, localIP string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 10 * time.Second}
	if localIP != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(localIP)}
	}
	c, err := d.Dial("tcp", proxyURL[len("http://"):])
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// readReply reads one HTTP answer from c.
func readReply(t *testing.T, c net.Conn) reply {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// declaredHead is the head of a POST that declares a body of n bytes.
func declaredHead(n int) string {
	return "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(n) + "\r\n\r\n"
}
