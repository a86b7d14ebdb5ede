#!/usr/bin/env bash
# Runs the project's end-to-end tests against a real Cosmos EVM node: evmd
# v0.7.0, built from a cosmos/evm checkout (`cd evmd && go build ./cmd/evmd`).
# `payd serve` runs on a private PostgreSQL server in front of a fresh evmd
# chain the tests start (scripts/evmd-node.sh): native and token invoices
# (a USDC-like token with permit, a USDT-like one without) paid, underpaid and
# paid in the wrong asset, then the chain swapped for a fresh one.
#
# Usage: scripts/evmd-e2e.sh /path/to/evmd [--record] [go test flags…]
#   --record   also re-record hosts/payd/testdata/evmd (what evmd answered),
#              which TestEvmdReplay replays in make test; commit the result.
#
# MIN_GAS_PRICE (wei; default 1 gwei) is the chain's minimum gas price, as
# real Cosmos EVM chains set one. The last lines list the measured figures
# (payment to SETTLED, per asset).
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -ge 1 ] || { echo "usage: $0 /path/to/evmd [--record] [go test flags…]" >&2; exit 2; }
EVMD_BIN=$(readlink -f "$1"); shift
[ -x "$EVMD_BIN" ] || { echo "error: $EVMD_BIN is not an executable evmd" >&2; exit 1; }
export EVMD_BIN
if [ "${1:-}" = --record ]; then export EVMPAY_EVMD_RECORD=1; shift; fi
export MIN_GAS_PRICE=${MIN_GAS_PRICE:-1000000000}
export EVMD_DIR=${EVMD_DIR:-$(mktemp -d -t evmpay-evmd.XXXXXX)}

source scripts/pg.sh
if ! command -v jq >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		log "installing jq (apt-get install jq)"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq >/dev/null
	else
		echo "error: jq is needed (Debian: sudo apt-get install jq)" >&2; exit 1
	fi
fi
start_pg fsync=off synchronous_commit=off
export TEST_DATABASE_URL="$PG_URL" EVMPAY_REQUIRE_POSTGRES=1
trap 'scripts/evmd-node.sh stop || true; stop_pg' EXIT
scripts/npm-tools.sh >/dev/null

log "evmd end-to-end tests ($EVMD_BIN, min gas price $MIN_GAS_PRICE wei; node files in $EVMD_DIR)"
out=$(mktemp)
set +e
go test -tags evmd -count=1 -timeout 40m -v -run 'TestEvmd' "${@:-./hosts/payd/}" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
set -e
echo
echo "figures (payment sent → invoice SETTLED):"
grep -o 'FIGURE .*' "$out" | sed 's/^FIGURE /  /' || true
rm -f "$out"
exit "$rc"
