// Package nodes owns node failover: several JSON-RPC nodes of one chain
// used as one, by every chain client of a deployment (the indexer,
// settlement, the sweep and the RPC proxy's upstream).
//
// A Pool checks every node every Config.CheckInterval (1 s): eth_chainId
// and eth_blockNumber in one batch, then the block at the head the node
// reported (a node must serve its own head), then Config.Guard when set (a
// host's per-node check, such as the chain identity). A node that does not
// answer, answers garbage, another chain id (logged at error level), or a
// head it has no block for is excluded until a check passes again.
//
// The Pool is an http.RoundTripper for JSON-RPC 2.0 over HTTP POST:
//
//   - A read (any call but eth_sendRawTransaction; batches too) goes to one
//     node — the current one while it stays eligible, else the first
//     eligible in the order given. A node is eligible when it is usable,
//     its head is within Config.MaxLag (3) blocks of the highest head, and
//     its head is not below the highest head the pool has already served
//     from (eth_blockNumber answers passing through count), so a block a
//     caller was told of is never missing on its next read and the head it
//     sees never goes back. When a node fails a read — no answer, a
//     timeout (Config.RequestTimeout), HTTP 5xx or 429, an answer that is
//     not JSON-RPC, a head below the served one or one it cannot serve — it
//     is excluded and the read goes to the next node. When no node is
//     eligible the request checks the nodes again and waits, up to
//     Config.MaxWait, then fails with an error wrapping ErrNoNode.
//   - eth_sendRawTransaction (alone or inside a batch) goes to every usable
//     node at once and succeeds when any node has the transaction:
//     accepted, "already known", or "nonce too low" while some node knows
//     the transaction's hash. The same signed bytes reach every node, so
//     the chain mines them once.
//
// Start with New, check once, run the checks, and hand out clients:
//
//	pool, err := nodes.New([]string{"https://a.example/v1/KEY", "http://10.0.0.2:8545"},
//		nodes.Config{ChainID: 262144, Logger: log})
//	if err != nil { … }
//	if err := pool.Check(ctx); err != nil { … } // no usable node at start
//	go pool.Run(ctx)
//	rc, err := pool.Client(ctx) // *rpc.Client: ethclient.NewClient(rc), indexer.NewRPCSource(rc)
//	proxy, err := rpcproxy.New("", rpcproxy.Config{Upstream: pool})
//
// Operators see Pool.Status (each node's state, URL redacted with
// RedactURL) and the metrics evmpay_nodes_up, evmpay_nodes_head,
// evmpay_nodes_lag_blocks (per node), evmpay_nodes_served_head,
// evmpay_nodes_requests_total{node,outcome}, evmpay_nodes_failovers_total,
// evmpay_nodes_waits_total, evmpay_nodes_broadcast_fanout and
// evmpay_nodes_broadcast_sends_total{node,outcome}. docs/chains.md, "Node
// failover", records the decisions.
package nodes
