#!/usr/bin/env bash
# Runs every benchmark whose figures are recorded in BENCHMARKS.md, against a
# private PostgreSQL server with durable (default) settings, on loopback
# only. Each part stops by itself; the whole run takes several minutes.
#
# Usage: scripts/bench.sh [part …]   parts: store hdwallet rpcproxy invoice indexer
#                                     settlement sweep webhook ledger (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/pg.sh
start_pg
export TEST_DATABASE_URL="$PG_URL"
export EVMPAY_REQUIRE_POSTGRES=1

parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(store hdwallet rpcproxy invoice indexer settlement sweep webhook ledger)
log "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for part in "${parts[@]}"; do
	log "benchmark: $part"
	case $part in
	store) go test -run '^$' -bench 'InsertInvoices|InsertBlock' -benchtime 3s ./store/postgres ./store/sqlite ;;
	hdwallet) go test -run '^$' -bench . -benchtime=2s ./hdwallet ;;
	rpcproxy) go run ./hosts/rpcproxy-load -duration 10s && scripts/bench-rpcproxy-wrk.sh 10 ;;
	invoice) go run ./hosts/invoice-load -db "$PG_URL" -duration 15s ;;
	indexer) go test -run '^$' -bench 'Backfill' -benchtime 1x -timeout 30m ./indexer ;;
	settlement) go test -run '^$' -bench 'BenchmarkBlock$' -benchtime 200x -timeout 30m ./settlement
		go test -run '^$' -bench '^BenchmarkBlockPayments$' -benchtime 200x -timeout 30m ./settlement
		go test -run '^$' -bench BenchmarkBlockThreeChains -benchtime 100x -timeout 60m ./settlement ;;
	sweep) go test -run '^$' -bench Sweep100 -benchtime 3x -timeout 30m ./sweep ;;
	webhook) go test -run '^$' -bench Deliver10k -benchtime 1x -count 5 -timeout 30m ./webhook ;;
	ledger) go test -run '^$' -bench LedgerExport -benchtime 1x -timeout 30m ./invoice ;;
	*) echo "unknown part $part" >&2; exit 2 ;;
	esac
done
