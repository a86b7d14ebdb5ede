#!/usr/bin/env bash
# Starts or stops a fresh single-node Cosmos EVM chain (evmd v0.7.0, the
# example chain of cosmos/evm) for the end-to-end tests against a real node
# (scripts/evmd-e2e.sh). Build evmd yourself from a cosmos/evm checkout at
# v0.7.0 (`cd evmd && go build ./cmd/evmd`) and pass its path as EVMD_BIN.
#
#   EVMD_BIN=/path/to/evmd scripts/evmd-node.sh start   # prints KEY=VALUE lines
#   EVMD_BIN=/path/to/evmd scripts/evmd-node.sh start-peer
#   scripts/evmd-node.sh stop
#
# start-peer adds a second node of the started chain — a full node (not a
# validator) that syncs from the first over CometBFT's p2p — with its own
# JSON-RPC on 127.0.0.1:${EVMD_PEER_RPC_PORT:-28546}; it prints
# PEER_RPC_URL=… and PEER_PIDFILE=… once it has the first node's head.
# Two nodes of one chain: what node failover (rpcproxy/nodes) is for.
#
# Every start wipes the node's home: a new chain (same chain ids, another
# first block). JSON-RPC on 127.0.0.1:${EVMD_RPC_PORT:-28545}; CometBFT, gRPC
# and p2p on free ports. Prints on stdout exactly FUNDED_PRIVATE_KEY=0x…
# (the dev0 account of cosmos/evm's local_node.sh: test-only, 10^9 coins),
# PIDFILE=…, RPC_URL=…, CHAIN_ID=…; the node's log is $EVMD_DIR/evmd.log.
#
# MIN_GAS_PRICE (wei, default 0) is the chain's minimum gas price (x/feemarket
# min_gas_price, the base fee's floor) and the node's (--minimum-gas-prices):
# real Cosmos EVM chains set one, and a transaction whose fee is below it is
# refused.
set -euo pipefail

DIR=${EVMD_DIR:-${TMPDIR:-/tmp}/evmpay-evmd}
BIN=${EVMD_BIN:-$DIR/evmd}
HOMEDIR=$DIR/home
PIDFILE=$DIR/evmd.pid
PEER_PIDFILE=$DIR/evmd-peer.pid
PEER_HOME=$DIR/home-peer
PEER_LOG=$DIR/evmd-peer.log
PEER_RPC_PORT=${EVMD_PEER_RPC_PORT:-28546}
LOG=$DIR/evmd.log
INITLOG=$DIR/init.log
COSMOS_CHAIN_ID=${COSMOS_CHAIN_ID:-9001}
EVM_CHAIN_ID=${EVM_CHAIN_ID:-262144}
RPC_PORT=${EVMD_RPC_PORT:-28545}
MIN_GAS_PRICE=${MIN_GAS_PRICE:-0}
DENOM=atest
KEYRING=test
KEYALGO=eth_secp256k1

stop_pid() {
	[ -f "$1" ] || return 0
	local pid
	pid=$(cat "$1" 2>/dev/null || true)
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && grep -q evmd "/proc/$pid/cmdline" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$1"
}
stop_node() { stop_pid "$PEER_PIDFILE"; stop_pid "$PIDFILE"; }

rpc_at() { curl -s -m 3 -H 'content-type: application/json' -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$2\",\"params\":[]}" "http://127.0.0.1:$1" 2>/dev/null; }
head_at() { rpc_at "$1" eth_blockNumber | jq -r '.result // empty' 2>/dev/null || true; }

# The other listeners: ports no socket uses now (they lie in the ephemeral
# range, so an attempt that loses a race for one is retried).
taken=" "
pick_port() {
	local p
	for _ in $(seq 1 1000); do
		p=$((36000 + RANDOM % 1000))
		case "$taken" in *" $p "*) continue ;; esac
		if [ -z "$(ss -Htan "( sport = :$p )" 2>/dev/null)" ]; then taken="$taken$p "; echo "$p"; return 0; fi
	done
	return 1
}

# launch starts evmd on home with its JSON-RPC on rpc_port, its log in log
# and its pid in pidfile (the other listeners on free ports; the p2p port
# written to p2pfile when one is given), and waits until the node's head is
# at least min_head. An attempt that loses a port race is retried.
launch() {
	local home=$1 rpc_port=$2 log=$3 pidfile=$4 min_head=$5 p2pfile=${6:-/dev/null} pid attempt bn
	for attempt in 1 2 3 4 5; do
		: >"$log"
		setsid "$BIN" start --pruning nothing --log_level info \
			--minimum-gas-prices="${MIN_GAS_PRICE}$DENOM" --evm.min-tip=0 --evm.evm-chain-id "$EVM_CHAIN_ID" \
			--json-rpc.enable --json-rpc.address "127.0.0.1:$rpc_port" --json-rpc.ws-address "127.0.0.1:$(pick_port)" \
			--json-rpc.api eth,txpool,net,web3 \
			--p2p.laddr "tcp://127.0.0.1:$(pick_port | tee "$p2pfile")" --rpc.laddr "tcp://127.0.0.1:$(pick_port)" \
			--proxy_app "tcp://127.0.0.1:$(pick_port)" --grpc.address "127.0.0.1:$(pick_port)" \
			--home "$home" --chain-id "$COSMOS_CHAIN_ID" </dev/null >>"$log" 2>&1 &
		pid=$!
		echo "$pid" >"$pidfile"
		for _ in $(seq 1 240); do
			kill -0 "$pid" 2>/dev/null || break
			bn=$(head_at "$rpc_port")
			if [ -n "$bn" ] && [ $((bn)) -ge "$min_head" ]; then return 0; fi
			sleep 0.5
		done
		if ! kill -0 "$pid" 2>/dev/null && grep -q "address already in use" "$log"; then
			echo "evmd-node.sh: attempt $attempt lost a port race; retrying" >&2
			wait "$pid" 2>/dev/null || true
			continue
		fi
		return 1
	done
	return 1
}

# start_peer: a full node of the running chain, peered with the first.
start_peer() {
	[ -f "$PIDFILE" ] && [ -f "$DIR/p2p.port" ] || { echo "evmd-node.sh: start the first node first" >&2; exit 1; }
	stop_pid "$PEER_PIDFILE"
	local id p2p head synced=""
	id=$("$BIN" comet show-node-id --home "$HOMEDIR" 2>>"$DIR/init.log") || { echo "evmd-node.sh: no node id (see $DIR/init.log)" >&2; exit 1; }
	p2p=$(cat "$DIR/p2p.port")
	rm -rf "$PEER_HOME"
	"$BIN" init peer -o --chain-id "$COSMOS_CHAIN_ID" --home "$PEER_HOME" >>"$DIR/init.log" 2>&1
	cp "$HOMEDIR/config/genesis.json" "$PEER_HOME/config/genesis.json"
	cp "$HOMEDIR/config/app.toml" "$PEER_HOME/config/app.toml"
	cp "$HOMEDIR/config/client.toml" "$PEER_HOME/config/client.toml"
	sed -e "s#^persistent_peers = .*#persistent_peers = \"$id@127.0.0.1:$p2p\"#" \
		-e 's/^allow_duplicate_ip = .*/allow_duplicate_ip = true/' \
		-e 's/^addr_book_strict = .*/addr_book_strict = false/' \
		"$HOMEDIR/config/config.toml" | sed -e "s#^moniker = .*#moniker = \"peer\"#" >"$PEER_HOME/config/config.toml"
	head=$(( $(head_at "$RPC_PORT") ))
	launch "$PEER_HOME" "$PEER_RPC_PORT" "$PEER_LOG" "$PEER_PIDFILE" "$head" && synced=1
	if [ -z "$synced" ]; then
		echo "evmd-node.sh: the peer did not reach the first node's head $head; last log lines:" >&2
		tail -20 "$PEER_LOG" >&2
		stop_pid "$PEER_PIDFILE"
		exit 1
	fi
	echo "PEER_RPC_URL=http://127.0.0.1:$PEER_RPC_PORT"
	echo "PEER_PIDFILE=$PEER_PIDFILE"
}

case "${1:-}" in
stop) stop_node; exit 0 ;;
start) ;;
start-peer)
	command -v jq >/dev/null || { echo "evmd-node.sh: jq is required (apt-get install jq)" >&2; exit 1; }
	[ -x "$BIN" ] || { echo "evmd-node.sh: no evmd binary at $BIN; set EVMD_BIN" >&2; exit 1; }
	start_peer; exit 0 ;;
*) echo "usage: $0 start|start-peer|stop" >&2; exit 2 ;;
esac

command -v jq >/dev/null || { echo "evmd-node.sh: jq is required (apt-get install jq)" >&2; exit 1; }
[ -x "$BIN" ] || { echo "evmd-node.sh: no evmd binary at $BIN; set EVMD_BIN" >&2; exit 1; }
mkdir -p "$DIR"
stop_node
if (exec 3<>"/dev/tcp/127.0.0.1/$RPC_PORT") 2>/dev/null; then
	echo "evmd-node.sh: 127.0.0.1:$RPC_PORT is in use by another process" >&2; exit 1
fi

rm -rf "$HOMEDIR"
mkdir -p "$HOMEDIR"
: >"$INITLOG"
ev() { "$BIN" "$@" --home "$HOMEDIR" >>"$INITLOG" 2>&1; }
CONFIG_TOML=$HOMEDIR/config/config.toml
APP_TOML=$HOMEDIR/config/app.toml
GENESIS=$HOMEDIR/config/genesis.json

ev config set client chain-id "$COSMOS_CHAIN_ID"
ev config set client keyring-backend "$KEYRING"
# The validator's and dev0's keys of cosmos/evm's local_node.sh (test-only).
VAL_MNEMONIC="gesture inject test cycle original hollow east ridge hen combine junk child bacon zero hope comfort vacuum milk pitch cage oppose unhappy lunar seat"
DEV_MNEMONIC="copper push brief egg scan entry inform record adjust fossil boss egg comic alien upon aspect dry avoid interest fury window hint race symptom"
echo "$VAL_MNEMONIC" | "$BIN" keys add mykey --recover --keyring-backend "$KEYRING" --algo "$KEYALGO" --home "$HOMEDIR" >>"$INITLOG" 2>&1
echo "$DEV_MNEMONIC" | "$BIN" keys add dev0 --recover --keyring-backend "$KEYRING" --algo "$KEYALGO" --home "$HOMEDIR" >>"$INITLOG" 2>&1
echo "$VAL_MNEMONIC" | "$BIN" init localtestnet -o --chain-id "$COSMOS_CHAIN_ID" --home "$HOMEDIR" --recover >>"$INITLOG" 2>&1

jqg() { jq "$1" "$GENESIS" >"$GENESIS.tmp" && mv "$GENESIS.tmp" "$GENESIS"; }
jqg ".app_state.staking.params.bond_denom=\"$DENOM\""
jqg ".app_state.gov.deposit_params.min_deposit[0].denom=\"$DENOM\""
jqg ".app_state.gov.params.min_deposit[0].denom=\"$DENOM\""
jqg ".app_state.gov.params.expedited_min_deposit[0].denom=\"$DENOM\""
jqg ".app_state.evm.params.evm_denom=\"$DENOM\""
jqg ".app_state.mint.params.mint_denom=\"$DENOM\""
jqg '.app_state.bank.denom_metadata=[{"description":"The native staking token for evmd.","denom_units":[{"denom":"atest","exponent":0,"aliases":["attotest"]},{"denom":"test","exponent":18,"aliases":[]}],"base":"atest","display":"test","name":"Test Token","symbol":"TEST","uri":"","uri_hash":""}]'
jqg '.app_state.erc20.native_precompiles=["0xEeeeeEeeeEeEeeEeEeEeeEEEeeeeEeeeeeeeEEeE"]'
jqg '.app_state.erc20.token_pairs=[{contract_owner:1,erc20_address:"0xEeeeeEeeeEeEeeEeEeEeeEEEeeeeEeeeeeeeEEeE",denom:"atest",enabled:true}]'
jqg '.consensus.params.block.max_gas="10000000"'
# The chain-wide minimum gas price: the base fee's floor (x/feemarket).
jqg ".app_state.feemarket.params.min_gas_price=\"${MIN_GAS_PRICE}.000000000000000000\""
ev genesis add-genesis-account mykey 100000000000000000000000000$DENOM --keyring-backend "$KEYRING"
ev genesis add-genesis-account dev0 1000000000000000000000000000$DENOM --keyring-backend "$KEYRING"

# About a block a second.
sed -i -e 's/^timeout_propose = .*/timeout_propose = "2s"/' \
	-e 's/^timeout_prevote = .*/timeout_prevote = "500ms"/' \
	-e 's/^timeout_precommit = .*/timeout_precommit = "500ms"/' \
	-e 's/^timeout_commit = .*/timeout_commit = "1s"/' \
	-e 's/type = "flood"/type = "app"/' \
	-e 's#^pprof_laddr = .*#pprof_laddr = ""#' \
	-e 's#^prometheus = .*#prometheus = false#' \
	-e 's#^pex = .*#pex = false#' "$CONFIG_TOML"
awk '
	/^\[/ { sec=$0 }
	sec=="[api]"      && /^enable = / { $0="enable = false" }
	sec=="[grpc-web]" && /^enable = / { $0="enable = false" }
	sec=="[json-rpc]" && /^enable-indexer = / { $0="enable-indexer = true" }
	/-metrics-address = |^metrics-address = / { $0="" }
	{ print }
' "$APP_TOML" >"$APP_TOML.new" && mv "$APP_TOML.new" "$APP_TOML"

GENTX_GAS_PRICE=$((MIN_GAS_PRICE > 10000000 ? MIN_GAS_PRICE : 10000000))
ev genesis gentx mykey 1000000000000000000000$DENOM --gas-prices $GENTX_GAS_PRICE$DENOM --keyring-backend "$KEYRING" --chain-id "$COSMOS_CHAIN_ID"
ev genesis collect-gentxs
ev genesis validate-genesis

KEY=$("$BIN" keys unsafe-export-eth-key dev0 --keyring-backend "$KEYRING" --home "$HOMEDIR" 2>>"$INITLOG" | tr -d '[:space:]')
KEY=${KEY#0x}
KEY=$(echo "$KEY" | tr 'A-F' 'a-f')
[[ "$KEY" =~ ^[0-9a-f]{64}$ ]] || { echo "evmd-node.sh: could not export the funded key (see $INITLOG)" >&2; exit 1; }

rpc() { rpc_at "$RPC_PORT" "$1"; }
started=""
launch "$HOMEDIR" "$RPC_PORT" "$LOG" "$PIDFILE" 1 "$DIR/p2p.port" && started=1
if [ -z "$started" ]; then
	echo "evmd-node.sh: JSON-RPC did not reach block 1; last log lines:" >&2
	tail -20 "$LOG" >&2
	stop_node
	exit 1
fi
echo "FUNDED_PRIVATE_KEY=0x$KEY"
echo "PIDFILE=$PIDFILE"
echo "RPC_URL=http://127.0.0.1:$RPC_PORT"
echo "CHAIN_ID=$(($(rpc eth_chainId | jq -r '.result')))"
