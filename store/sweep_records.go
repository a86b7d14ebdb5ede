package store

import (
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// Sweep transaction kinds.
const (
	SweepTxFunding = "FUNDING" // sweep wallet → deposit address (gas)
	SweepTxSweep   = "SWEEP"   // deposit address → settlement address
	SweepTxTopUp   = "TOPUP"   // gas funder → sweep wallet
	// Token sweeps by EIP-2612 permit: the sweep wallet submits the deposit
	// key's signed permit, then pulls the tokens with transferFrom.
	SweepTxPermit = "PERMIT" // sweep wallet → token: permit(deposit, wallet, amount, …)
	SweepTxPull   = "PULL"   // sweep wallet → token: transferFrom(deposit, settlement address, amount)
	// SweepTxNative moves the native coin paid to a token invoice (a
	// wrong-asset payment) from the deposit address to the settlement
	// address, after the token sweep; it pays its own gas.
	SweepTxNative = "NATIVE" // deposit address → settlement address
	// SweepTxOutbound sends a refund or payout (OutboundID set): from the
	// merchant's payout wallet, or from the refunded invoice's deposit
	// address before its sweep.
	SweepTxOutbound = "OUTBOUND" // payout wallet or deposit address → destination
)

// SweepTxLive reports whether a transaction in this status may still be
// (or is) mined: SIGNED, SENT or MINED. At most one transaction per
// (sender, kind, nonce) is live, and at most one SWEEP per deposit address
// (the database's unique indexes).
func SweepTxLive(status string) bool {
	return status == SweepTxSigned || status == SweepTxSent || status == SweepTxMined
}

// Sweep transaction statuses.
const (
	SweepTxSigned   = "SIGNED"   // stored, not yet broadcast
	SweepTxSent     = "SENT"     // broadcast, not yet mined
	SweepTxMined    = "MINED"    // included with the confirmations required
	SweepTxReplaced = "REPLACED" // superseded by a transaction with the same nonce
	SweepTxFailed   = "FAILED"   // reverted, or its nonce was used by another transaction
)

// SweepTx is a transaction the sweep worker signed. It is stored before it
// is broadcast, so that a crash re-broadcasts the same bytes.
type SweepTx struct {
	ID int64 `db:"id" json:"id"`
	// ChainID is the chain the transaction is sent on: the chain of the
	// store handle that created it (CreateSweepTx sets it).
	ChainID uint64 `db:"chain_id" json:"chain_id"`
	// InvoiceID is nil for a gas top-up of the sweep wallet.
	InvoiceID         *int64         `db:"invoice_id" json:"invoice_id"`
	Kind              string         `db:"kind" json:"kind"`
	From              common.Address `db:"from_address" json:"from"`
	To                common.Address `db:"to_address" json:"to"`
	Nonce             uint64         `db:"nonce" json:"nonce"`
	ValueWei          Amount         `db:"value_wei" json:"value_wei"`
	GasLimit          uint64         `db:"gas_limit" json:"gas_limit"`
	MaxFeeWei         Amount         `db:"max_fee_wei" json:"max_fee_wei"`
	MaxPriorityFeeWei Amount         `db:"max_priority_fee_wei" json:"max_priority_fee_wei"`
	TxHash            common.Hash    `db:"tx_hash" json:"tx_hash"`
	RawTx             []byte         `db:"raw_tx" json:"-"`
	Status            string         `db:"status" json:"status"`
	BlockNumber       *uint64        `db:"block_number" json:"block_number"`
	GasUsed           *uint64        `db:"gas_used" json:"gas_used"`
	// FeeWei is gas used × effective gas price, once mined.
	FeeWei    *Amount    `db:"fee_wei" json:"fee_wei"`
	CreatedAt time.Time  `db:"created_at" json:"created_at"`
	UpdatedAt time.Time  `db:"updated_at" json:"updated_at"`
	SentAt    *time.Time `db:"sent_at" json:"sent_at"`
	MinedAt   *time.Time `db:"mined_at" json:"mined_at"`
	// SentBlock is the chain head when the node last accepted the
	// transaction: a transaction not mined some blocks later is replaced.
	SentBlock *uint64 `db:"sent_block" json:"sent_block"`
	// LastError is the node's last refusal of the transaction, as a short
	// class ("insufficient gas", "nonce too low", …); empty once accepted.
	LastError string `db:"last_error" json:"last_error,omitempty"`
	// WrongToken is set on the transactions that sweep a token paid to the
	// invoice as a wrong asset (docs/tokens.md): that token. Nil for the
	// invoice's own sweep.
	WrongToken *common.Address `db:"wrong_token" json:"wrong_token,omitempty"`
	// OutboundID is the refund or payout the transaction belongs to (its
	// OUTBOUND send, or a FUNDING of its gas); nil otherwise.
	OutboundID *int64 `db:"outbound_id" json:"outbound_id,omitempty"`
}
