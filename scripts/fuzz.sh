#!/usr/bin/env bash
# Runs every Go fuzz target in the repository for a short time (default 5s
# each). Usage: scripts/fuzz.sh [duration]
#
# A real failure writes its input under testdata/fuzz and fails the run. The
# fuzzing engine itself sometimes stops with "context deadline exceeded"
# when its time runs out while it is minimising a new input; that is not a
# finding, so such a run is repeated (twice at most).
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-5s}

fuzz_target() {
	local pkg=$1 target=$2 attempt out
	for attempt in 1 2 3; do
		printf '==> fuzz %s %s (%s)\n' "$pkg" "$target" "$fuzztime" >&2
		if out=$(go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" 2>&1); then
			printf '%s\n' "$out" | tail -n 1
			return 0
		fi
		printf '%s\n' "$out"
		if grep -q 'Failing input written to' <<<"$out" || ! grep -q 'context deadline exceeded' <<<"$out"; then
			return 1
		fi
		printf '==> the fuzzing engine ran out of time mid-minimisation (not a finding); again\n' >&2
	done
	return 1
}

grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r file; do
	pkg="./$(dirname "${file#./}")"
	grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //' | while read -r target; do
		fuzz_target "$pkg" "$target"
	done
done
