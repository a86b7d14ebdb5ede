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
	// CreateSweepTx inserts t and sets t.ID.
	CreateSweepTx(ctx context.Context, t *SweepTx) error
	// UpdateSweepTx writes status, mining and fee fields of t.
	UpdateSweepTx(ctx context.Context, t SweepTx) error
	ListSweepTxsByInvoice(ctx context.Context, invoiceID int64) ([]SweepTx, error)
	// ListSweepTxsByStatus returns transactions with one of the statuses,
	// oldest first.
	ListSweepTxsByStatus(ctx context.Context, statuses []string, limit int) ([]SweepTx, error)
	// ListSweepTxsMinedSince returns transactions from addr mined at or
	// after since (for the 24-hour gas spend).
	ListSweepTxsMinedSince(ctx context.Context, from common.Address, since time.Time) ([]SweepTx, error)
	// ReserveNonce returns the next nonce to use for addr and advances it:
	// the larger of the stored next nonce and chainNonce (the node's
	// pending nonce). Use inside the transaction that stores the signed tx.
	ReserveNonce(ctx context.Context, addr common.Address, chainNonce uint64) (uint64, error)
}
