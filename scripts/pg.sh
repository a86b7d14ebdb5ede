# shellcheck shell=bash
# Shared by scripts/test.sh and scripts/bench.sh: find (or install) the
# PostgreSQL server binaries and start a private server in a temporary
# directory on a free loopback port, stopped and deleted on exit.
#
# Usage: source scripts/pg.sh; start_pg [postgres setting=value …]
# (a setting given here overrides the defaults below, max_connections=400
# included)
# Sets PG_URL to the server's maintenance database.

# Each step with the seconds since the script started.
log() { printf '==> [%ds] %s\n' "$SECONDS" "$*" >&2; }

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

# as_pg runs a server command; PostgreSQL refuses to run as root, so root
# runs it as the postgres user.
as_pg() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

# free_port picks a random port below Linux's ephemeral range (32768+), so
# that no client connection lingering in TIME_WAIT holds it.
free_port() {
	local p i
	for i in $(seq 1 100); do
		p=$((20000 + RANDOM % 10000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

stop_pg() {
	as_pg "$PGBIN/pg_ctl" -D "$PGDIR/data" -m immediate -w stop >/dev/null 2>&1 || true
	rm -rf "$PGDIR"
}

start_pg() {
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
	PGDIR=$(mktemp -d /tmp/evmpay-pg.XXXXXX)
	[ "$(id -u)" = 0 ] && chown postgres "$PGDIR"
	trap stop_pg EXIT
	as_pg "$PGBIN/initdb" -D "$PGDIR/data" -U postgres --auth=trust -E UTF8 --no-sync >/dev/null
	local port opts setting attempt
	for attempt in 1 2 3 4 5; do
		port=$(free_port)
		opts="-p $port -k $PGDIR -c listen_addresses=127.0.0.1 -c max_connections=400 -c shared_buffers=256MB"
		for setting in "$@"; do opts="$opts -c $setting"; done
		log "starting PostgreSQL ($PGBIN) on 127.0.0.1:$port ${*:-with durable defaults}"
		if as_pg "$PGBIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/log" -w -t 60 -o "$opts" start >/dev/null; then
			break
		fi
		if [ "$attempt" = 5 ]; then
			cat "$PGDIR/log" >&2
			exit 1
		fi
		log "PostgreSQL did not start on port $port; trying another"
	done
	PG_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
}
