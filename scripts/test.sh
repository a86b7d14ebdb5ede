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

source scripts/pg.sh

if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		log "installing Chromium for the checkout page's browser tests (apt-get install chromium)"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
	else
		echo "error: Chromium not found; the checkout page's browser tests need it." >&2
		echo "       Install it (Debian: sudo apt-get install chromium) and run again." >&2
		exit 1
	fi
fi
# zbarimg: the QR tests scan every served QR code with ZBar as well as
# decoding its module grid (hosts/evmpaytest/qrscan).
if ! command -v zbarimg >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		log "installing ZBar for the QR code tests (apt-get install zbar-tools)"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zbar-tools >/dev/null
	else
		echo "error: zbarimg not found; the QR code tests scan with it." >&2
		echo "       Install it (Debian: sudo apt-get install zbar-tools) and run again." >&2
		exit 1
	fi
fi
# curl: a test runs the dev banner's curl commands as a newcomer pastes them.
if ! command -v curl >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		log "installing curl (apt-get install curl)"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >/dev/null
	else
		echo "error: curl not found; a test runs the dev banner's curl commands. Install it and run again." >&2
		exit 1
	fi
fi
# SoftHSM2: the PKCS#11 token the HSM signer's tests create keys in
# (docs/keys.md).
if [ ! -e /usr/lib/softhsm/libsofthsm2.so ] && [ -z "${SOFTHSM2_MODULE:-}" ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		log "installing SoftHSM2 for the HSM signer's tests (apt-get install softhsm2)"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq softhsm2 >/dev/null
	else
		echo "error: SoftHSM2 not found; the HSM signer's tests need it." >&2
		echo "       Install it (Debian: sudo apt-get install softhsm2) and run again." >&2
		exit 1
	fi
fi
export EVMPAY_REQUIRE_SOFTHSM=1

# The AWS KMS emulator (local-kms, its own module under hosts/localkms so
# that it never becomes a requirement of evmpay), built once for the run.
kms_dir=$(mktemp -d)
log "building the KMS emulator (hosts/localkms)"
(cd hosts/localkms && go build -o "$kms_dir/localkms" .)
export EVMPAY_LOCAL_KMS="$kms_dir/localkms" EVMPAY_REQUIRE_KMS=1

# A scratch server: durability is not under test, speed is. PostgreSQL's
# default connection limit, so that CI proves the suite runs on any
# developer's server (TEST_DATABASE_URL; see README).
start_pg fsync=off synchronous_commit=off full_page_writes=off max_connections=100
trap 'stop_pg; rm -rf "$kms_dir"' EXIT

export TEST_DATABASE_URL="$PG_URL"
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

# ethers.js (and any other JavaScript client the tests drive) from npm.
scripts/npm-tools.sh >/dev/null

# Three test binaries at once (-p 3, one more than the cores). go test
# starts packages in the order they are named, so the longest are named
# first (longest first keeps the slots evenly loaded): hosts/payd, whose
# end-to-end tests take most of the run and mostly wait for blocks and
# processes, in one slot; the next longest (measured in a run of this
# script, each a minute or more) share the other two; then the rest.
pkgs=("$@")
if [ ${#pkgs[@]} -eq 0 ]; then
	pkgs=(./hosts/payd ./settlement ./invoice ./sweep ./hosts/dashboard ./indexer ./hosts/evmpaytest ./...)
fi
log "go test -race -count=1 -timeout 20m -p 3 ${pkgs[*]}"
go test -race -count=1 -timeout 20m -p 3 "${pkgs[@]}"

if [ $# -eq 0 ]; then
	# The QR property test (1,000 random payment URIs, two decoders) is
	# built without the race detector, which finds nothing in it and
	# makes it eight times slower (invoice/qr_property_test.go).
	log "go test -count=1 -run TestQR_RandomPaymentURIs ./invoice/ (without -race)"
	go test -count=1 -run '^TestQR_RandomPaymentURIs' ./invoice/
	log "fuzzing each target for ${FUZZTIME:-5s}"
	scripts/fuzz.sh "${FUZZTIME:-5s}"
fi
log "all tests passed"
