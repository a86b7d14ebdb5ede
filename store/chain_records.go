package store

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// Block is an indexed block, with the hash the node reported.
type Block struct {
	Number     uint64      `db:"number" json:"number"`
	Hash       common.Hash `db:"hash" json:"hash"`
	ParentHash common.Hash `db:"parent_hash" json:"parent_hash"`
	// Timestamp is the block time in seconds since the Unix epoch.
	Timestamp uint64         `db:"timestamp" json:"timestamp"`
	Miner     common.Address `db:"miner" json:"miner"`
	GasLimit  uint64         `db:"gas_limit" json:"gas_limit"`
	GasUsed   uint64         `db:"gas_used" json:"gas_used"`
	// BaseFeeWei is nil on chains (or blocks) without EIP-1559.
	BaseFeeWei *Amount   `db:"base_fee_wei" json:"base_fee_wei"`
	TxCount    int       `db:"tx_count" json:"tx_count"`
	IndexedAt  time.Time `db:"indexed_at" json:"-"`
}

// Transaction is an indexed transaction.
type Transaction struct {
	Hash        common.Hash    `db:"hash" json:"hash"`
	BlockNumber uint64         `db:"block_number" json:"block_number"`
	BlockHash   common.Hash    `db:"block_hash" json:"block_hash"`
	Index       int            `db:"tx_index" json:"transaction_index"`
	From        common.Address `db:"from_address" json:"from"`
	// To is nil for a contract creation.
	To       *common.Address `db:"to_address" json:"to"`
	ValueWei Amount          `db:"value_wei" json:"value_wei"`
	Nonce    uint64          `db:"nonce" json:"nonce"`
	Gas      uint64          `db:"gas" json:"gas"`
	Type     uint8           `db:"type" json:"type"`
	// GasPriceWei is the legacy gas price, or the effective price when the
	// node reports one; nil when unknown.
	GasPriceWei       *Amount `db:"gas_price_wei" json:"gas_price_wei,omitempty"`
	MaxFeeWei         *Amount `db:"max_fee_wei" json:"max_fee_wei,omitempty"`
	MaxPriorityFeeWei *Amount `db:"max_priority_fee_wei" json:"max_priority_fee_wei,omitempty"`
	Input             []byte  `db:"input" json:"input"`
}

// Reorg records a chain reorganisation the indexer followed.
type Reorg struct {
	ID int64 `db:"id" json:"id"`
	// ForkBlock is the first block number that was replaced (the common
	// ancestor is ForkBlock-1).
	ForkBlock uint64 `db:"fork_block" json:"fork_block"`
	Depth     int    `db:"depth" json:"depth"`
	// OldHashes are the orphaned blocks' hashes, oldest first; NewHashes
	// the replacing blocks known when the reorg was detected.
	OldHashes  HashList  `db:"old_hashes" json:"old_hashes"`
	NewHashes  HashList  `db:"new_hashes" json:"new_hashes"`
	DetectedAt time.Time `db:"detected_at" json:"detected_at"`
}

// Cursor is a named position on the indexed chain (the indexer's head,
// settlement's last processed block).
type Cursor struct {
	Name        string      `db:"name"`
	BlockNumber uint64      `db:"block_number"`
	BlockHash   common.Hash `db:"block_hash"`
	UpdatedAt   time.Time   `db:"updated_at"`
}

// Cursor names.
const (
	CursorIndexer    = "indexer"
	CursorSettlement = "settlement"
)

// HashList is a list of hashes stored as a JSON array of hex strings.
type HashList []common.Hash

// Value implements driver.Valuer.
func (l HashList) Value() (driver.Value, error) {
	if l == nil {
		l = HashList{}
	}
	b, err := json.Marshal([]common.Hash(l))
	return string(b), err
}

// Scan implements sql.Scanner.
func (l *HashList) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		return fmt.Errorf("scan hash list: unsupported type %T", src)
	}
	var hs []common.Hash
	if err := json.Unmarshal(b, &hs); err != nil {
		return fmt.Errorf("scan hash list: %w", err)
	}
	*l = hs
	return nil
}

// ChainIdentity is the chain a database holds, recorded at first start so
// that a node serving another chain with the same chain id (a reset dev
// chain, a restored snapshot, a wrong node behind a load balancer) is
// noticed.
type ChainIdentity struct {
	ChainID uint64 `db:"chain_id"`
	// GenesisNumber is the number of the chain's first block: 0 on
	// go-ethereum chains, 1 on CometBFT chains (Cosmos EVM), which have no
	// block 0.
	GenesisNumber uint64 `db:"genesis_number"`
	// GenesisHash is the first block's hash as the node reported it
	// (never recomputed); all zero when the node served no first block
	// (a chain started at a later initial height): then it is not
	// compared.
	GenesisHash common.Hash `db:"genesis_hash"`
	RecordedAt  time.Time   `db:"recorded_at"`
}

// Checkpoint is the hash of an indexed block, kept to compare a node's
// chain with the indexed one.
type Checkpoint struct {
	BlockNumber uint64      `db:"block_number"`
	BlockHash   common.Hash `db:"block_hash"`
	// Permanent checkpoints survive PruneCheckpoints (a reorg the indexer
	// follows still removes them with DeleteCheckpointsFrom).
	Permanent  bool      `db:"permanent"`
	RecordedAt time.Time `db:"recorded_at"`
}

// Finality modes: when a chain's blocks are final (docs/chains.md). Every
// part that waits for confirmations (invoice, settlement, sweep) takes
// the chain's mode.
const (
	// FinalityDepth: a block is final with Confirmations blocks built on
	// top of it (a chain whose consensus may reorganise recent blocks).
	FinalityDepth = "depth"
	// FinalityInstant: a block is final once included (a chain whose
	// consensus finalises at inclusion, such as CometBFT-based Cosmos EVM
	// chains): no confirmations to wait for.
	FinalityInstant = "instant"
	// FinalityTag: a block is final once it is at or below the node's
	// "finalized" block (eth_getBlockByNumber("finalized"): Ethereum
	// proof-of-stake, rollups that report one). The indexer alone reads
	// the node's finalized block, checks it against the indexed chain and
	// records it (FinalityStore); invoice, settlement and sweep read the
	// record. No confirmations to count.
	FinalityTag = "tag"
)

// CheckFinality reports whether mode is a finality mode ("" is
// FinalityDepth), and whether confirmations fit it: FinalityInstant and
// FinalityTag take none.
func CheckFinality(mode string, confirmations int) error {
	switch mode {
	case "", FinalityDepth:
		return nil
	case FinalityInstant:
		if confirmations != 0 {
			return fmt.Errorf("finality %q takes no confirmations (got %d): a block is final once included", mode, confirmations)
		}
		return nil
	case FinalityTag:
		if confirmations != 0 {
			return fmt.Errorf("finality %q takes no confirmations (got %d): a block is final once the node reports it finalized", mode, confirmations)
		}
		return nil
	}
	return fmt.Errorf("finality %q: want %q, %q or %q", mode, FinalityDepth, FinalityTag, FinalityInstant)
}

// FinalityCountsConfirmations reports whether mode counts confirmations
// (FinalityDepth, or "" which is FinalityDepth): where a Confirmations
// default of 12 applies.
func FinalityCountsConfirmations(mode string) bool {
	return mode == "" || mode == FinalityDepth
}
