-- wrk request for scripts/bench-rpcproxy-wrk.sh: one eth_blockNumber call.
wrk.method = "POST"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}'
wrk.headers["Content-Type"] = "application/json"
