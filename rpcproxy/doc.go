// Package rpcproxy owns the JSON-RPC reverse proxy of the gateway: the only
// door to the chain node that outsiders get.
//
// A Proxy is an http.Handler that accepts JSON-RPC 2.0 over HTTP POST
// (application/json), single calls and batches, and forwards them to one
// upstream node over pooled keep-alive connections. On the way it
//
//   - refuses methods by policy: debug_* always; admin_, personal_, miner_,
//     engine_ and txpool_ by default (Config.DenyMethods); optionally
//     everything outside an allow list (Config.AllowMethods);
//   - rate-limits each client with a token bucket (golang.org/x/time/rate)
//     keyed by address, by a trusted X-Forwarded-For, or by an API-key
//     header; each call of a batch takes one token;
//   - caps batch size, body size and upstream time;
//   - answers with JSON-RPC errors whose codes match Optimism's proxyd and
//     EIP-1474, with a matching HTTP status (see docs/rpcproxy.md).
//
// The hot path is cheap: only "jsonrpc", "id" and "method" are read, params
// and results are never decoded. When every call of a request is allowed the
// original bytes are forwarded unchanged and the node's response is streamed
// back. Only a batch that is partly refused is rebuilt: the allowed calls are
// forwarded with their ids replaced by their positions, and the answers are
// spliced back with the caller's ids, in the caller's order, between the
// proxy's own errors.
//
// Start with New and mount the proxy:
//
//	p, err := rpcproxy.New("http://127.0.0.1:8545", rpcproxy.Config{Rate: 20, Burst: 40})
//	if err != nil { … }
//	mux.Handle("POST /rpc", p)
//	mux.Handle("GET /metrics", promhttp.HandlerFor(p.Gatherer(), promhttp.HandlerOpts{}))
//
// Metrics (Prometheus, registered on Config.Registerer):
// rpcproxy_requests_total{code}, rpcproxy_calls_total{method,outcome},
// rpcproxy_rate_limited_calls_total, rpcproxy_upstream_request_duration_seconds
// and rpcproxy_rate_limit_buckets. The method label is bounded: names
// outside a fixed list of standard methods (plus exact AllowMethods entries)
// are counted as "other".
package rpcproxy
