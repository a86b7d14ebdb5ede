package indexer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/evmpay/evmpay/store"
)

// Store is what the indexer needs from the shared database; store.Store
// (PostgreSQL or SQLite) satisfies it.
type Store interface {
	store.Locker
	// InTx runs fn in one database transaction.
	InTx(ctx context.Context, fn func(tx store.Tx) error) error
	GetCursor(ctx context.Context, name string) (store.Cursor, error)
	LatestBlock(ctx context.Context) (store.Block, error)
	ListBlockHashes(ctx context.Context, from, to uint64) (map[uint64]common.Hash, error)
	// FinalizedBlock is the finalized block recorded under finality
	// "tag" (written with store.Tx's SetFinalizedBlock).
	FinalizedBlock(ctx context.Context) (number uint64, ok bool, err error)
	IdentityStore
}

var _ Store = store.Store(nil)

// LockName is the named lock (store.Locker) an indexer holds while it runs,
// so that one indexer at a time writes the chain whatever the number of
// processes.
const LockName = "indexer"

var (
	// ErrWrongChain: the node reports another chain id than Config.ChainID.
	ErrWrongChain = errors.New("indexer: node is on another chain")
	// ErrChainMoved: the node's answers changed under us (a batch that does
	// not link up, a log of another block than asked, a reorg that undid
	// itself). A Source returns it (wrapped) when it sees that; the indexer
	// polls again at once.
	ErrChainMoved = errors.New("indexer: chain moved while reading")
)

// Internal signals between the loop's steps.
var (
	// errReorg: the next block does not build on the indexed head.
	errReorg = errors.New("indexer: next block does not extend the indexed chain")
	// errLockLost: the named lock was lost; stop writing and re-acquire.
	errLockLost = errors.New("indexer: lock lost")
)

// Indexer follows the chain into the store. Create it with New and start
// it with Run.
type Indexer struct {
	src      Source
	st       Store
	cfg      Config
	log      *slog.Logger
	m        *metrics
	gatherer prometheus.Gatherer
	running  atomic.Bool
	// logBatch is how many blocks' Transfer logs one eth_getLogs batch
	// asks for: BatchSize, lowered when a batch fails for its size.
	logBatch atomic.Int64
	id       *Identity

	// The fields below belong to the goroutine running Run.
	cur    store.Cursor // the indexed head, as stored
	hasCur bool
	// first is where a backfill starts: StartBlock, or the chain's first
	// block when that is higher (1 on a CometBFT chain, which has no
	// block 0).
	first  uint64
	prog   *progress // set while catching up
	behind bool      // the node's head is below the cursor (warned)
	// Under finality "tag" (fin is set): the recorded finalized block
	// (loaded by prepare, advanced by recordFinalized), and whether the
	// node's last answer for its finalized block was a failure (warned).
	fin          FinalizedSource
	finalized    uint64
	hasFinalized bool
	finFailing   bool
}

// New returns an Indexer reading src and writing st.
func New(src Source, st Store, cfg Config) (*Indexer, error) {
	if src == nil || st == nil {
		return nil, errors.New("indexer: New needs a Source and a Store")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ix := &Indexer{src: src, st: st, cfg: cfg, log: cfg.Logger}
	if cfg.Finality == store.FinalityTag {
		fin, ok := src.(FinalizedSource)
		if !ok {
			return nil, fmt.Errorf("indexer: finality %q needs a Source that reads the node's finalized block "+
				"(a FinalizedSource, as RPCSource and ClientSource are); %T is not one", cfg.Finality, src)
		}
		ix.fin = fin
	}
	ix.logBatch.Store(int64(cfg.BatchSize))
	id, err := NewIdentity(src, st, IdentityConfig{
		ChainID:       cfg.ChainID,
		MaxReorgDepth: cfg.MaxReorgDepth,
		RPCTimeout:    cfg.RPCTimeout,
		StoreTimeout:  cfg.StoreTimeout,
		Logger:        cfg.Logger,
		Now:           cfg.Now,
	})
	if err != nil {
		return nil, err
	}
	ix.id = id
	reg := cfg.Registerer
	if reg == nil {
		r := prometheus.NewRegistry()
		reg, ix.gatherer = r, r
	} else if g, ok := reg.(prometheus.Gatherer); ok {
		ix.gatherer = g
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("indexer: register metrics: %w", err)
	}
	ix.m = m
	return ix, nil
}

// Gatherer returns the registry holding the indexer's metrics when
// Config.Registerer was nil (or is also a Gatherer); nil otherwise.
func (ix *Indexer) Gatherer() prometheus.Gatherer { return ix.gatherer }

// Run indexes until ctx is cancelled, then returns nil after finishing the
// database write in progress. It first takes the "indexer" lock (waiting
// while another process holds it) and gives it up, and stops writing, if
// the lock is lost, then takes it again. Failures of the node or the
// database are retried with capped exponential backoff; Run returns an
// error only for what retrying cannot fix: a reorg deeper than
// MaxReorgDepth or, under finality "tag", one that would remove a block
// recorded as finalized (store.ErrReorgTooDeep), a node on another chain id
// (ErrWrongChain), or a node serving another chain than the one indexed
// (ErrChainChanged: another genesis, or blocks that differ back to genesis
// or deeper than MaxReorgDepth), which it never takes for a reorg.
func (ix *Indexer) Run(ctx context.Context) error {
	if !ix.running.CompareAndSwap(false, true) {
		return errors.New("indexer: Run is already running")
	}
	defer ix.running.Store(false)
	bo := ix.newBackoff()
	waiting := false
	for {
		lock, err := ix.st.TryLock(ctx, LockName)
		if ctx.Err() != nil {
			if err == nil {
				_ = lock.Unlock()
			}
			return nil
		}
		switch {
		case errors.Is(err, store.ErrLocked):
			if !waiting {
				ix.log.InfoContext(ctx, "indexer: another process holds the indexer lock; waiting",
					slog.Duration("retry_every", ix.cfg.LockRetryInterval))
				waiting = true
			}
			if !sleep(ctx, ix.cfg.LockRetryInterval) {
				return nil
			}
			continue
		case err != nil:
			d := bo.next()
			ix.m.errors.WithLabelValues("store").Inc()
			ix.log.WarnContext(ctx, "indexer: cannot take the indexer lock; retrying",
				slog.Any("error", err), slog.Duration("retry_in", d))
			if !sleep(ctx, d) {
				return nil
			}
			continue
		}
		waiting = false
		bo.reset()
		err = ix.session(ctx, lock)
		_ = lock.Unlock()
		switch {
		case errors.Is(err, errLockLost) && ctx.Err() == nil:
			ix.log.WarnContext(ctx, "indexer: lost the indexer lock; stopped writing, taking it again")
			continue
		case fatal(err):
			return err
		}
		// session returns nothing else unless ctx has ended.
		return nil
	}
}

// Sync indexes once: it takes the "indexer" lock (an error wrapping
// store.ErrLocked when another process holds it), checks the node's chain
// as Run does at start, indexes every block the node has now, follows a
// reorg it finds, and returns. Nothing is retried: a failure is returned.
// Run does the same work every PollInterval; Sync is for hosts that
// schedule it themselves, and for tests that drive the chain block by
// block (evmpaytest's Env.Step). Sync and Run must not overlap.
func (ix *Indexer) Sync(ctx context.Context) error {
	if !ix.running.CompareAndSwap(false, true) {
		return errors.New("indexer: Sync called while Run or Sync is running")
	}
	defer ix.running.Store(false)
	lock, err := ix.st.TryLock(ctx, LockName)
	if err != nil {
		return fmt.Errorf("indexer: %w", err)
	}
	defer lock.Unlock()
	// Stop writing as soon as the lock is lost, as Run does.
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-lock.Lost():
			cancel(errLockLost)
		case <-sctx.Done():
		}
	}()
	if err := ix.prepare(sctx, slog.LevelDebug); err != nil {
		return err
	}
	for moved := 0; ; {
		idle, err := ix.step(sctx, sctx)
		switch {
		case errors.Is(err, ErrChainMoved) && moved < 3:
			moved++ // the node's answers changed while reading: read again
		case err != nil:
			if cause := context.Cause(sctx); errors.Is(cause, errLockLost) {
				return errLockLost
			}
			return err
		case idle:
			return nil
		}
	}
}

// fatal reports the errors that stop Run: an operator decides.
func fatal(err error) bool {
	return errors.Is(err, store.ErrReorgTooDeep) || errors.Is(err, ErrWrongChain) || errors.Is(err, ErrChainChanged)
}

// session indexes while the lock is held.
func (ix *Indexer) session(ctx context.Context, lock store.Lock) error {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// Writes outlive ctx (the batch in hand is finished) but not the lock.
	wctx, wcancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer wcancel(nil)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-lock.Lost():
			cancel(errLockLost)
			wcancel(errLockLost)
		case <-done:
		}
	}()
	err := ix.loop(sctx, wctx)
	if cause := context.Cause(sctx); errors.Is(cause, errLockLost) {
		return errLockLost
	}
	return err
}

// loop polls and indexes until ctx ends or a fatal error.
func (ix *Indexer) loop(ctx, wctx context.Context) error {
	bo := ix.newBackoff()
	ready, moved := false, 0
	for {
		var (
			idle bool
			err  error
		)
		if !ready {
			err = ix.prepare(ctx, slog.LevelInfo)
			ready = err == nil
		}
		if ready {
			idle, err = ix.step(ctx, wctx)
		}
		if !errors.Is(err, ErrChainMoved) {
			moved = 0
		}
		switch {
		case err == nil:
			bo.reset()
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case fatal(err):
			ix.log.ErrorContext(ctx, "indexer: stopped", slog.Any("error", err))
			return err
		case errors.Is(err, ErrChainMoved):
			// Poll again at once, unless the node keeps changing its
			// answers (a load balancer over nodes that disagree): then
			// back off like after a failure.
			moved++
			ix.log.DebugContext(ctx, "indexer: chain moved while reading; polling again", slog.Int("times", moved))
			if moved > 2 && !sleep(ctx, bo.next()) {
				return context.Cause(ctx)
			}
			continue
		default:
			kind := "upstream"
			var se *storeError
			if errors.As(err, &se) {
				kind = "store"
			}
			// A failed commit may or may not have landed: reload the
			// cursor before writing again. After a node failure (a
			// reconnect, perhaps to another node) check its chain again.
			ready = false
			d := bo.next()
			ix.m.errors.WithLabelValues(kind).Inc()
			ix.log.WarnContext(ctx, "indexer: retrying after a failure", slog.String("kind", kind),
				slog.Any("error", err), slog.Duration("retry_in", d))
			if !sleep(ctx, d) {
				return context.Cause(ctx)
			}
			continue
		}
		if idle && !sleep(ctx, ix.cfg.PollInterval) {
			return context.Cause(ctx)
		}
	}
}

// prepare checks the node and loads the cursor; it logs where indexing
// starts at level (Sync, called per block, says it at debug level).
func (ix *Indexer) prepare(ctx context.Context, level slog.Level) error {
	rctx, cancel := context.WithTimeout(ctx, ix.cfg.RPCTimeout)
	id, err := ix.src.ChainID(rctx)
	cancel()
	if err != nil {
		return err
	}
	if ix.cfg.ChainID != 0 && id != ix.cfg.ChainID {
		return fmt.Errorf("%w: the node reports chain id %d, the indexer is configured for %d",
			ErrWrongChain, id, ix.cfg.ChainID)
	}
	// At every start and after every failure (a reconnect), the node must
	// serve the chain the database holds.
	status, err := ix.id.Check(ctx)
	if err != nil && !errors.Is(err, store.ErrNodeBehind) {
		return err
	} else if err != nil {
		ix.log.WarnContext(ctx, "indexer: the node is far behind the indexed chain; waiting for it", slog.Any("error", err))
	}
	ix.first = max(ix.cfg.StartBlock, status.GenesisNumber)
	sctx, cancel := context.WithTimeout(ctx, ix.cfg.StoreTimeout)
	defer cancel()
	cur, err := ix.st.GetCursor(sctx, store.CursorIndexer)
	switch {
	case err == nil:
		ix.cur, ix.hasCur = cur, true
	case errors.Is(err, store.ErrNotFound):
		// Blocks without a cursor (written by hand, or the cursor row was
		// deleted): continue after the highest one.
		b, err := ix.st.LatestBlock(sctx)
		switch {
		case err == nil:
			ix.cur = store.Cursor{Name: store.CursorIndexer, BlockNumber: b.Number, BlockHash: b.Hash}
			ix.hasCur = true
			ix.log.WarnContext(ctx, "indexer: no cursor; continuing after the latest indexed block",
				slog.Uint64("block", b.Number))
		case errors.Is(err, store.ErrNotFound):
			ix.hasCur = false
		default:
			return &storeError{err}
		}
	default:
		return &storeError{err}
	}
	if ix.fin != nil {
		n, ok, err := ix.st.FinalizedBlock(sctx)
		if err != nil {
			return &storeError{err}
		}
		ix.finalized, ix.hasFinalized = n, ok
		if ok {
			ix.m.finalized.Set(float64(n))
		}
	}
	attrs := []any{slog.Uint64("chain_id", id)}
	if ix.fin != nil {
		attrs = append(attrs, slog.String("finality", store.FinalityTag))
		if ix.hasFinalized {
			attrs = append(attrs, slog.Uint64("finalized_block", ix.finalized))
		}
	}
	switch {
	case ix.hasCur:
		attrs = append(attrs, slog.String("start", "cursor"), slog.Uint64("block", ix.cur.BlockNumber))
	case ix.cfg.Backfill:
		attrs = append(attrs, slog.String("start", "backfill"), slog.Uint64("block", ix.first))
	default:
		attrs = append(attrs, slog.String("start", "head"))
	}
	ix.log.Log(ctx, level, "indexer: running", attrs...)
	return nil
}

// step polls the head once and indexes what is new. idle reports that
// nothing was left to do (wait PollInterval before the next step).
func (ix *Indexer) step(ctx, wctx context.Context) (idle bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, ix.cfg.RPCTimeout)
	head, err := ix.src.BlockNumber(rctx)
	cancel()
	if err != nil {
		return false, err
	}
	var next uint64
	switch {
	case ix.hasCur:
		next = ix.cur.BlockNumber + 1
		ix.m.setPosition(head, ix.cur.BlockNumber)
	case ix.cfg.Backfill:
		next = ix.first
		ix.m.setPosition(head, 0)
	default:
		// No cursor and no backfill: the first block indexed is the
		// node's head at this poll.
		next = head
		ix.m.head.Set(float64(head))
	}
	ix.noteBehind(ctx, head)
	if head < next {
		ix.caughtUp(ctx)
		if err := ix.checkTip(ctx, wctx, head); err != nil {
			return true, err
		}
		return true, ix.recordFinalized(ctx, wctx)
	}
	switch {
	case ix.prog != nil:
		ix.prog.head = head
	case head-next+1 > uint64(ix.cfg.BatchSize):
		ix.prog = newProgress(ix.cfg.Now(), next, head)
		ix.log.InfoContext(ctx, "indexer: catching up", slog.Uint64("from", next),
			slog.Uint64("head", head), slog.Uint64("blocks", head-next+1))
	}
	progressed, err := ix.catchUp(ctx, wctx, next, head)
	if errors.Is(err, errReorg) {
		return false, ix.reorg(ctx, wctx, head)
	}
	if err != nil {
		return false, err
	}
	if err := ix.recordFinalized(ctx, wctx); err != nil {
		return false, err
	}
	// A node that reports a head it cannot serve yet: wait.
	return !progressed, nil
}

// noteBehind warns at once when the node's head falls below the indexed
// head (a lagging node behind a load balancer, a resync, or a reset chain),
// and exports by how much: the lag gauge cannot show it (it is 0 then).
func (ix *Indexer) noteBehind(ctx context.Context, head uint64) {
	if !ix.hasCur || head >= ix.cur.BlockNumber {
		if ix.behind {
			ix.behind = false
			ix.log.InfoContext(ctx, "indexer: the node caught up with the indexed head", slog.Uint64("node_head", head))
		}
		ix.m.nodeBehind.Set(0)
		return
	}
	by := ix.cur.BlockNumber - head
	if !ix.behind {
		ix.behind = true
		ix.log.WarnContext(ctx, "indexer: the node's head is below the indexed head; waiting (a lagging, resyncing or reset node)",
			slog.Uint64("node_head", head), slog.Uint64("indexed_head", ix.cur.BlockNumber),
			slog.Uint64("behind_blocks", by), slog.Int("max_reorg_depth", ix.cfg.MaxReorgDepth))
	}
	// The gauge last: whoever sees it has the warning already written.
	ix.m.nodeBehind.Set(float64(by))
}

// checkTip runs when the node has nothing beyond the indexed head: it
// compares the node's block at its head with the stored one (a reorg at
// the same height, or to a shorter chain, shows up only this way) and
// refreshes the cursor's heartbeat.
func (ix *Indexer) checkTip(ctx, wctx context.Context, head uint64) error {
	if !ix.hasCur {
		return nil
	}
	stored, ok := ix.cur.BlockHash, true
	if head < ix.cur.BlockNumber {
		// A node below the index may be lagging, resyncing, or reset:
		// the checkpoints tell as soon as it has a block that differs.
		if _, err := ix.id.Check(ctx); err != nil && !errors.Is(err, store.ErrNodeBehind) {
			return err
		}
		sctx, cancel := context.WithTimeout(ctx, ix.cfg.StoreTimeout)
		hashes, err := ix.st.ListBlockHashes(sctx, head, head)
		cancel()
		if err != nil {
			return &storeError{err}
		}
		stored, ok = hashes[head]
	}
	if ok {
		rctx, cancel := context.WithTimeout(ctx, ix.cfg.RPCTimeout)
		bs, err := ix.src.Blocks(rctx, head, 1, false)
		cancel()
		if err != nil {
			return err
		}
		if len(bs) == 1 && bs[0].Hash != stored {
			return ix.reorg(ctx, wctx, head)
		}
	}
	now := ix.cfg.Now()
	if now.Sub(ix.cur.UpdatedAt) < ix.cfg.HeartbeatInterval {
		return nil
	}
	c := ix.cur
	c.UpdatedAt = now
	if err := ix.write(wctx, func(tx store.Tx) error { return tx.SetCursor(wctx, c) }); err != nil {
		return err
	}
	ix.cur = c
	return nil
}

// write runs fn in one database transaction bounded by StoreTimeout.
func (ix *Indexer) write(wctx context.Context, fn func(tx store.Tx) error) error {
	ctx, cancel := context.WithTimeout(wctx, ix.cfg.StoreTimeout)
	defer cancel()
	if err := ix.st.InTx(ctx, fn); err != nil {
		return &storeError{err}
	}
	return nil
}

// apply writes fetched blocks, which must follow the indexed head, with
// the cursor in one transaction. It returns errReorg when the first block
// does not build on the indexed head, and ErrChainMoved (after writing the
// linked prefix) when the batch itself does not link up.
func (ix *Indexer) apply(wctx context.Context, blocks []Block) error {
	if len(blocks) == 0 {
		return nil
	}
	if ix.hasCur {
		if blocks[0].Number != ix.cur.BlockNumber+1 {
			return fmt.Errorf("indexer: got block %d after %d", blocks[0].Number, ix.cur.BlockNumber)
		}
		if blocks[0].ParentHash != ix.cur.BlockHash {
			return errReorg
		}
	}
	n, moved := len(blocks), false
	ntx, ntr := len(blocks[0].Txs), len(blocks[0].Transfers)
	for i := 1; i < len(blocks); i++ {
		if blocks[i].ParentHash != blocks[i-1].Hash || blocks[i].Number != blocks[i-1].Number+1 {
			n, moved = i, true
			break
		}
		ntx += len(blocks[i].Txs)
		ntr += len(blocks[i].Transfers)
	}
	now := ix.cfg.Now()
	hdrs := make([]store.Block, n)
	txs := make([]store.Transaction, 0, ntx)
	transfers := make([]store.TokenTransfer, 0, ntr)
	for i := range n {
		hdrs[i] = blocks[i].Block
		hdrs[i].IndexedAt = now
		txs = append(txs, blocks[i].Txs...)
		transfers = append(transfers, blocks[i].Transfers...)
	}
	last := hdrs[n-1]
	c := store.Cursor{Name: store.CursorIndexer, BlockNumber: last.Number, BlockHash: last.Hash, UpdatedAt: now}
	cps := ix.checkpoints(hdrs, now)
	keep := 2 * uint64(ix.cfg.MaxReorgDepth)
	err := ix.write(wctx, func(tx store.Tx) error {
		if err := tx.InsertBlocks(wctx, hdrs, txs); err != nil {
			return err
		}
		if err := tx.InsertTokenTransfers(wctx, transfers); err != nil {
			return err
		}
		if err := tx.SaveCheckpoints(wctx, cps); err != nil {
			return err
		}
		if last.Number > keep {
			if _, err := tx.PruneCheckpoints(wctx, last.Number-keep); err != nil {
				return err
			}
		}
		return tx.SetCursor(wctx, c)
	})
	if err != nil {
		return err
	}
	ix.cur, ix.hasCur = c, true
	ix.m.indexed.Set(float64(c.BlockNumber))
	ix.m.blocks.Add(float64(n))
	ix.m.txs.Add(float64(len(txs)))
	ix.m.transfers.Add(float64(len(transfers)))
	if ix.prog != nil {
		ix.prog.add(n, len(txs))
	}
	if moved {
		return ErrChainMoved
	}
	return nil
}

// checkpoints returns the checkpoints a batch adds: its last block (the
// recent ones are pruned 2×MaxReorgDepth below the tip), the very first
// block indexed, and the permanent heights (block 1, powers of two).
func (ix *Indexer) checkpoints(hdrs []store.Block, now time.Time) []store.Checkpoint {
	var cps []store.Checkpoint
	for i, b := range hdrs {
		first := i == 0 && !ix.hasCur
		perm := first || permanentCheckpoint(b.Number)
		if perm || i == len(hdrs)-1 {
			cps = append(cps, store.Checkpoint{BlockNumber: b.Number, BlockHash: b.Hash, Permanent: perm, RecordedAt: now})
		}
	}
	return cps
}

// storeError marks a database failure (for the retry policy and metrics).
type storeError struct{ err error }

func (e *storeError) Error() string { return "store: " + e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

// backoff is capped exponential backoff with jitter: each wait is between
// half and all of min·2^k, capped at max.
type backoff struct {
	min, max, cur time.Duration
}

func (ix *Indexer) newBackoff() *backoff {
	return &backoff{min: ix.cfg.RetryMin, max: ix.cfg.RetryMax}
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(b.cur*2, b.max)
	}
	half := b.cur / 2
	return half + rand.N(b.cur-half+1)
}

func (b *backoff) reset() { b.cur = 0 }

// sleep waits d, or returns false when ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
