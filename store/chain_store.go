package store

import (
	"context"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// ChainStore stores the indexed chain.
type ChainStore interface {
	// InsertBlocks inserts blocks and their transactions in bulk (COPY on
	// PostgreSQL). ErrConflict if a block number or tx hash exists.
	InsertBlocks(ctx context.Context, blocks []Block, txs []Transaction) error
	GetBlock(ctx context.Context, number uint64) (Block, error)
	GetBlockByHash(ctx context.Context, hash common.Hash) (Block, error)
	// LatestBlock returns the highest indexed block; ErrNotFound if none.
	LatestBlock(ctx context.Context) (Block, error)
	// ListBlockHashes returns the hashes of blocks in [from, to], by number.
	ListBlockHashes(ctx context.Context, from, to uint64) (map[uint64]common.Hash, error)
	// InsertTokenTransfers inserts token transfers in bulk (COPY on
	// PostgreSQL); call it in the transaction that inserts their blocks.
	// ErrConflict if a (tx hash, log index) exists.
	InsertTokenTransfers(ctx context.Context, ts []TokenTransfer) error
	// DeleteBlocksFrom removes blocks ≥ number with their transactions and
	// token transfers, and returns how many blocks it removed.
	DeleteBlocksFrom(ctx context.Context, number uint64) (int64, error)
	GetTx(ctx context.Context, hash common.Hash) (Transaction, error)
	// ListTxsByBlock returns a block's transactions in index order.
	ListTxsByBlock(ctx context.Context, number uint64) ([]Transaction, error)
	// ListTxsByAddress returns transactions from or to addr, newest first,
	// continuing below the position (beforeBlock, beforeIndex) when
	// beforeBlock > 0.
	ListTxsByAddress(ctx context.Context, addr common.Address, beforeBlock uint64, beforeIndex int, limit int) ([]Transaction, error)
	// ListTokenTransfersByTx returns the token transfers of a
	// transaction, by log index.
	ListTokenTransfersByTx(ctx context.Context, hash common.Hash) ([]TokenTransfer, error)
	// ListTokenTransfersByAddress returns token transfers from or to addr,
	// newest first, continuing below the position (beforeBlock,
	// beforeLogIndex) when beforeBlock > 0.
	ListTokenTransfersByAddress(ctx context.Context, addr common.Address, beforeBlock uint64, beforeLogIndex int, limit int) ([]TokenTransfer, error)
	InsertReorg(ctx context.Context, r *Reorg) error
	ListReorgs(ctx context.Context, afterID int64, limit int) ([]Reorg, error)
}

// IdentityStore stores the identity of the chain the database holds.
type IdentityStore interface {
	// RecordChainIdentity stores id unless an identity is already recorded,
	// and returns the recorded one (id, or the earlier record).
	RecordChainIdentity(ctx context.Context, id ChainIdentity) (ChainIdentity, error)
	// GetChainIdentity returns ErrNotFound when none was recorded.
	GetChainIdentity(ctx context.Context) (ChainIdentity, error)
	// SaveCheckpoints inserts checkpoints, overwriting those at the same
	// heights.
	SaveCheckpoints(ctx context.Context, cps []Checkpoint) error
	// ListCheckpoints returns up to limit checkpoints at or below number,
	// highest first.
	ListCheckpoints(ctx context.Context, atOrBelow uint64, limit int) ([]Checkpoint, error)
	// DeleteCheckpointsFrom removes the checkpoints ≥ number and returns
	// how many it removed.
	DeleteCheckpointsFrom(ctx context.Context, number uint64) (int64, error)
	// PruneCheckpoints removes the checkpoints below number that are not
	// permanent and returns how many it removed.
	PruneCheckpoints(ctx context.Context, below uint64) (int64, error)
}

// InvoiceTx is an indexed transaction paying an invoice's deposit address.
type InvoiceTx struct {
	Transaction
	InvoiceID int64 `db:"invoice_id"`
	// ChainID is the chain of the transaction (the handle's); the
	// invoice's may be another (a wrong-network payment).
	ChainID uint64 `db:"chain_id"`
}

// CursorStore stores named chain cursors.
type CursorStore interface {
	// GetCursor returns ErrNotFound when the cursor was never set.
	GetCursor(ctx context.Context, name string) (Cursor, error)
	// SetCursor creates or overwrites the cursor.
	SetCursor(ctx context.Context, c Cursor) error
}

// StopStore records that a chain's indexer, settlement and sweep stopped
// while their process went on (payd: the chain's node serves another
// chain, or its indexer refused a reorg), so that a process that does not
// run them — an API on another machine — refuses new invoices on the
// chain too (docs/chains.md). The process that stopped writes it; a
// process that starts the chain's parts again clears it.
type StopStore interface {
	// ChainStop returns the handle's chain's stop: the problem, a stable
	// code ("another_chain", "reorg_too_deep"), and when it was recorded;
	// ok is false while no stop is recorded.
	ChainStop(ctx context.Context) (problem string, at time.Time, ok bool, err error)
	// SetChainStop records a stop of the handle's chain, replacing an
	// earlier one; problem "" clears it.
	SetChainStop(ctx context.Context, problem string, at time.Time) error
}

// FinalityStore records the chain's finalized block under the tag finality
// mode (store.FinalityTag, docs/chains.md): the highest block the node
// reported as its "finalized" block that the indexer found, with the same
// hash, on the indexed chain. The indexer writes it; invoice, settlement
// and sweep read it.
type FinalityStore interface {
	// FinalizedBlock returns the recorded finalized block's number; ok is
	// false when none was recorded.
	FinalizedBlock(ctx context.Context) (number uint64, ok bool, err error)
	// SetFinalizedBlock records number as the finalized block unless a
	// higher one is recorded: the record never moves back.
	SetFinalizedBlock(ctx context.Context, number uint64) error
}
