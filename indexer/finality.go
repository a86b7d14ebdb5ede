package indexer

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/evmpay/evmpay/store"
)

// Finality "tag" (Config.Finality, docs/chains.md): the indexer is the one
// component that reads the node's finalized block, and it records only
// what it verified against the indexed chain. Invoice, settlement and
// sweep read the record (store.FinalityStore), never the node's tag.

// recordFinalized runs after a step that left the index at some head,
// under finality "tag": it reads the node's finalized block and records
// its number when that is above the recorded one, at or below the indexed
// head, and the indexed block at that number has the node's hash.
// Otherwise it records nothing this time: a finalized block not indexed
// yet, or one whose hash differs from the indexed block's (the node's
// chain and the index disagree: the next steps follow the node or stop),
// is looked at again after the next step.
//
// A node that fails to report a finalized block does not stop indexing:
// nothing more becomes final until it reports one again (warned once,
// counted in indexer_errors_total{kind="finalized"}). Only a database
// failure is returned.
func (ix *Indexer) recordFinalized(ctx, wctx context.Context) error {
	if ix.fin == nil || !ix.hasCur {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, ix.cfg.RPCTimeout)
	n, hash, err := ix.fin.Finalized(rctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		ix.m.errors.WithLabelValues("finalized").Inc()
		if !ix.finFailing {
			ix.finFailing = true
			ix.log.WarnContext(ctx, "indexer: cannot read the node's finalized block; nothing more becomes final until it reports one",
				slog.Any("error", err))
		} else {
			ix.log.DebugContext(ctx, "indexer: still cannot read the node's finalized block", slog.Any("error", err))
		}
		return nil
	}
	if ix.finFailing {
		ix.finFailing = false
		ix.log.InfoContext(ctx, "indexer: the node reports its finalized block again", slog.Uint64("node_finalized", n))
	}
	switch {
	case ix.hasFinalized && n <= ix.finalized:
		if n < ix.finalized {
			ix.log.DebugContext(ctx, "indexer: the node's finalized block is below the recorded one; keeping the record",
				slog.Uint64("node_finalized", n), slog.Uint64("finalized_block", ix.finalized))
		}
		return nil
	case n > ix.cur.BlockNumber:
		ix.log.DebugContext(ctx, "indexer: the node's finalized block is not indexed yet; recorded nothing",
			slog.Uint64("node_finalized", n), slog.Uint64("indexed_head", ix.cur.BlockNumber))
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, ix.cfg.StoreTimeout)
	hashes, err := ix.st.ListBlockHashes(sctx, n, n)
	cancel()
	if err != nil {
		return &storeError{err}
	}
	stored, ok := hashes[n]
	if !ok && n == ix.cur.BlockNumber {
		stored, ok = ix.cur.BlockHash, true
	}
	switch {
	case !ok:
		ix.log.DebugContext(ctx, "indexer: the node's finalized block is below the first indexed block; recorded nothing",
			slog.Uint64("node_finalized", n))
		return nil
	case stored != hash:
		ix.log.DebugContext(ctx, "indexer: the node's finalized block differs from the indexed block at its height; recorded nothing",
			slog.Uint64("node_finalized", n), slog.String("node_hash", hash.Hex()), slog.String("indexed_hash", stored.Hex()))
		return nil
	}
	if err := ix.write(wctx, func(tx store.Tx) error { return tx.SetFinalizedBlock(wctx, n) }); err != nil {
		return err
	}
	ix.finalized, ix.hasFinalized = n, true
	ix.m.finalized.Set(float64(n))
	ix.log.DebugContext(ctx, "indexer: recorded the finalized block", slog.Uint64("finalized_block", n),
		slog.String("hash", hash.Hex()))
	return nil
}

// refuseFinalizedReorg, under finality "tag", refuses a reorg whose common
// ancestor is below the recorded finalized block: it would delete a block
// recorded as final, which payments were confirmed, swept and refunded on.
// That is the same halt as a reorg deeper than MaxReorgDepth (an error
// wrapping store.ErrReorgTooDeep: Run stops, an operator decides). The
// record is read again from the database, not from the indexer's memory.
func (ix *Indexer) refuseFinalizedReorg(ctx context.Context, ancestor, tip, head uint64) error {
	if ix.fin == nil {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, ix.cfg.StoreTimeout)
	fin, ok, err := ix.st.FinalizedBlock(sctx)
	cancel()
	if err != nil {
		return &storeError{err}
	}
	if !ok || ancestor >= fin {
		return nil
	}
	return fmt.Errorf("%w: the chain reorganised a finalized block: the node's chain (head %d) leaves the indexed one (head %d) "+
		"after block %d, but block %d was recorded as finalized (finality %q); a finalized block is never reverted on a sound "+
		"chain and node: check the node (docs/chains.md, \"Finality\")",
		store.ErrReorgTooDeep, head, tip, ancestor, fin, store.FinalityTag)
}
