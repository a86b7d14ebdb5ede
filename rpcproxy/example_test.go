package rpcproxy_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/evmpay/evmpay/rpcproxy"
)

// A proxy in front of a node: allowed calls are forwarded, debug_ methods are
// answered by the proxy itself.
func ExampleNew() {
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":"0x539"}`)
	}))
	defer node.Close()

	p, err := rpcproxy.New(node.URL, rpcproxy.Config{Rate: 10, Burst: 20})
	if err != nil {
		panic(err)
	}
	defer p.CloseIdleConnections()
	front := httptest.NewServer(p)
	defer front.Close()

	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`,
		`{"jsonrpc":"2.0","id":2,"method":"debug_traceTransaction","params":["0x00"]}`,
	} {
		resp, err := http.Post(front.URL, "application/json", strings.NewReader(body))
		if err != nil {
			panic(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(out))
	}
	// Output:
	// 200 {"jsonrpc":"2.0","id":1,"result":"0x539"}
	// 403 {"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"method not allowed by proxy"}}
}

// Serving the proxy on a listener that caps open connections per client
// address and in total (Config.MaxConnsPerClient, Config.MaxConns), with
// the server timeouts the handler leaves to its host.
func ExampleProxy_LimitListener() {
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":"0x539"}`)
	}))
	defer node.Close()

	p, err := rpcproxy.New(node.URL, rpcproxy.Config{MaxConnsPerClient: 16})
	if err != nil {
		panic(err)
	}
	defer p.CloseIdleConnections()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	go srv.Serve(p.LimitListener(ln))
	defer srv.Close()

	resp, err := http.Post("http://"+ln.Addr().String(), "application/json",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`))
	if err != nil {
		panic(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(out))
	// Output:
	// 200 {"jsonrpc":"2.0","id":1,"result":"0x539"}
}
