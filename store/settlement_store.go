package store

import (
	"context"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// PaymentStore stores payments matched to invoices.
type PaymentStore interface {
	// InsertPayment inserts p as a payment that arrived on the handle's
	// chain, and sets p.ID and p.ChainID. ErrConflict when (tx hash, log
	// index) is already recorded on that chain.
	InsertPayment(ctx context.Context, p *Payment) error
	// ListPaymentsByInvoice returns the invoice's payments of every chain
	// (a wrong-network payment is on another chain than the invoice's;
	// Payment.Counted tells which count), by block number and id.
	ListPaymentsByInvoice(ctx context.Context, invoiceID int64) ([]Payment, error)
	// DeletePaymentsFromBlock removes the handle's chain's payments in
	// blocks ≥ number (a reorg of that chain), whatever their invoice's
	// chain, and returns them.
	DeletePaymentsFromBlock(ctx context.Context, number uint64) ([]Payment, error)
}

// DepositAddresses is a page of ListDepositAddresses.
type DepositAddresses struct {
	// Addresses are the deposit addresses of the invoices with derivation
	// indexes in [from, Next), in no particular order.
	Addresses []common.Address
	// Next is where the page ends: min(from+limit, Counter).
	Next uint32
	// Counter is the derivation index counter: the next index it hands
	// out.
	Counter uint32
	// Highest is the highest derivation index of any invoice, -1 when
	// there is none.
	Highest int64
}

// SettlementStore is what settlement asks of the database beyond the
// per-record interfaces: its cursor's compare-and-set, batched reads of the
// invoices a block touches, the candidates for a confirmation recompute,
// the history of the blocks it processed (to find the common ancestor
// after a reorg) and the queries behind its observable conditions.
type SettlementStore interface {
	// CompareAndSetCursor moves the named cursor to next only if it is
	// still at old (same block number and hash); old nil means the cursor
	// must not exist yet. ErrConflict otherwise: another writer moved it.
	CompareAndSetCursor(ctx context.Context, name string, old *Cursor, next Cursor) error
	// ListInvoiceTxsInBlock returns the transactions of block number with
	// a value whose recipient is an invoice's deposit address, with that
	// invoice's id, in index order. The invoice may be of any chain: a
	// deposit address is the same on every chain, and a payment to an
	// invoice of another chain is a wrong-network payment. With to non-nil, only transactions to
	// those recipients are considered (none when to is empty). Unlike a
	// join that the planner may turn into a scan of every invoice, it
	// probes the deposit-address index once per transaction considered:
	// its cost does not grow with the number of invoices.
	ListInvoiceTxsInBlock(ctx context.Context, number uint64, to []common.Address) ([]InvoiceTx, error)
	// ListInvoiceTokenTransfersInBlock returns the token transfers of
	// block number whose recipient is an invoice's deposit address, with
	// that invoice's id, in log order, restricted to the recipients to as
	// ListInvoiceTxsInBlock is (one deposit-address index probe per
	// transfer considered).
	ListInvoiceTokenTransfersInBlock(ctx context.Context, number uint64, to []common.Address) ([]InvoiceTokenTransfer, error)
	// ListBlockRecipients returns the recipients of value in block number:
	// the to-address of each of its transactions with a value and of each
	// of its token transfers, in no particular order (an address may
	// repeat).
	ListBlockRecipients(ctx context.Context, number uint64) ([]common.Address, error)
	// ListDepositAddresses reads, in one snapshot, the derivation index
	// counter, the highest derivation index of any invoice, and the
	// deposit addresses of the invoices whose derivation indexes are in
	// [from, from+limit) and below the counter. The counter is advanced in
	// the transaction that inserts the invoices given its indexes
	// (ReserveDerivationIndexes, NextDerivationIndex), so every invoice
	// below the counter read is committed and listed: a caller that reads
	// pages up to the counter has seen every invoice, unless Highest is at
	// or above the counter (an invoice inserted without reserving its
	// index).
	ListDepositAddresses(ctx context.Context, from uint32, limit int) (DepositAddresses, error)
	// EarliestBlock returns the lowest indexed block; ErrNotFound if none.
	EarliestBlock(ctx context.Context) (Block, error)
	// GetInvoicesForUpdate reads the invoices with these ids, by id, and on
	// PostgreSQL locks their rows until the transaction ends (in id order,
	// so that concurrent callers cannot deadlock). Missing ids are left out.
	GetInvoicesForUpdate(ctx context.Context, ids []int64) ([]Invoice, error)
	// ListPaymentsByInvoices returns the payments of these invoices, of
	// every chain (Payment.Counted tells which count), ordered by invoice
	// id, block number and id.
	ListPaymentsByInvoices(ctx context.Context, ids []int64) ([]Payment, error)
	// InsertPayments records payments that arrived on the handle's chain
	// in bulk (COPY on PostgreSQL), and sets their ChainID. It does not
	// set their ids. ErrConflict when one (tx hash, log index) is already
	// recorded on that chain; use inside InTx, which then rolls back.
	InsertPayments(ctx context.Context, ps []Payment) error
	// UpdateInvoiceStates writes the fields settlement owns — status,
	// paid_wei, underpaid, overpaid, paid_late, needs_attention, paid_at,
	// confirmed_at, sweep_status, updated_at and, for fiat invoices,
	// paid_value, late_valuation and sweep_asset — of each invoice whose
	// version still matches, in one statement on PostgreSQL, and increments
	// each Version. ErrConflict when any invoice changed since it was read;
	// use inside InTx, which then rolls back the others.
	UpdateInvoiceStates(ctx context.Context, invs []*Invoice) error
	// MoveInvoice writes where a fiat invoice is paid after
	// Invoice.MoveToChain — chain_id, token_address, asset_symbol,
	// asset_decimals, amount_wei, payment_uri, pricing and updated_at — if
	// its version still matches, and increments inv.Version. ErrConflict
	// when the invoice changed since it was read. Settlement calls it in
	// the block's transaction, on the row GetInvoicesForUpdate locked,
	// before UpdateInvoiceStates writes the payment's effect.
	MoveInvoice(ctx context.Context, inv *Invoice) error
	// InsertEvents writes outbox events in bulk (COPY on PostgreSQL). It
	// does not set their ids.
	InsertEvents(ctx context.Context, evs []Event) error
	// ListConfirmable returns the ids of up to limit PAID invoices of the
	// handle's chain none of whose counted payments (Payment.Counted: in
	// an accepted asset, on the invoice's chain) is in a block above
	// maxBlock, by id: the invoices whose confirmations must be recomputed
	// when the head reaches maxBlock + threshold. An indexed lookup of PAID invoices, never a
	// scan of all invoices.
	ListConfirmable(ctx context.Context, maxBlock uint64, limit int) ([]int64, error)
	// ListConfirmableSince is ListConfirmable restricted to the invoices
	// with a counted payment in a block in (after, maxBlock]: those that
	// can have become confirmable since a pass at after found every other
	// one. It reads the payments of that block range, not every PAID
	// invoice.
	ListConfirmableSince(ctx context.Context, after, maxBlock uint64, limit int) ([]int64, error)
	// InsertSettledBlock records that settlement processed the block
	// number with this hash. ErrConflict if number is already recorded.
	InsertSettledBlock(ctx context.Context, number uint64, hash common.Hash) error
	// ListSettledBlockHashes returns the recorded hashes of processed
	// blocks in [from, to], by number.
	ListSettledBlockHashes(ctx context.Context, from, to uint64) (map[uint64]common.Hash, error)
	// DeleteSettledBlocks removes the records of processed blocks below
	// below (pruning) and at or above from (a reorg); 0 and MaxUint64
	// disable either side.
	DeleteSettledBlocks(ctx context.Context, below, from uint64) error
	// ListPendingInvoiceTxs returns up to limit indexed payments in the
	// invoice's asset to the deposit addresses of PENDING invoices —
	// native transactions to native invoices, transfers of the invoice's
	// token to token invoices — in blocks indexed at or before
	// indexedBefore, ordered by invoice id, block number and index. A
	// settlement that keeps up leaves this list without any invoice whose
	// transactions add up to its amount.
	ListPendingInvoiceTxs(ctx context.Context, indexedBefore time.Time, limit int) ([]PendingInvoiceTx, error)
	// ListUnsweptConfirmed returns up to limit CONFIRMED invoices confirmed
	// at or before confirmedBefore that have no sweep transaction (kind
	// SweepTxSweep, or SweepTxPull: a token's transferFrom on the permit
	// path), oldest confirmation first.
	ListUnsweptConfirmed(ctx context.Context, confirmedBefore time.Time, limit int) ([]Invoice, error)
}
