// Package evmpaytest is evmpay's test kit: what a Go team that embeds
// evmpay needs to test its own code against a real EVM and a real store,
// instead of mocks. evmpay's own tests use it too.
//
// New starts an Env — go-ethereum's simulated backend with funded
// accounts, a SQLite store in a temporary file, a deposit wallet whose
// sweep wallet is funded, and, unless Config.NoServices, evmpay's packages
// wired as payd wires them (the invoice API on an httptest server, the
// indexer, settlement, sweep and the webhook dispatcher) with a merchant
// ready to use — and stops everything when the test ends:
//
//	env := evmpaytest.New(t, evmpaytest.Config{})
//	inv := env.CreateInvoice(`{"amount_wei":"250000"}`) // POST /v1/invoices
//	env.Chain.Pay(inv.PaymentURI)                       // an EIP-681 URI, native or ERC-20
//	env.WaitInvoice(inv.ID, store.StatusSettled)        // mines as evmpay settles and sweeps
//
// A test of code that wires evmpay's packages itself (a merchant's own
// service) sets Config.NoServices and hands the kit's parts to its code:
// Env.Chain.Client() satisfies every chain interface the packages consume
// (sweep.Chain, invoice.CodeReader, bind.ContractBackend, …),
// Env.Chain.Source() is the indexer's source (indexer.NewClientSource),
// Env.Store and Env.Wallet are the store and the deposit wallet. Sync and
// WaitInvoice work the same: they read the store.
//
// # One step at a time
//
// With Config.Manual nothing runs by itself: Env.Step processes what the
// chain holds now — the indexer indexes to the head, settlement settles,
// the sweep makes one pass — in the test's goroutine, and returns, as
// rivertest runs a job inside the test. A payment is PAID the moment Step
// returns; mine the confirmations and Step again for CONFIRMED:
//
//	env := evmpaytest.New(t, evmpaytest.Config{Manual: true, Confirmations: 3})
//	env.Chain.Pay(inv.PaymentURI)
//	env.Step()       // PAID now
//	env.Chain.Mine(3)
//	env.Step()       // CONFIRMED now
//
// The waits (Sync, WaitInvoice, WaitOutbound) call Step themselves.
//
// The parts also come alone: NewChain (the simulated chain: Mine, Pay,
// Balance, DeployToken, and RPC, a raw JSON-RPC client for
// indexer.NewRPCSource), NewStore (a SQLite store), Output (a writer to
// read back), and package wait (polling helpers with clear failures, for
// any package's tests).
//
// # Waiting, not sleeping
//
// Nothing in the kit sleeps for a fixed time and hopes. Blocks come only
// when the test mines them (Chain.Mine, Chain.Pay, or WaitInvoice, which
// mines one block each time evmpay has processed the previous one). A wait
// polls a condition in the test's goroutine and, when it never holds, fails
// the test saying what it waited for and what it last saw; its timeout
// bounds a hung test and asserts nothing about speed. The running packages
// take their clock from Config.Now.
//
// # Not for production
//
// The kit's chain is go-ethereum's: its block hashes are the keccak of the
// header, where a Cosmos EVM chain's are CometBFT hashes
// (docs/cosmos-evm.md). Code that indexes a Cosmos EVM chain uses
// indexer.NewRPCSource; the kit's RPC method serves that source too, on
// the simulated chain. Nothing under hosts/ may be imported by a library
// package, and the production payd binary contains none of it.
package evmpaytest
