package store

import (
	"context"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// SweepStore stores the transactions the sweep worker signs and the nonces
// of the wallets it sends from.
type SweepStore interface {
	// ClaimSweeps leases up to limit invoices whose sweep is due
	// (sweep_status QUEUED, FUNDING or SENT, sweep_next_attempt_at unset or
	// ≤ now, no live lease) until now+lease. Concurrent callers never get
	// the same invoice.
	ClaimSweeps(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Invoice, error)
	// CreateSweepTx inserts t and sets t.ID. ErrConflict on a known tx
	// hash, a second live transaction for one (sender, kind, nonce) or a second
	// live sweep for one deposit address (see SweepTxLive).
	CreateSweepTx(ctx context.Context, t *SweepTx) error
	// UpdateSweepTx writes the status, broadcast, mining and fee fields of
	// t. ErrConflict when the status change would make two transactions
	// live for one (sender, kind, nonce), or two sweeps live for one deposit
	// address.
	UpdateSweepTx(ctx context.Context, t SweepTx) error
	// ListSweepTxsByInvoice returns the invoice's transactions on the
	// bound chain, by id: its sweep's and its refunds' (a wrong-network
	// refund's are on the chain that money arrived on).
	ListSweepTxsByInvoice(ctx context.Context, invoiceID int64) ([]SweepTx, error)
	// ListUnminedSweepTxs returns the transactions from addr that are
	// SIGNED or SENT, by nonce then id.
	ListUnminedSweepTxs(ctx context.Context, from common.Address) ([]SweepTx, error)
	// ListSweepTxsByNonce returns every transaction of kind from addr at
	// nonce, whatever its status (replaced and failed ones included), by
	// id: an original and its replacements.
	ListSweepTxsByNonce(ctx context.Context, from common.Address, kind string, nonce uint64) ([]SweepTx, error)
	// ListFailedSweepTxs returns the FAILED transactions of kind from addr,
	// by nonce then id: the sweep looks again for a receipt of those a
	// release before v0.3.0 failed wrongly (sweep/recheck.go).
	ListFailedSweepTxs(ctx context.Context, from common.Address, kind string) ([]SweepTx, error)
	// IsDepositAddress reports whether addr is the deposit address of an
	// invoice, archived ones included.
	IsDepositAddress(ctx context.Context, addr common.Address) (bool, error)
	// ListInvoicesBySweepStatus returns invoices whose sweep_status is
	// status and whose id is greater than afterID, by id, at most limit
	// (defaults to 100).
	ListInvoicesBySweepStatus(ctx context.Context, status string, afterID int64, limit int) ([]Invoice, error)
	// ListSweepTxsMinedSince returns transactions from addr mined at or
	// after since (for the 24-hour gas spend).
	ListSweepTxsMinedSince(ctx context.Context, from common.Address, since time.Time) ([]SweepTx, error)
	// ReserveNonce returns the next nonce to use for addr and advances it:
	// the larger of the stored next nonce and chainNonce (the node's
	// pending nonce). Use inside the transaction that stores the signed tx.
	ReserveNonce(ctx context.Context, addr common.Address, chainNonce uint64) (uint64, error)
}
