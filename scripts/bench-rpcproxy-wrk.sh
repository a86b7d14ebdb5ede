#!/usr/bin/env bash
# Measures the RPC proxy with wrk, side by side with a direct upstream:
# rpcproxy-load -serve starts an instantly answering upstream (two copies:
# one direct, one behind the proxy) on loopback; wrk drives each with 32
# connections (throughput) and then 1 connection (latency).
#
# Usage: scripts/bench-rpcproxy-wrk.sh [seconds per run, default 10]
# LOAD_BIN=path runs a prebuilt rpcproxy-load (to compare two versions).
# UPSTREAM_DELAY=1ms makes the upstream take that long per call (a node's
# own time), UPSTREAM=http://host:port puts an external node (payd devchain,
# geth) behind the proxy instead; the "direct" figures are then that node's.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}

if ! command -v wrk >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "==> installing wrk (apt-get install wrk)" >&2
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
	else
		echo "error: wrk not found (Debian/Ubuntu: sudo apt-get install wrk)" >&2
		exit 1
	fi
fi

bin=${LOAD_BIN:-}
if [ -z "$bin" ]; then
	bin=$(mktemp -d)/rpcproxy-load
	go build -o "$bin" ./hosts/rpcproxy-load
fi
out=$(mktemp)
"$bin" -serve -upstream-delay "${UPSTREAM_DELAY:-0s}" ${UPSTREAM:+-upstream "$UPSTREAM"} >"$out" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -f "$out"' EXIT
for _ in $(seq 1 100); do
	grep -q '^proxy ' "$out" && break
	sleep 0.1
done
direct=$(awk '/^direct /{print $2}' "$out")
proxy=$(awk '/^proxy /{print $2}' "$out")

echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
lua=scripts/wrk-jsonrpc.lua
rps() { awk '/^Requests\/sec/{print $2}'; }
p50() { awk '$1=="50%"{print $2}'; }
d32=$(wrk -t2 -c32 -d"${secs}s" -s "$lua" "$direct" | rps)
p32=$(wrk -t2 -c32 -d"${secs}s" -s "$lua" "$proxy" | rps)
d1=$(wrk -t1 -c1 -d"$((secs / 2))s" --latency -s "$lua" "$direct" | p50)
p1=$(wrk -t1 -c1 -d"$((secs / 2))s" --latency -s "$lua" "$proxy" | p50)
echo "wrk -t2 -c32 -d${secs}s: direct $d32 req/s, proxy $p32 req/s, ratio $(awk -v a="$p32" -v b="$d32" 'BEGIN{printf "%.1f%%", 100*a/b}')"
echo "wrk -t1 -c1 --latency: p50 direct $d1, proxy $p1"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
