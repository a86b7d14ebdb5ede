package store

import (
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// Payment is an on-chain transfer to an invoice's deposit address.
type Payment struct {
	ID        int64       `db:"id" json:"id"`
	InvoiceID int64       `db:"invoice_id" json:"invoice_id"`
	TxHash    common.Hash `db:"tx_hash" json:"tx_hash"`
	// LogIndex is the log of a token transfer; NativeLogIndex for a plain
	// transfer of the native coin.
	LogIndex    int            `db:"log_index" json:"log_index"`
	BlockNumber uint64         `db:"block_number" json:"block_number"`
	BlockHash   common.Hash    `db:"block_hash" json:"block_hash"`
	From        common.Address `db:"from_address" json:"from"`
	AmountWei   Amount         `db:"amount_wei" json:"amount_wei"`
	// Late is true when the payment arrived after the invoice expired.
	Late      bool      `db:"late" json:"late"`
	CreatedAt time.Time `db:"created_at" json:"created_at"`
	// Token is the ERC-20 contract of a token transfer; nil for the native
	// coin. AmountWei is in base units of that asset.
	Token *common.Address `db:"token_address" json:"token,omitempty"`
	// WrongAsset is true for a payment in another asset than its invoice's
	// (native coin to a token invoice, another token, a token to a native
	// invoice): it is recorded and flags the invoice, but never counts
	// toward it.
	WrongAsset bool `db:"wrong_asset" json:"wrong_asset,omitempty"`
	// ChainID is the chain the payment arrived on: the chain of the store
	// handle that recorded it (InsertPayment and InsertPayments set it).
	// A deposit address is the same on every chain, so it may differ from
	// the invoice's chain: then WrongNetwork is true.
	ChainID uint64 `db:"chain_id" json:"chain_id"`
	// WrongNetwork is true for a payment that arrived on another chain
	// than its invoice's: like a wrong asset it is recorded, flags the
	// invoice (invoice.wrong_network) and never counts toward it; the
	// money sits at the deposit address on ChainID.
	WrongNetwork bool `db:"wrong_network" json:"wrong_network,omitempty"`
}

// Counted reports whether p counts toward its invoice: in an asset the
// invoice accepts (not WrongAsset) and on the invoice's chain (not
// WrongNetwork). Only counted payments add to paid_wei, decide the status
// and the under/over flags, and wait for confirmations.
func (p Payment) Counted() bool { return !p.WrongAsset && !p.WrongNetwork }

// NativeLogIndex is the LogIndex of a native-coin payment (no log).
const NativeLogIndex = -1

// Event types emitted by settlement besides the ones every concern shares
// (EventInvoicePaid, EventInvoiceConfirmed, …).
const (
	// EventInvoiceOverpaid: more money arrived at an invoice already paid
	// in full (PAID, CONFIRMED or SETTLED). When the sweep was already
	// queued or done the invoice is also flagged NeedsAttention.
	EventInvoiceOverpaid = "invoice.overpaid"
	// EventInvoiceLatePayment: money arrived at an invoice expired for
	// longer than settlement's late window. The payment is recorded and
	// the invoice flagged NeedsAttention, but it stays EXPIRED.
	EventInvoiceLatePayment = "invoice.late_payment"
	// EventInvoiceWrongAsset: a payment in another asset than the
	// invoice's arrived at its deposit address. It is recorded, never
	// counted, and the invoice flagged NeedsAttention; sweep moves it to
	// the merchant.
	EventInvoiceWrongAsset = "invoice.wrong_asset"
	// EventInvoiceWrongNetwork: a payment arrived at the invoice's deposit
	// address on another chain than the invoice's (the address is the
	// same on every chain). It is recorded on the chain it arrived on,
	// never counted, and the invoice flagged NeedsAttention; the money
	// stays at the deposit address on that chain.
	EventInvoiceWrongNetwork = "invoice.wrong_network"
)

// PendingInvoiceTx is an indexed transaction to the deposit address of a
// PENDING invoice (settlement's lag check).
type PendingInvoiceTx struct {
	InvoiceID   int64       `db:"invoice_id"`
	AmountWei   Amount      `db:"amount_wei"` // the invoice's amount
	TxHash      common.Hash `db:"hash"`
	BlockNumber uint64      `db:"block_number"`
	ValueWei    Amount      `db:"value_wei"`
	IndexedAt   time.Time   `db:"indexed_at"`
}
