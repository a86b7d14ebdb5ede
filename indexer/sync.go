package indexer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/evmpay/evmpay/store"
)

// fetchAttempts is how many consecutive failures fetching one batch are
// retried inside the pipeline before the whole step fails (and the loop's
// backoff takes over).
const fetchAttempts = 4

// catchUp indexes blocks from..to: Concurrency workers fetch batches of
// BatchSize blocks while one writer stores them in order, each batch with
// the cursor in one database transaction. It stops early, without error,
// when the node returns fewer blocks than asked (it does not have them
// yet); progressed reports whether anything was written.
func (ix *Indexer) catchUp(ctx, wctx context.Context, from, to uint64) (progressed bool, err error) {
	type result struct {
		blocks []Block
		want   int
		err    error
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()

	size := uint64(ix.cfg.BatchSize)
	workers := ix.cfg.Concurrency
	if n := (to-from)/size + 1; n < uint64(workers) {
		workers = int(n)
	}
	// futures carries each batch's result slot in block order; sem bounds
	// the fetches in flight. At most 2×workers batches are held in memory.
	futures := make(chan chan result, workers)
	sem := make(chan struct{}, workers)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(futures)
		for start := from; start <= to; start += size {
			want := int(min(size, to-start+1))
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			f := make(chan result, 1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				blocks, err := ix.fetch(ctx, start, want)
				<-sem
				f <- result{blocks, want, err}
			}()
			select {
			case futures <- f:
			case <-ctx.Done():
				return
			}
			if start > to-size { // the next start would pass to (or overflow)
				return
			}
		}
	}()

	for f := range futures {
		var r result
		select {
		case r = <-f:
		case <-ctx.Done():
			return progressed, ctx.Err()
		}
		if r.err != nil {
			return progressed, r.err
		}
		if err := ix.apply(wctx, r.blocks); err != nil {
			return progressed, err
		}
		if len(r.blocks) > 0 {
			progressed = true
			ix.logProgress(ctx)
		}
		if len(r.blocks) < r.want {
			return progressed, nil
		}
	}
	return progressed, ctx.Err()
}

// fetch gets count blocks from `from` with their transactions, asking
// again for what a batch left out and retrying failures a few times. It
// returns fewer blocks only when the node does not have the next one.
func (ix *Indexer) fetch(ctx context.Context, from uint64, count int) ([]Block, error) {
	var out []Block
	bo := ix.newBackoff()
	failures := 0
	for len(out) < count {
		rctx, cancel := context.WithTimeout(ctx, ix.cfg.RPCTimeout)
		bs, err := ix.src.Blocks(rctx, from+uint64(len(out)), count-len(out), true)
		cancel()
		if err != nil {
			failures++
			if failures >= fetchAttempts || ctx.Err() != nil {
				return nil, err
			}
			ix.m.errors.WithLabelValues("upstream").Inc()
			ix.log.DebugContext(ctx, "indexer: fetching blocks failed; retrying",
				slog.Uint64("from", from+uint64(len(out))), slog.Any("error", err))
			if !sleep(ctx, bo.next()) {
				return nil, ctx.Err()
			}
			continue
		}
		if len(bs) == 0 {
			break
		}
		failures = 0
		bo.reset()
		out = append(out, bs...)
	}
	if len(ix.cfg.Tokens) == 0 || len(out) == 0 {
		return out, nil
	}
	return out, ix.fetchTransfers(ctx, out)
}

// fetchTransfers adds to each block its Transfer logs of the configured
// tokens, retrying failures a few times like fetch.
func (ix *Indexer) fetchTransfers(ctx context.Context, blocks []Block) error {
	hdrs := make([]store.Block, len(blocks))
	for i := range blocks {
		hdrs[i] = blocks[i].Block
	}
	bo := ix.newBackoff()
	for failures := 1; ; failures++ {
		logs, err := ix.transferLogs(ctx, hdrs)
		if err == nil {
			for i := range blocks {
				blocks[i].Transfers = logs[i]
			}
			return nil
		}
		if failures >= fetchAttempts || ctx.Err() != nil || errors.Is(err, ErrChainMoved) {
			return err
		}
		ix.m.errors.WithLabelValues("upstream").Inc()
		ix.log.DebugContext(ctx, "indexer: fetching transfer logs failed; retrying",
			slog.Uint64("from", blocks[0].Number), slog.Any("error", err))
		if !sleep(ctx, bo.next()) {
			return ctx.Err()
		}
	}
}

// transferLogs fetches the Transfer logs of blocks in batches of at most
// logBatch blocks. A batch of several blocks that fails as a whole is
// halved, for this call and the ones after it, and tried again: a node caps
// the size of a batch's response (geth at 25 MB), which a batch of
// log-heavy blocks can pass. Other failures end the call (fetchTransfers
// retries).
func (ix *Indexer) transferLogs(ctx context.Context, blocks []store.Block) ([][]store.TokenTransfer, error) {
	out := make([][]store.TokenTransfer, 0, len(blocks))
	for len(blocks) > 0 {
		n := min(len(blocks), int(ix.logBatch.Load()))
		rctx, cancel := context.WithTimeout(ctx, ix.cfg.RPCTimeout)
		logs, err := ix.src.TransferLogs(rctx, blocks[:n], ix.cfg.Tokens)
		cancel()
		if err == nil && len(logs) != n {
			err = fmt.Errorf("indexer: transfer logs for %d of %d blocks", len(logs), n)
		}
		if err != nil {
			if n == 1 || errors.Is(err, ErrChainMoved) || ctx.Err() != nil {
				return nil, err
			}
			ix.logBatch.CompareAndSwap(ix.logBatch.Load(), int64(n/2))
			ix.log.DebugContext(ctx, "indexer: transfer log batch failed; halving it",
				slog.Uint64("from", blocks[0].Number), slog.Int("blocks", n), slog.Any("error", err))
			continue
		}
		out = append(out, logs...)
		blocks = blocks[n:]
	}
	return out, nil
}

// progress measures a catch-up for the log and the metrics.
type progress struct {
	start     time.Time
	from      uint64
	head      uint64
	blocks    uint64
	txs       uint64
	lastLog   time.Time
	lastBlock uint64
	lastTxs   uint64
}

func newProgress(now time.Time, from, head uint64) *progress {
	return &progress{start: now, from: from, head: head, lastLog: now}
}

func (p *progress) add(blocks, txs int) {
	p.blocks += uint64(blocks)
	p.txs += uint64(txs)
}

// logProgress logs blocks/s, transactions/s and the ETA every
// ProgressInterval while catching up.
func (ix *Indexer) logProgress(ctx context.Context) {
	p := ix.prog
	if p == nil {
		return
	}
	now := ix.cfg.Now()
	since := now.Sub(p.lastLog)
	if since < ix.cfg.ProgressInterval {
		return
	}
	rate := perSecond(p.blocks-p.lastBlock, since)
	txRate := perSecond(p.txs-p.lastTxs, since)
	ix.m.backfillRate.Set(rate)
	attrs := []any{
		slog.Uint64("block", ix.cur.BlockNumber),
		slog.Uint64("head", p.head),
		slog.String("blocks_per_second", fmt.Sprintf("%.0f", rate)),
		slog.String("transactions_per_second", fmt.Sprintf("%.0f", txRate)),
	}
	if avg := perSecond(p.blocks, now.Sub(p.start)); avg > 0 && p.head > ix.cur.BlockNumber {
		eta := time.Duration(float64(p.head-ix.cur.BlockNumber) / avg * float64(time.Second))
		attrs = append(attrs, slog.Duration("eta", eta.Round(time.Second)))
	}
	ix.log.InfoContext(ctx, "indexer: catching up", attrs...)
	p.lastLog, p.lastBlock, p.lastTxs = now, p.blocks, p.txs
}

// caughtUp ends a catch-up: one summary line, and the rate gauge back to 0.
func (ix *Indexer) caughtUp(ctx context.Context) {
	p := ix.prog
	if p == nil {
		return
	}
	ix.prog = nil
	elapsed := ix.cfg.Now().Sub(p.start)
	ix.m.backfillRate.Set(0)
	ix.log.InfoContext(ctx, "indexer: caught up; following the head",
		slog.Uint64("block", ix.cur.BlockNumber),
		slog.Uint64("blocks", p.blocks),
		slog.Uint64("transactions", p.txs),
		slog.Duration("elapsed", elapsed.Round(time.Millisecond)),
		slog.String("blocks_per_second", fmt.Sprintf("%.0f", perSecond(p.blocks, elapsed))),
		slog.String("transactions_per_second", fmt.Sprintf("%.0f", perSecond(p.txs, elapsed))))
}

func perSecond(n uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// reorg handles a node whose chain no longer contains the indexed head:
// it finds the highest indexed block the node still has (the common
// ancestor), at most MaxReorgDepth below the indexed head (and, under
// finality "tag", at or above the recorded finalized block), then deletes
// the orphaned blocks and their transactions, records the reorg and moves
// the cursor back to the ancestor, in one database transaction. Indexing
// continues from there on the node's chain.
func (ix *Indexer) reorg(ctx, wctx context.Context, head uint64) error {
	tip := ix.cur.BlockNumber
	top := min(tip, head)
	lo := tip - min(tip, uint64(ix.cfg.MaxReorgDepth))
	if top < lo {
		return ix.tooDeep(ctx, fmt.Errorf("%w: the node's head %d differs from the indexed chain and is below indexed block %d by more than MaxReorgDepth %d",
			store.ErrReorgTooDeep, head, tip, ix.cfg.MaxReorgDepth))
	}
	want := int(top - lo + 1)
	rctx, cancel := context.WithTimeout(ctx, ix.cfg.RPCTimeout)
	nodes, err := ix.src.Blocks(rctx, lo, want, false)
	cancel()
	if err != nil {
		return err
	}
	if len(nodes) < want {
		return fmt.Errorf("indexer: reorg check: the node returned %d of blocks %d..%d", len(nodes), lo, top)
	}
	sctx, cancel := context.WithTimeout(ctx, ix.cfg.StoreTimeout)
	stored, err := ix.st.ListBlockHashes(sctx, lo, tip)
	cancel()
	if err != nil {
		return &storeError{err}
	}
	if _, ok := stored[tip]; !ok {
		// The cursor can rest on a block below the first indexed one
		// (after a reorg that reached below it): its hash is known.
		stored[tip] = ix.cur.BlockHash
	}
	ancestor, found := uint64(0), false
	for n := top; ; n-- {
		s, ok := stored[n]
		// A height below the first indexed block cannot be compared:
		// treat it as the ancestor.
		if !ok || s == nodes[n-lo].Hash {
			ancestor, found = n, true
			break
		}
		if n == lo {
			break
		}
	}
	if !found {
		return ix.tooDeep(ctx, fmt.Errorf("%w: none of indexed blocks %d..%d is on the node's chain (indexed head %d %s, MaxReorgDepth %d)",
			store.ErrReorgTooDeep, lo, top, tip, ix.cur.BlockHash, ix.cfg.MaxReorgDepth))
	}
	depth := tip - ancestor
	if depth == 0 {
		return ErrChainMoved
	}
	if ancestor == 0 {
		return fmt.Errorf("%w: every indexed block from block 1 to %d differs on the node: a reorg back to genesis "+
			"is a reset or replaced chain, not a reorg; %s", ErrChainChanged, tip, whatToDo)
	}
	// Before rewriting anything, the node must still serve the recorded
	// chain below the fork (the indexed blocks above the ancestor may be
	// all that was compared here).
	if _, err := ix.id.Check(ctx); err != nil && !errors.Is(err, store.ErrNodeBehind) {
		return err
	}
	// Under finality "tag" a recorded finalized block is never deleted.
	if err := ix.refuseFinalizedReorg(ctx, ancestor, tip, head); err != nil {
		return err
	}
	r := store.Reorg{ForkBlock: ancestor + 1, Depth: int(depth), DetectedAt: ix.cfg.Now()}
	for n := ancestor + 1; n <= tip; n++ {
		if h, ok := stored[n]; ok {
			r.OldHashes = append(r.OldHashes, h)
		}
	}
	for n := ancestor + 1; n <= top; n++ {
		r.NewHashes = append(r.NewHashes, nodes[n-lo].Hash)
	}
	ancestorHash, ok := stored[ancestor]
	if !ok {
		ancestorHash = nodes[ancestor-lo].Hash
	}
	c := store.Cursor{Name: store.CursorIndexer, BlockNumber: ancestor, BlockHash: ancestorHash, UpdatedAt: r.DetectedAt}
	err = ix.write(wctx, func(tx store.Tx) error {
		if _, err := tx.DeleteBlocksFrom(wctx, ancestor+1); err != nil {
			return err
		}
		if _, err := tx.DeleteCheckpointsFrom(wctx, ancestor+1); err != nil {
			return err
		}
		if err := tx.InsertReorg(wctx, &r); err != nil {
			return err
		}
		return tx.SetCursor(wctx, c)
	})
	if err != nil {
		return err
	}
	oldHead := ix.cur
	ix.cur = c
	ix.m.reorgs.Inc()
	ix.m.reorgDepth.Observe(float64(depth))
	ix.m.indexed.Set(float64(ancestor))
	ix.log.WarnContext(ctx, "indexer: chain reorganised; orphaned blocks removed",
		slog.Uint64("fork_block", r.ForkBlock), slog.Int("depth", r.Depth),
		slog.Uint64("old_head", oldHead.BlockNumber), slog.String("old_head_hash", oldHead.BlockHash.Hex()),
		slog.Uint64("node_head", head), slog.Int64("reorg_id", r.ID))
	return nil
}

// tooDeep returns err, a reorg too deep to take, unless the node serves
// another chain than the recorded one (another chain id or genesis): then
// the identity check's error, which says so. A node swapped for another
// chain while only its first blocks are indexed looks like a reorg of
// every one of them, and "another chain" is what stops only that chain in
// a host of several, and tells the operator what happened.
func (ix *Indexer) tooDeep(ctx context.Context, err error) error {
	if _, idErr := ix.id.Check(ctx); errors.Is(idErr, ErrChainChanged) || errors.Is(idErr, ErrWrongChain) {
		return idErr
	}
	return err
}
