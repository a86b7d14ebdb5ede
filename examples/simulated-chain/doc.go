// Package simulatedchain shows how to test code that takes payments with
// evmpay's test kit (hosts/evmpaytest) instead of mocks: go-ethereum's
// simulated backend — a real EVM in the process —, a SQLite store, and
// evmpay's packages running on them, wired as payd wires them. The test
// creates an invoice through the real invoice API, pays its EIP-681 URI,
// mines blocks and follows the invoice to SETTLED.
//
//	go test -v ./examples/simulated-chain
//
// Copy example_test.go to test your own integration.
package simulatedchain
