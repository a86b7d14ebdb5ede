#!/usr/bin/env bash
# Prints the Go API changes of the library (and the test kit) since a tag:
# golang.org/x/exp/cmd/apidiff per package, old export data written from a
# worktree of the tag. Usage: scripts/apidiff.sh v0.1.0
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: scripts/apidiff.sh TAG}
command -v apidiff >/dev/null || go install golang.org/x/exp/cmd/apidiff@latest
apidiff=$(command -v apidiff || echo "$(go env GOPATH)/bin/apidiff")
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/old" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git worktree add --detach "$tmp/old" "$base" >/dev/null
pkgs=$(cd "$tmp/old" && go list ./... | grep -v -e /examples/ -e /internal/ -e storetest -e pgtest | grep -v -e '/hosts/' ; echo github.com/evmpay/evmpay/hosts/evmpaytest)
for p in $pkgs; do
	n=$(echo "$p" | tr / _)
	(cd "$tmp/old" && "$apidiff" -w "$tmp/$n.export" "$p")
	echo "## $p"
	"$apidiff" "$tmp/$n.export" "$p" || true
done
