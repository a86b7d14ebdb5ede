package indexer

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/evmpay/evmpay/store"
)

// Config tunes an Indexer. The zero value is usable: every field documents
// its default.
type Config struct {
	// PollInterval is how often the node is asked for its head once the
	// index has caught up. Defaults to 1.5 s.
	PollInterval time.Duration
	// Backfill makes an indexer that finds no cursor in the database start
	// at StartBlock (genesis by default) instead of at the node's current
	// head. It has no effect once a cursor exists: the indexer always
	// resumes from its cursor. Hosts map INDEXER_BACKFILL=true to it.
	// Defaults to false.
	Backfill bool
	// StartBlock is where a backfill starts, for chains whose early blocks
	// the node cannot serve (a Cosmos chain restarted at a later initial
	// height, a pruned node). A backfill never starts below the chain's
	// first block (1 on a CometBFT chain, which has no block 0). Defaults
	// to 0 (genesis).
	StartBlock uint64
	// BatchSize is how many blocks one eth_getBlockByNumber batch asks for,
	// and how many blocks at most one database transaction writes. Keep it
	// under the node's batch limits (geth: 1000 calls, 25 MB per
	// response). Defaults to 100.
	BatchSize int
	// Concurrency is how many batches are fetched at once while catching
	// up; one writer stores them in order. Defaults to 4.
	Concurrency int
	// MaxReorgDepth is the deepest reorg followed: when more than this many
	// indexed blocks would be orphaned, Run stops with an error wrapping
	// store.ErrReorgTooDeep instead of rewriting that much history. Defaults to
	// 64.
	MaxReorgDepth int
	// ChainID, when set, is the EIP-155 chain id the node must report
	// (eth_chainId); Run stops with an error wrapping ErrWrongChain
	// otherwise. Defaults to 0 (any chain).
	ChainID uint64
	// Tokens are the ERC-20 contracts whose Transfer(address,address,uint256)
	// logs are indexed with their blocks (table token_transfers): fetched by
	// block hash in one eth_getLogs batch per batch of blocks, written in
	// the blocks' transaction, removed with them by a reorg. Defaults to
	// none (no eth_getLogs calls).
	Tokens []common.Address
	// Finality is the chain's finality mode (store.FinalityDepth,
	// store.FinalityInstant, store.FinalityTag), the one invoice,
	// settlement and sweep take. Only store.FinalityTag changes what the
	// indexer does: after each step it reads the node's finalized block
	// (the Source must implement FinalizedSource) and records its number
	// (store.FinalityStore) once the indexed chain holds that block with
	// the same hash, never lowering the record; and it refuses, like a
	// reorg deeper than MaxReorgDepth (store.ErrReorgTooDeep), a reorg that
	// would remove a block at or below the recorded one. Defaults to
	// store.FinalityDepth.
	Finality string
	// RPCTimeout bounds one call or batch to the node. Defaults to 10 s.
	RPCTimeout time.Duration
	// StoreTimeout bounds one database transaction. Defaults to 30 s.
	StoreTimeout time.Duration
	// RetryMin and RetryMax bound the wait after a failure (node or
	// database): it starts at RetryMin and doubles up to RetryMax, and
	// resets after a success. Defaults to 250 ms and 30 s.
	RetryMin, RetryMax time.Duration
	// LockRetryInterval is how often an indexer that finds the "indexer"
	// lock held elsewhere tries again. Defaults to 5 s.
	LockRetryInterval time.Duration
	// HeartbeatInterval is how often an indexer with nothing new to write
	// still refreshes its cursor's updated_at, after a poll that confirmed
	// the node's head, so that readers can tell a live index from a
	// stalled one (see ReadAPIConfig.StaleAfter). Defaults to 15 s.
	HeartbeatInterval time.Duration
	// ProgressInterval is how often progress (blocks/s, transactions/s,
	// ETA) is logged while catching up. Defaults to 10 s.
	ProgressInterval time.Duration
	// Registerer receives the indexer's Prometheus collectors. Defaults to
	// a new private registry, available from Indexer.Gatherer.
	Registerer prometheus.Registerer
	// Logger receives progress (info), reorgs and retried failures (warn).
	// Defaults to a logger that discards everything.
	Logger *slog.Logger
	// Now is the clock used for timestamps and rates. Defaults to
	// time.Now.
	Now func() time.Time
}

const (
	defaultPollInterval   = 1500 * time.Millisecond
	defaultBatchSize      = 100
	defaultConcurrency    = 4
	defaultMaxReorgDepth  = 64
	defaultRPCTimeout     = 10 * time.Second
	defaultStoreTimeout   = 30 * time.Second
	defaultRetryMin       = 250 * time.Millisecond
	defaultRetryMax       = 30 * time.Second
	defaultLockRetry      = 5 * time.Second
	defaultHeartbeat      = 15 * time.Second
	defaultProgressPeriod = 10 * time.Second
	// maxBatchSize keeps one batch within geth's default batch limit.
	maxBatchSize = 1000
)

func (c Config) withDefaults() Config {
	c.PollInterval = cmp.Or(c.PollInterval, defaultPollInterval)
	c.BatchSize = cmp.Or(c.BatchSize, defaultBatchSize)
	c.Concurrency = cmp.Or(c.Concurrency, defaultConcurrency)
	c.MaxReorgDepth = cmp.Or(c.MaxReorgDepth, defaultMaxReorgDepth)
	c.RPCTimeout = cmp.Or(c.RPCTimeout, defaultRPCTimeout)
	c.StoreTimeout = cmp.Or(c.StoreTimeout, defaultStoreTimeout)
	c.RetryMin = cmp.Or(c.RetryMin, defaultRetryMin)
	c.RetryMax = cmp.Or(c.RetryMax, defaultRetryMax)
	c.LockRetryInterval = cmp.Or(c.LockRetryInterval, defaultLockRetry)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, defaultHeartbeat)
	c.ProgressInterval = cmp.Or(c.ProgressInterval, defaultProgressPeriod)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	if err := store.CheckFinality(c.Finality, 0); err != nil {
		return fmt.Errorf("indexer: %w", err)
	}
	switch {
	case c.PollInterval < 0:
		return errors.New("indexer: PollInterval must not be negative")
	case c.BatchSize < 0 || c.BatchSize > maxBatchSize:
		return errors.New("indexer: BatchSize must be within 1..1000")
	case c.Concurrency < 0:
		return errors.New("indexer: Concurrency must not be negative")
	case c.MaxReorgDepth < 0:
		return errors.New("indexer: MaxReorgDepth must not be negative")
	case c.RPCTimeout < 0 || c.StoreTimeout < 0:
		return errors.New("indexer: timeouts must not be negative")
	case c.RetryMin < 0 || c.RetryMax < 0:
		return errors.New("indexer: RetryMin and RetryMax must not be negative")
	case c.RetryMin > c.RetryMax:
		return errors.New("indexer: RetryMin must not exceed RetryMax")
	case c.LockRetryInterval < 0 || c.HeartbeatInterval < 0 || c.ProgressInterval < 0:
		return errors.New("indexer: intervals must not be negative")
	}
	return nil
}
