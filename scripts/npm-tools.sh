#!/usr/bin/env bash
# Installs the JavaScript the tests use (ethers.js v6; axe-core, which the
# checkout page's browser tests run in every state) into
# .tools/node (gitignored) with npm, once; later runs only check them.
# Prints the node_modules directory to hand to node as NODE_PATH.
#
# Usage: scripts/npm-tools.sh
# Needs node and npm (Debian: apt-get install nodejs npm; installed here when
# missing and running as root).
set -euo pipefail
cd "$(dirname "$0")/.."

# The exact versions under test; bump deliberately.
PACKAGES=(ethers@6.16.0 axe-core@4.14.1)

dir=.tools/node
stamp="$dir/installed-${PACKAGES[*]// /_}"
stamp=${stamp//@/-}

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "==> installing node and npm (apt-get install nodejs npm)" >&2
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
	else
		echo "error: node and npm are needed (Debian/Ubuntu: sudo apt-get install nodejs npm)" >&2
		exit 1
	fi
fi

if [ ! -e "$stamp" ]; then
	mkdir -p "$dir"
	# A lock keeps parallel test binaries from installing at the same time.
	exec 9>"$dir/.lock"
	flock 9
	if [ ! -e "$stamp" ]; then
		echo "==> npm install ${PACKAGES[*]} into $dir" >&2
		[ -f "$dir/package.json" ] || echo '{"private":true}' >"$dir/package.json"
		npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "${PACKAGES[@]}" >&2
		touch "$stamp"
	fi
fi
echo "$PWD/$dir/node_modules"
