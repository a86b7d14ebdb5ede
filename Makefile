# evmpay — common tasks. `make test` is the test command CI runs.

.PHONY: test dev fuzz bench fmt vet tidy

# Every test, PostgreSQL ones included, against a private server.
test:
	scripts/test.sh

# The whole service on embedded defaults.
dev:
	go run ./hosts/payd dev

# Every fuzz target for FUZZTIME (default 5s) each.
fuzz:
	scripts/fuzz.sh $(or $(FUZZTIME),5s)

# Benchmarks whose figures are recorded in BENCHMARKS.md.
bench:
	scripts/bench.sh

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	go vet ./...

# -e: a test-only dependency of modernc.org/sqlite is not on the module proxy.
tidy:
	go mod tidy -e
