package store

import (
	"cmp"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// Ledger entry kinds: every movement of money the service sees or makes.
const (
	// LedgerPayment: a payment arrived at a deposit address (any asset,
	// counted or not). Written by the database with the payment row; its
	// reversal when a reorg removes the payment.
	LedgerPayment = "payment"
	// LedgerSweep: a sweep moved an invoice's funds from its deposit
	// address to the settlement address (or to the payout wallet, when
	// the sweep tops up its reserve).
	LedgerSweep = "sweep"
	// LedgerGasFunding: the sweep wallet sent native coin for gas (to a
	// deposit address or a payout wallet).
	LedgerGasFunding = "gas_funding"
	// LedgerGasFee: the fee a transaction of the service paid (gas used ×
	// effective price), from its sender to no one.
	LedgerGasFee = "gas_fee"
	// LedgerTopUp: the gas funder topped up the sweep wallet (or a retired
	// key was drained).
	LedgerTopUp = "top_up"
	// LedgerRefund and LedgerPayout: the outbound transfers themselves.
	LedgerRefund = "refund"
	LedgerPayout = "payout"
	// LedgerWalletFunding: money from outside arrived at a wallet of the
	// service (a merchant funding its payout wallet), seen on chain with
	// the confirmations.
	LedgerWalletFunding = "wallet_funding"
	// LedgerOpeningBalance: what a wallet held when the ledger started
	// following it.
	LedgerOpeningBalance = "opening_balance"
)

// LedgerEntry is one movement: Amount base units of an asset (Token nil:
// the native coin) from From to To. A nil From is money appearing (an
// opening balance), a nil To money leaving the chain's accounts (a gas
// fee). Entries are never changed or deleted: a movement undone (a reorg)
// gets a reversal entry, From and To swapped, Reverses naming the entry
// it undoes. The balance of an address is Σ Amount to it − Σ Amount from
// it.
type LedgerEntry struct {
	ID int64 `db:"id"`
	// ChainID is the chain of the movement: the invoice's for a payment,
	// the store handle's for what the service records (InsertLedgerEntries
	// sets it).
	ChainID    uint64 `db:"chain_id"`
	Kind       string `db:"kind"`
	MerchantID *int64 `db:"merchant_id"`
	InvoiceID  *int64 `db:"invoice_id"`
	// OutboundID is the refund or payout the movement belongs to.
	OutboundID *int64 `db:"outbound_id"`
	PaymentID  *int64 `db:"payment_id"`
	SweepTxID  *int64 `db:"sweep_tx_id"`
	// Token is the asset's contract; nil for the native coin.
	Token  *common.Address `db:"token_address"`
	From   *common.Address `db:"from_address"`
	To     *common.Address `db:"to_address"`
	Amount Amount          `db:"amount"`
	// The transaction (and token Transfer log) and block of the movement.
	TxHash      *common.Hash `db:"tx_hash"`
	LogIndex    *int         `db:"log_index"`
	BlockNumber *uint64      `db:"block_number"`
	// At is when the movement happened: its block's time (a reversal: when
	// it was reversed).
	At time.Time `db:"at"`
	// FiatCurrency and FiatMinor are its value in fiat where known; "" and
	// nil otherwise.
	FiatCurrency string  `db:"fiat_currency"`
	FiatMinor    *Amount `db:"fiat_minor"`
	// Reverses is the entry a reversal undoes.
	Reverses   *int64    `db:"reverses"`
	RecordedAt time.Time `db:"recorded_at"`
	// InvoicePricing is not part of the entry: ListLedgerEntries reads it
	// beside an entry of a fiat-priced invoice that has no fiat value of
	// its own, so that the entry is valued at the invoice's locked quote
	// of its asset (Value). Nil otherwise.
	InvoicePricing *Pricing `db:"-"`
	// InvoiceChainID is that invoice's chain, read with its pricing: a
	// quote is the one of the entry's chain and asset (Pricing.QuoteOn).
	InvoiceChainID uint64 `db:"-"`
}

// Value is the entry's value in fiat where known: its own (a refund asked
// for in fiat), else, for an entry of a fiat-priced invoice read by
// ListLedgerEntries, its amount at the invoice's locked quote of its asset
// (rounded down to the minor unit, as the invoice's paid value is). The
// gas of a fiat invoice's sweep is valued so when the invoice quoted the
// native coin. ok is false when the value is not known.
func (e LedgerEntry) Value() (currency string, minor Amount, ok bool) {
	if e.FiatMinor != nil && e.FiatCurrency != "" {
		return e.FiatCurrency, *e.FiatMinor, true
	}
	q, found := e.InvoicePricing.QuoteOn(cmp.Or(e.InvoiceChainID, e.ChainID), e.ChainID, e.Token)
	if !found {
		return "", Amount{}, false
	}
	v, err := q.Value(e.Amount)
	if err != nil {
		return "", Amount{}, false
	}
	return v.Currency.Code, v.Minor, true
}

// LedgerFilter selects ledger entries for ListLedgerEntries, in (At, ID)
// order: a page starts after (AfterAt, AfterID).
type LedgerFilter struct {
	// MerchantID, when set, keeps that merchant's entries only.
	MerchantID *int64
	// From (inclusive) and To (exclusive) bound At; zero: unbounded.
	From, To time.Time
	// AfterAt and AfterID continue a listing: only entries after that
	// position (AfterID 0: from the start).
	AfterAt time.Time
	AfterID int64
	// Limit defaults to 1000; at most 10000.
	Limit int
}

// LedgerScan selects ledger entries for ScanLedgerEntries, by id: the
// reconciliation reads every entry up to a block.
type LedgerScan struct {
	// AfterID continues the scan.
	AfterID int64
	// MaxBlock keeps the entries of movements in blocks at or below it;
	// entries without a block (none are written so) are left out.
	MaxBlock uint64
	// Limit defaults to 1000; at most 10000.
	Limit int
}

// InboundTransfer is an indexed movement to an address: a native
// transaction with a value (LogIndex nil) or a token transfer.
type InboundTransfer struct {
	TxHash      common.Hash `db:"tx_hash"`
	LogIndex    *int        `db:"log_index"`
	BlockNumber uint64      `db:"block_number"`
	// TxIndex is the transaction's position in its block.
	TxIndex   int             `db:"tx_index"`
	BlockTime int64           `db:"block_time"`
	Token     *common.Address `db:"token_address"`
	From      common.Address  `db:"from_address"`
	To        common.Address  `db:"to_address"`
	Amount    Amount          `db:"amount"`
}
