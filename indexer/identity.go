package indexer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/bits"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
)

var (
	// ErrChainChanged: the node serves another chain than the one the
	// database holds (another chain id or genesis, or blocks that differ
	// deeper than MaxReorgDepth or back to genesis): a reset dev chain, a
	// restored snapshot, a new network with the same chain id, a wrong node
	// behind a load balancer. Nothing must be read from it or sent to it.
	ErrChainChanged = errors.New("indexer: the node serves another chain than the one in the database")
)

// whatToDo ends every ErrChainChanged message.
const whatToDo = "if the chain was reset or replaced on purpose (a restarted dev chain, a new test network), " +
	"start with a fresh database; otherwise point the node URL at a node of the recorded chain"

// IdentityStore is what an Identity needs from the database; store.Store
// satisfies it.
type IdentityStore interface {
	GetCursor(ctx context.Context, name string) (store.Cursor, error)
	GetChainIdentity(ctx context.Context) (store.ChainIdentity, error)
	RecordChainIdentity(ctx context.Context, id store.ChainIdentity) (store.ChainIdentity, error)
	ListCheckpoints(ctx context.Context, atOrBelow uint64, limit int) ([]store.Checkpoint, error)
	SaveCheckpoints(ctx context.Context, cps []store.Checkpoint) error
}

var _ IdentityStore = store.Store(nil)

// IdentityConfig tunes an Identity. The zero value is usable.
type IdentityConfig struct {
	// ChainID, when set, is the chain id the node must report; Check
	// fails with ErrWrongChain otherwise. Defaults to 0 (the recorded one
	// only).
	ChainID uint64
	// MaxReorgDepth is the deepest reorg taken for a reorg: blocks that
	// differ deeper than this below the indexed tip mean another chain,
	// and a node further behind than this is not trusted. Use the
	// indexer's value. Defaults to 64.
	MaxReorgDepth int
	// CheckInterval is how often Run checks the node. Defaults to 10 s.
	CheckInterval time.Duration
	// RPCTimeout bounds one call to the node. Defaults to 10 s.
	RPCTimeout time.Duration
	// StoreTimeout bounds one database read or write. Defaults to 30 s.
	StoreTimeout time.Duration
	// Logger receives the failed checks (error), a node falling behind
	// (warn) and recoveries (info). Defaults to a logger that discards
	// everything.
	Logger *slog.Logger
	// Now is the clock for the records' timestamps. Defaults to time.Now.
	Now func() time.Time
}

const defaultCheckInterval = 10 * time.Second

func (c IdentityConfig) withDefaults() IdentityConfig {
	c.MaxReorgDepth = cmp.Or(c.MaxReorgDepth, defaultMaxReorgDepth)
	c.CheckInterval = cmp.Or(c.CheckInterval, defaultCheckInterval)
	c.RPCTimeout = cmp.Or(c.RPCTimeout, defaultRPCTimeout)
	c.StoreTimeout = cmp.Or(c.StoreTimeout, defaultStoreTimeout)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// ChainStatus is what a check found.
type ChainStatus struct {
	// ChainID, GenesisNumber and GenesisHash are the recorded identity:
	// the chain id and the chain's first block (block 0, or block 1 on a
	// CometBFT chain, which has no block 0).
	ChainID       uint64
	GenesisNumber uint64
	GenesisHash   common.Hash
	// NodeHead is the node's head; IndexedTip the indexer's cursor (0
	// when nothing is indexed yet).
	NodeHead, IndexedTip uint64
	// BehindBlocks is IndexedTip − NodeHead when the node is behind, else
	// 0.
	BehindBlocks uint64
	// VerifiedAt is the highest height at which the node's block was
	// compared with a recorded one and matched (0: only the genesis).
	VerifiedAt uint64
	// CheckedAt is when the check ran; Err what it returned (nil: the
	// node serves the recorded chain and is not far behind).
	CheckedAt time.Time
	Err       error
}

// Identity checks that the node serves the chain the database holds: the
// chain id and genesis hash recorded at first start, and the checkpoints
// of indexed block hashes the indexer writes. Every process that talks to
// the node uses one: at start (Check), before sending a stored signed
// transaction (CheckChain), and in the background (Run).
type Identity struct {
	src Source
	st  IdentityStore
	cfg IdentityConfig
	log *slog.Logger

	mu   sync.Mutex
	last ChainStatus
}

// NewIdentity returns an Identity comparing src with what st records.
func NewIdentity(src Source, st IdentityStore, cfg IdentityConfig) (*Identity, error) {
	if src == nil || st == nil {
		return nil, errors.New("indexer: NewIdentity needs a Source and a Store")
	}
	cfg = cfg.withDefaults()
	switch {
	case cfg.MaxReorgDepth < 0:
		return nil, errors.New("indexer: MaxReorgDepth must not be negative")
	case cfg.CheckInterval < 0 || cfg.RPCTimeout < 0 || cfg.StoreTimeout < 0:
		return nil, errors.New("indexer: intervals and timeouts must not be negative")
	}
	return &Identity{src: src, st: st, cfg: cfg, log: cfg.Logger}, nil
}

// CheckChain returns nil when the node serves the recorded chain and its
// head is not below the indexed tip; otherwise an error wrapping
// ErrChainChanged, ErrWrongChain or store.ErrNodeBehind, or the node's or
// database's failure. Call it before sending anything to the node that
// was signed for the recorded chain, and before acting on what the node
// lacks (a missing receipt is a reorg only on a node that is not behind):
// sweep.Config.ChainGuard. A node behind by any number of blocks is
// refused here — a chain swapped for a fresh one that is still at its
// first blocks serves nothing that differs from the checkpoints yet.
func (id *Identity) CheckChain(ctx context.Context) error {
	s, err := id.Check(ctx)
	if err != nil {
		return err
	}
	if s.BehindBlocks > 0 {
		return fmt.Errorf("%w: the node's head %d is %d blocks below indexed block %d; "+
			"waiting for it to catch up before sending anything or acting on a missing receipt",
			store.ErrNodeBehind, s.NodeHead, s.BehindBlocks, s.IndexedTip)
	}
	return nil
}

// Status returns the last check's result (from Check, CheckChain or Run);
// the zero ChainStatus before the first.
func (id *Identity) Status() ChainStatus {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.last
}

// Run checks the node every CheckInterval until ctx ends (it returns nil)
// or the node serves another chain: then it logs why and what to do, and
// returns the error (wrapping ErrChainChanged or ErrWrongChain) so that
// the process stops. A node far behind is logged once when it falls
// behind and once when it is back; node and database failures are logged
// and checked again at the next interval (every reconnect is checked).
func (id *Identity) Run(ctx context.Context) error {
	var prev error
	t := time.NewTicker(id.cfg.CheckInterval)
	defer t.Stop()
	for {
		_, err := id.Check(ctx)
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case errors.Is(err, ErrChainChanged), errors.Is(err, ErrWrongChain):
			id.log.ErrorContext(ctx, "chain identity: refusing to continue", slog.Any("error", err))
			return err
		case err == nil && prev != nil:
			id.log.InfoContext(ctx, "chain identity: the node serves the recorded chain again",
				slog.Any("previous_error", prev))
		case err != nil && errors.Is(err, store.ErrNodeBehind) && !errors.Is(prev, store.ErrNodeBehind):
			id.log.WarnContext(ctx, "chain identity: the node is far behind the indexed chain; not ready until it catches up",
				slog.Any("error", err))
		case err != nil && !errors.Is(err, store.ErrNodeBehind):
			id.log.WarnContext(ctx, "chain identity: check failed; will check again", slog.Any("error", err))
		}
		prev = err
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Check compares the node with the recorded identity (recording it first
// if this is the first start) and returns what it found; the error is
// CheckChain's.
func (id *Identity) Check(ctx context.Context) (ChainStatus, error) {
	s, err := id.check(ctx)
	s.CheckedAt, s.Err = id.cfg.Now(), err
	id.mu.Lock()
	id.last = s
	id.mu.Unlock()
	return s, err
}

func (id *Identity) check(ctx context.Context) (ChainStatus, error) {
	var s ChainStatus
	nodeID, err := id.chainID(ctx)
	if err != nil {
		return s, err
	}
	if id.cfg.ChainID != 0 && nodeID != id.cfg.ChainID {
		return s, fmt.Errorf("%w: the node reports chain id %d, the configured chain id is %d",
			ErrWrongChain, nodeID, id.cfg.ChainID)
	}
	first, hasFirst, err := id.firstBlock(ctx)
	if err != nil {
		return s, err
	}
	rec, err := id.identity(ctx, nodeID, first)
	if err != nil {
		return s, err
	}
	s.ChainID, s.GenesisNumber, s.GenesisHash = rec.ChainID, rec.GenesisNumber, rec.GenesisHash
	if nodeID != rec.ChainID {
		return s, fmt.Errorf("%w: the database holds chain id %d, the node reports %d; %s",
			ErrChainChanged, rec.ChainID, nodeID, whatToDo)
	}
	if hasFirst && rec.GenesisHash != (common.Hash{}) &&
		(first.Number != rec.GenesisNumber || first.Hash != rec.GenesisHash) {
		return s, fmt.Errorf("%w: the database holds a chain whose genesis (first block) is block %d %s, the node's is block %d %s; %s",
			ErrChainChanged, rec.GenesisNumber, rec.GenesisHash.Hex(), first.Number, first.Hash.Hex(), whatToDo)
	}

	// The database before the node: the indexer (maybe in another process,
	// on this node) writes the cursor only after the node served the
	// block, so a head read after the cursor is below it only on a node
	// that is behind — never because a block arrived between the reads.
	sctx, cancel := context.WithTimeout(ctx, id.cfg.StoreTimeout)
	cur, err := id.st.GetCursor(sctx, store.CursorIndexer)
	cancel()
	hasCur := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return s, fmt.Errorf("chain identity: read the indexer cursor: %w", err)
	}
	if hasCur {
		s.IndexedTip = cur.BlockNumber
	}
	// Checkpoints can exist without a cursor (block 1, recorded by a
	// process that started before any indexer ran).
	sctx, cancel = context.WithTimeout(ctx, id.cfg.StoreTimeout)
	highest, err := id.st.ListCheckpoints(sctx, math.MaxUint64, 1)
	cancel()
	if err != nil {
		return s, fmt.Errorf("chain identity: read checkpoints: %w", err)
	}
	if len(highest) > 0 {
		s.IndexedTip = max(s.IndexedTip, highest[0].BlockNumber)
	}
	head, err := retry(ctx, id.cfg.RPCTimeout, id.src.BlockNumber)
	if err != nil {
		return s, err
	}
	s.NodeHead = head
	if head < s.IndexedTip {
		s.BehindBlocks = s.IndexedTip - head
	}
	if err := id.compare(ctx, &s, cur, hasCur); err != nil {
		return s, err
	}
	if s.BehindBlocks > uint64(id.cfg.MaxReorgDepth) {
		return s, fmt.Errorf("%w: the node's head %d is %d blocks below indexed block %d (more than MaxReorgDepth %d), "+
			"last verified at block %d; if the node is resyncing, wait for it; if it was reset, start with a fresh database",
			store.ErrNodeBehind, head, s.BehindBlocks, s.IndexedTip, id.cfg.MaxReorgDepth, s.VerifiedAt)
	}
	return s, id.anchor(ctx, head)
}

// identity returns the recorded identity, recording the node's (its chain
// id and first block) at the first start.
func (id *Identity) identity(ctx context.Context, chainID uint64, first store.Block) (store.ChainIdentity, error) {
	sctx, cancel := context.WithTimeout(ctx, id.cfg.StoreTimeout)
	defer cancel()
	rec, err := id.st.GetChainIdentity(sctx)
	if err == nil {
		return rec, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return rec, fmt.Errorf("chain identity: read: %w", err)
	}
	rec, err = id.st.RecordChainIdentity(sctx, store.ChainIdentity{
		ChainID: chainID, GenesisNumber: first.Number, GenesisHash: first.Hash, RecordedAt: id.cfg.Now(),
	})
	if errors.Is(err, store.ErrOtherChain) {
		return rec, fmt.Errorf("%w: %v", ErrWrongChain, err)
	}
	if err != nil {
		return rec, fmt.Errorf("chain identity: record: %w", err)
	}
	if rec.ChainID == chainID && rec.GenesisHash == first.Hash {
		id.log.InfoContext(ctx, "chain identity recorded", slog.Uint64("chain_id", chainID),
			slog.Uint64("first_block", first.Number), slog.String("first_block_hash", first.Hash.Hex()))
	}
	return rec, nil
}

// firstBlock returns the chain's first block as the node serves it: block
// 0 on go-ethereum chains; on a chain without block 0 (CometBFT chains
// start at height 1, and evmd answers a request for block 0 with block 1)
// block 1, when its parent hash is zero. ok is false when the node serves
// neither (a chain started at a later initial height, or a pruned node):
// then the first block is not compared, and the checkpoints alone tell
// chains apart.
func (id *Identity) firstBlock(ctx context.Context) (store.Block, bool, error) {
	for n := range uint64(2) {
		b, ok, err := id.nodeBlock(ctx, n)
		if err != nil {
			return store.Block{}, false, err
		}
		if ok && (n == 0 || b.ParentHash == (common.Hash{})) {
			return b, true, nil
		}
	}
	return store.Block{}, false, nil
}

// checkpointsRead bounds the checkpoints one check reads: the recent
// ones within the reorg window and the permanent ones below.
func (id *Identity) checkpointsRead() int { return 2*id.cfg.MaxReorgDepth + 80 }

// compare walks the recorded checkpoints (and the cursor) at or below
// min(node head, indexed tip), highest first, asking the node for its
// block at each height. The first match proves the node serves the
// recorded chain up to there. A mismatch within MaxReorgDepth of the
// indexed tip may be a reorg the indexer will follow, so the walk goes on;
// a mismatch deeper than that, or at block 1 (a fork at genesis), means
// another chain.
func (id *Identity) compare(ctx context.Context, s *ChainStatus, cur store.Cursor, hasCur bool) error {
	top := min(s.NodeHead, s.IndexedTip)
	sctx, cancel := context.WithTimeout(ctx, id.cfg.StoreTimeout)
	cps, err := id.st.ListCheckpoints(sctx, top, id.checkpointsRead())
	cancel()
	if err != nil {
		return fmt.Errorf("chain identity: read checkpoints: %w", err)
	}
	if hasCur && cur.BlockNumber <= top && (len(cps) == 0 || cps[0].BlockNumber < cur.BlockNumber) {
		cps = append([]store.Checkpoint{{BlockNumber: cur.BlockNumber, BlockHash: cur.BlockHash}}, cps...)
	}
	depth := uint64(id.cfg.MaxReorgDepth)
	for _, c := range cps {
		if c.BlockNumber == 0 {
			break // the genesis was compared already
		}
		h, ok, err := id.nodeHash(ctx, c.BlockNumber)
		if err != nil {
			return err
		}
		if !ok {
			continue // the node's head moved down meanwhile
		}
		if h == c.BlockHash {
			s.VerifiedAt = c.BlockNumber
			return nil
		}
		switch {
		case s.IndexedTip-c.BlockNumber > depth:
			return fmt.Errorf("%w: block %d is %s on the node but %s in the database, %d blocks below indexed block %d "+
				"(deeper than MaxReorgDepth %d: not a reorg); %s",
				ErrChainChanged, c.BlockNumber, h.Hex(), c.BlockHash.Hex(), s.IndexedTip-c.BlockNumber,
				s.IndexedTip, depth, whatToDo)
		case c.BlockNumber == 1:
			return fmt.Errorf("%w: block 1 is %s on the node but %s in the database: the chains share only their genesis "+
				"(a reset chain, not a reorg); %s", ErrChainChanged, h.Hex(), c.BlockHash.Hex(), whatToDo)
		}
	}
	return nil
}

// anchor records the node's block 1 as a permanent checkpoint when none
// at or below it is recorded yet (an index that started at the head): a
// chain restarted from the same genesis differs from block 1 on, so this
// is what tells it apart. It runs only after a check that passed.
func (id *Identity) anchor(ctx context.Context, head uint64) error {
	if head < 1 {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, id.cfg.StoreTimeout)
	cps, err := id.st.ListCheckpoints(sctx, 1, 1)
	cancel()
	if err != nil {
		return fmt.Errorf("chain identity: read checkpoints: %w", err)
	}
	if len(cps) > 0 && cps[0].BlockNumber == 1 {
		return nil
	}
	h, ok, err := id.nodeHash(ctx, 1)
	if err != nil || !ok {
		return err
	}
	sctx, cancel = context.WithTimeout(ctx, id.cfg.StoreTimeout)
	defer cancel()
	err = id.st.SaveCheckpoints(sctx, []store.Checkpoint{{BlockNumber: 1, BlockHash: h, Permanent: true, RecordedAt: id.cfg.Now()}})
	if err != nil {
		return fmt.Errorf("chain identity: record block 1: %w", err)
	}
	return nil
}

func (id *Identity) chainID(ctx context.Context) (uint64, error) {
	return retry(ctx, id.cfg.RPCTimeout, id.src.ChainID)
}

// nodeHash returns the node's hash of block n, as it reports it; ok is
// false when the node does not have the block.
func (id *Identity) nodeHash(ctx context.Context, n uint64) (common.Hash, bool, error) {
	b, ok, err := id.nodeBlock(ctx, n)
	return b.Hash, ok, err
}

// nodeBlock returns the node's header of block n; ok is false when the
// node does not have the block.
func (id *Identity) nodeBlock(ctx context.Context, n uint64) (store.Block, bool, error) {
	bs, err := retry(ctx, id.cfg.RPCTimeout, func(ctx context.Context) ([]Block, error) {
		return id.src.Blocks(ctx, n, 1, false)
	})
	if err != nil || len(bs) == 0 {
		return store.Block{}, false, err
	}
	return bs[0].Block, true, nil
}

// callAttempts is how many times one call to the node is tried in a
// check, at once, before the check fails.
const callAttempts = 3

// retry calls fn, each call bounded by timeout, up to callAttempts times.
func retry[T any](ctx context.Context, timeout time.Duration, fn func(context.Context) (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for range callAttempts {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		v, err = fn(rctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	return v, err
}

// permanentCheckpoint reports whether the indexer keeps block n's hash
// for good: block 1 and the powers of two, so that a node far behind can
// still be compared at some height.
func permanentCheckpoint(n uint64) bool {
	return n > 0 && bits.OnesCount64(n) == 1
}
