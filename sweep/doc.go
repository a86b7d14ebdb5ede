// Package sweep moves the funds of CONFIRMED invoices from their deposit
// addresses to their merchants' settlement addresses, keeps the sweep
// wallet funded, and owns the sweep errors and retries. It is the only part
// of evmpay that signs with deposit keys.
//
// Settlement hands an invoice over by setting it CONFIRMED with
// sweep_status QUEUED. A Sweeper then moves it through
//
//	QUEUED → FUNDING (the sweep wallet sent the gas) → SENT (sweep_tx_hash) → SWEPT, invoice SETTLED
//
// or to FAILED with a short sweep_error (ReasonInsufficientGas, …). SWEPT
// and SETTLED are written with the invoice.settled event in one database
// transaction; FAILED with invoice.sweep_failed.
//
// Start with a store, a chain client and the keys:
//
//	w, _ := hdwallet.NewWallet(mnemonic, "")
//	sweepKey, _ := w.SweepKey()
//	s, err := sweep.New(st, ethClient, sweep.Keys{
//		Deposits: w,                              // signs for deposit addresses
//		Wallet:   sweep.NewKeySigner(sweepKey),   // pays the gas of sweeps
//		Funder:   sweep.NewKeySigner(funderKey),  // GAS_FUNDER_PRIVATE_KEY: tops the wallet up
//	}, sweep.Config{OperatorToken: token})
//	go s.Run(ctx)
//	mux.Handle("/v1/admin/sweeps/", s.AdminHandler()) // POST /v1/admin/sweeps/retry
//
// # How a sweep proceeds
//
// Each pass (Run makes one per new block; RunOnce makes one) claims due
// invoices with leases (ClaimSweeps: several workers and processes can
// share one PostgreSQL database) and advances each as far as the chain
// allows. An invoice's state is derived every time from the chain and the
// transactions stored for it, so a crash anywhere resumes where it was.
//
// Under PolicySponsor (the default) the sweep wallet sends the deposit
// address exactly gas × fee cap for its sweep; once that funding is mined,
// the deposit address sends the payer's funds — its balance minus the
// funding — to the settlement address, so the merchant receives exactly
// what the payer sent. Under PolicyDeduct one transaction from the deposit
// address sends its balance minus gas × fee cap. Either way the gas not
// spent (the fee cap above the price actually paid) stays at the deposit
// address and is recorded as dust_wei; swept_wei is what reached the
// merchant. An invoice is SETTLED when its sweep has Confirmations blocks
// on top of it.
//
// Fees are EIP-1559: tip = max(suggested tip, 1 wei), raised so that
// ⅞ × base fee + tip meets the chain's minimum gas price (the price paid
// in the next block, even if the base fee falls); fee cap = max(2 × base
// fee + tip, minimum gas price), at most MaxFeePerGas. Base fee and tip may
// be 0 (Cosmos EVM chains); nothing divides by them.
//
// # Transactions
//
// Every transaction is signed and stored (store.SweepTx, raw bytes) in one
// database transaction before it is broadcast; after a crash the stored
// bytes are broadcast again, never a new signature for the same step. The
// sweep wallet's nonces come from store.ReserveNonce inside that database
// transaction, so concurrent sweeps never share one. A stored transaction
// that was never accepted (a crash before broadcasting, or a refusal) would
// block the wallet's later nonces: each pass re-broadcasts the wallet's
// transaction at the nonce the chain expects next.
//
// A transaction the node accepted but did not mine within
// ReplaceAfterBlocks blocks (Cosmos EVM nodes can accept an underpriced
// transaction and never mine it) is replaced: same nonce, fee cap and tip
// bumped by at least 12.5% and never below a fresh price. A sponsored sweep
// keeps its value, so its replacement is preceded by a funding of the extra
// gas. A mined funding or sweep that a reorg removed is re-broadcast from
// its stored bytes. A deposit address is swept by at most one live
// transaction (the store enforces it), always at nonce 0; a token paid to
// it as a wrong asset is moved afterwards with the deposit's next nonce
// (one live transfer per token), docs/tokens.md. An invoice priced in a
// fiat currency is swept in the asset settlement chose when it queued the
// sweep (its sweep_asset), and every other quoted asset that arrived
// follows by that same machinery.
//
// Node refusals are mapped by meaning (go-ethereum's and Cosmos EVM's
// JSON-RPC messages): "already known" is success; "nonce too low" is
// checked again after one block (the receipt may lag), then the step is
// re-signed with a new nonce (funding) or FAILED (sweep); "replacement
// transaction underpriced" and fee refusals are retried with a bumped fee;
// "insufficient funds" from the sweep wallet is ReasonInsufficientGas.
// Retries of one sweep are bounded by MaxAttempts; POST
// /v1/admin/sweeps/retry (Retry) re-queues FAILED sweeps, for example after
// the wallet was topped up.
//
// # Gas funder
//
// When the sweep wallet's balance is below its reserve (Config.GasReserve,
// or by default the larger of GasReserveFloor and the last 24 hours' gas
// spend), the gas funder sends it enough to reach twice the reserve, one
// top-up at a time, under a named lock. WalletStatus reports the wallet's
// balance, 24-hour gas spend, reserve and the alert flag (balance below
// half the 24-hour spend); the same figures are Prometheus gauges.
package sweep
