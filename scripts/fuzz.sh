#!/usr/bin/env bash
# Runs every Go fuzz target in the repository for a short time (default 5s
# each). Usage: scripts/fuzz.sh [duration]
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-5s}
grep -rl --include='*_test.go' '^func Fuzz' . | while read -r file; do
	pkg="./$(dirname "${file#./}")"
	grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //' | while read -r target; do
		printf '==> fuzz %s %s (%s)\n' "$pkg" "$target" "$fuzztime" >&2
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
	done
done
