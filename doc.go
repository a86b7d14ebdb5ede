// Package evmpay is the root of the evmpay module: take payments on an EVM
// chain from Go. It holds no code; start here.
//
// The library is a set of packages a Go service embeds, each owning one
// concern, meeting only in the shared database (store):
//
//   - invoice: merchants, invoices, refunds and payouts — the Go API
//     (Service.CreateInvoice, CreateRefund, CreatePayout, Ledger, …) and
//     the HTTP API over it (Service.Routes);
//   - settlement: payments matched to invoices, confirmations, statuses;
//   - sweep: confirmed funds moved to the merchant, the gas they need,
//     the refund and payout engine, the ledger's reconciliation;
//   - webhook: signed deliveries of every event, and Verify for receivers;
//   - indexer: the chain followed into the database, and its read API;
//   - rpcproxy: a JSON-RPC proxy in front of a node;
//   - hdwallet: deposit addresses from a mnemonic, keys in an HSM or KMS;
//   - store, store/postgres, store/sqlite: the records and two databases.
//
// hosts/payd is the reference host (one binary: `payd dev`, `payd
// serve`), hosts/evmpaytest the test kit (a simulated chain, an embedded
// store, helpers to pay, mine, reorg and wait), and examples/ small
// programs that embed the packages. README.md says how to run it all;
// docs/ records the decisions.
package evmpay
