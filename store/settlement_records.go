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
}

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
