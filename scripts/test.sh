#!/usr/bin/env bash
# Runs every test of the repository against a private PostgreSQL server.
#
# The server lives in a temporary directory on a free loopback port for the
# length of the run and is stopped (and deleted) even when tests fail. When
# the PostgreSQL server binaries are missing and we are root on Debian, they
# are installed first.
#
# Usage: scripts/test.sh [go test flags and packages]   (default: ./...)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*" >&2; }

pg_bin() {
	local p
	if p=$(command -v initdb 2>/dev/null); then
		dirname "$(readlink -f "$p")"
		return 0
	fi
	p=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	if [ -n "$p" ] && [ -x "$p/initdb" ]; then
		echo "$p"
		return 0
	fi
	return 1
}

if ! PGBIN=$(pg_bin); then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		log "installing the PostgreSQL server (apt-get install postgresql)"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
		PGBIN=$(pg_bin)
	else
		echo "error: PostgreSQL server binaries (initdb, pg_ctl) not found." >&2
		echo "       Install them (Debian/Ubuntu: sudo apt-get install postgresql) and run again." >&2
		exit 1
	fi
fi

PGDIR=$(mktemp -d /tmp/evmpay-test-pg.XXXXXX)
as_pg() {
	if [ "$(id -u)" = 0 ]; then
		# PostgreSQL refuses to run as root.
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}
[ "$(id -u)" = 0 ] && chown postgres "$PGDIR"

free_port() {
	local p
	for p in $(seq 55432 55532); do
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	return 1
}
PORT=$(free_port)

cleanup() {
	as_pg "$PGBIN/pg_ctl" -D "$PGDIR/data" -m immediate -w stop >/dev/null 2>&1 || true
	rm -rf "$PGDIR"
}
trap cleanup EXIT

log "starting PostgreSQL ($PGBIN) on 127.0.0.1:$PORT"
as_pg "$PGBIN/initdb" -D "$PGDIR/data" -U postgres --auth=trust -E UTF8 --no-sync >/dev/null
as_pg "$PGBIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/log" -w -t 60 \
	-o "-p $PORT -k $PGDIR -c listen_addresses=127.0.0.1 -c max_connections=400 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c shared_buffers=256MB" \
	start >/dev/null || { cat "$PGDIR/log" >&2; exit 1; }

export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$PORT/postgres?sslmode=disable"
export EVMPAY_REQUIRE_POSTGRES=1

log "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "error: these files need gofmt -w:" >&2
	echo "$unformatted" >&2
	exit 1
fi

log "go vet ./..."
go vet ./...

log "go test -race -count=1 ${*:-./...}"
go test -race -count=1 "${@:-./...}"

if [ $# -eq 0 ]; then
	log "fuzzing each target for ${FUZZTIME:-5s}"
	scripts/fuzz.sh "${FUZZTIME:-5s}"
fi
log "all tests passed"
