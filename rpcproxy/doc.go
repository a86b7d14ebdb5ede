// Package rpcproxy owns the JSON-RPC reverse proxy of the gateway: the only
// door to the chain node that outsiders get.
//
// A Proxy is an http.Handler that accepts JSON-RPC 2.0 over HTTP POST
// (application/json), single calls and batches, and forwards them to one
// upstream node over pooled keep-alive connections. On the way it
//
//   - refuses methods by policy: debug_* always; by default everything that
//     acts with the node's own accounts or changes its state (admin_,
//     personal_, miner_, txpool_, eth_sendTransaction, eth_sign* …:
//     DefaultDenyMethods); optionally everything outside an allow list
//     (Config.AllowMethods);
//   - rate-limits each client with a token bucket (golang.org/x/time/rate)
//     keyed by address, by a trusted X-Forwarded-For, or by an API-key
//     header; each call of a batch takes one token;
//   - caps what outsiders can make it hold: request bodies grow with the
//     bytes received and share one memory budget with buffered answers
//     (Config.MaxBufferedBytes); requests under way per client and in all;
//     open connections per client address and per listener
//     (Proxy.LimitListener); batch size, body size, the node's answer size
//     and upstream time;
//   - answers with JSON-RPC errors whose codes match Optimism's proxyd and
//     EIP-1474, with a matching HTTP status (see docs/rpcproxy.md).
//
// The node is reached through net/http's Transport (HTTP/1.1, https with
// Config.TLSClientConfig, connections from Config.DialContext): bytes the
// node sends on an idle connection never become another client's answer,
// and a request already written to the node is never sent again.
//
// Config.Upstream puts any http.RoundTripper in place of that Transport:
// a *nodes.Pool (package rpcproxy/nodes) fronts several nodes of one chain,
// with health checks, failover and transactions sent to every node.
//
// The hot path is cheap: only "jsonrpc", "id" and "method" are read, params
// and results are never decoded. When every call of a request is allowed the
// original bytes are forwarded unchanged and the node's response is streamed
// back. Only a batch that is partly refused is rebuilt: the allowed calls are
// forwarded with their ids replaced by their positions, and the answers are
// spliced back with the caller's ids, in the caller's order, between the
// proxy's own errors.
//
// Start with New, mount the proxy and serve it on a capped listener:
//
//	p, err := rpcproxy.New("http://127.0.0.1:8545", rpcproxy.Config{Rate: 20, Burst: 40})
//	if err != nil { … }
//	mux.Handle("POST /rpc", p)
//	mux.Handle("GET /metrics", promhttp.HandlerFor(p.Gatherer(), promhttp.HandlerOpts{}))
//	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
//	srv.Serve(p.LimitListener(ln))
//
// Metrics (Prometheus, registered on Config.Registerer):
// rpcproxy_requests_total{code}, rpcproxy_calls_total{method,outcome},
// rpcproxy_rate_limited_calls_total, rpcproxy_upstream_request_duration_seconds,
// rpcproxy_rate_limit_buckets, rpcproxy_over_capacity_total{limit},
// rpcproxy_requests_in_flight, rpcproxy_buffered_bytes and
// rpcproxy_connections_open. The method label is bounded: names
// outside a fixed list of standard methods (plus exact AllowMethods entries)
// are counted as "other".
package rpcproxy
