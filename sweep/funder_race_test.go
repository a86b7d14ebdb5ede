package sweep

import (
	"context"
	"math/big"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

// lateOriginal is the real node with one sender's first transaction held
// back: its broadcasts are answered "accepted" without reaching the node,
// so the sweeper sees it stuck and replaces it. When the replacement is
// broadcast, the original reaches the node first and is mined, and the
// replacement comes back "nonce too low" — what a top-up on a chain behind
// a node pool once did (docs/chains.md).
type lateOriginal struct {
	Chain
	commit   func()
	from     common.Address
	original atomic.Pointer[types.Transaction]
	raced    atomic.Bool
}

func (c *lateOriginal) SendTransaction(ctx context.Context, tx *types.Transaction) error {
	if !sentBy(c.from)(tx) {
		return c.Chain.SendTransaction(ctx, tx)
	}
	c.original.CompareAndSwap(nil, tx)
	orig := c.original.Load()
	if tx.Hash() == orig.Hash() && !c.raced.Load() {
		return nil
	}
	if c.raced.CompareAndSwap(false, true) {
		if err := c.Chain.SendTransaction(ctx, orig); err != nil {
			return err
		}
		c.commit()
	}
	return c.Chain.SendTransaction(ctx, tx)
}

// A top-up replaced for being stuck, whose original is then mined before
// the replacement: the original is recorded MINED and the replacement
// REPLACED, the ledger holds the top-up, and the wallets reconcile to the
// wei. (The slot used to hold the replacement alone, which then looked
// like a nonce used by someone else: both were marked FAILED and the
// ledger lacked the mined top-up.)
func TestSweep_TopUpReplaced_OriginalMinedFirst_RecordedAndReconciles(t *testing.T) {
	t.Parallel()
	e, _, first := raceTopUp(t)
	txs, err := e.st.ListSweepTxsByNonce(ctx, e.funder(), store.SweepTxTopUp, first.Nonce())
	require.NoError(t, err)
	require.Len(t, txs, 2, "the original and its replacement")
	require.Equal(t, first.Hash(), txs[0].TxHash)
	require.Equal(t, store.SweepTxMined, txs[0].Status, "the original, as the chain says")
	require.Equal(t, store.SweepTxReplaced, txs[1].Status)
	requireBumped(t, txs[0], txs[1])

	unmined, err := e.st.ListUnminedSweepTxs(ctx, e.funder())
	require.NoError(t, err)
	require.Empty(t, unmined, "no second top-up: the first one arrived")
	require.Equal(t, 0, e.balance(e.sweepWallet()).Cmp(first.Value()))
	e.reconcile()
}

// raceTopUp runs the race above to its end: a top-up held back, replaced,
// its original mined first; it returns the original.
func raceTopUp(t *testing.T) (*env, *Sweeper, *types.Transaction) {
	t.Helper()
	e := newEnv(t, sweepWalletBalance(new(big.Int)))
	chain := &lateOriginal{Chain: e.client, commit: func() { e.sim.Commit() }, from: e.funder()}
	s := e.sweeperOn(chain, Config{Confirmations: 1, ReplaceAfterBlocks: 2})

	next := func() {
		e.sim.Commit()
		e.index()
		require.NoError(t, s.RunOnce(ctx))
	}
	e.index()
	require.NoError(t, s.RunOnce(ctx)) // the wallet is empty: a top-up, held back
	first := chain.original.Load()
	require.NotNil(t, first, "the funder sent a top-up")
	for i := 0; i < 10 && !chain.raced.Load(); i++ {
		next()
	}
	require.True(t, chain.raced.Load(), "the stuck top-up was replaced")
	_, err := e.client.TransactionReceipt(ctx, first.Hash())
	require.NoError(t, err, "the original is mined")
	for range 4 {
		next()
	}
	return e, s, first
}

// A database that ran a release before the fix above holds the race's
// top-up as it left it: the original and its replacement FAILED, the
// ledger without the top-up, the wallets not reconciling. A sweeper of
// this release looks again once: the original, whose receipt the node
// has, is recorded MINED with its ledger entries, the replacement stays
// FAILED, and the wallets reconcile to the wei; a second pass changes
// nothing.
func TestSweep_TopUpFailedByAnEarlierRelease_MinedOriginalRecordedAtStart(t *testing.T) {
	t.Parallel()
	e, _, first := raceTopUp(t)
	txs, err := e.st.ListSweepTxsByNonce(ctx, e.funder(), store.SweepTxTopUp, first.Nonce())
	require.NoError(t, err)
	require.Len(t, txs, 2)
	// What the earlier release recorded.
	require.NoError(t, e.st.InTx(ctx, func(tx store.Tx) error {
		if _, err := tx.ReverseLedgerEntries(ctx, txs[0].ID, e.clock.Now()); err != nil {
			return err
		}
		for _, t := range txs {
			t.Status, t.BlockNumber, t.GasUsed, t.FeeWei, t.MinedAt = store.SweepTxFailed, nil, nil, nil, nil
			t.LastError = "nonce used by another transaction"
			if err := tx.UpdateSweepTx(ctx, t); err != nil {
				return err
			}
		}
		return nil
	}))
	r, err := NewReconciler(e.st, e.client, ReconcileConfig{})
	require.NoError(t, err)
	rec, err := r.Reconcile(ctx, 0)
	require.NoError(t, err)
	require.False(t, rec.OK, "the ledger lacks the mined top-up")

	s := e.sweeperOn(e.client, Config{Confirmations: 1, ReplaceAfterBlocks: 2})
	for range 2 {
		e.sim.Commit()
		e.index()
		require.NoError(t, s.RunOnce(ctx))
		txs, err = e.st.ListSweepTxsByNonce(ctx, e.funder(), store.SweepTxTopUp, first.Nonce())
		require.NoError(t, err)
		require.Equal(t, first.Hash(), txs[0].TxHash)
		require.Equal(t, store.SweepTxMined, txs[0].Status, "the original, as the chain says")
		require.NotNil(t, txs[0].FeeWei)
		require.Equal(t, store.SweepTxFailed, txs[1].Status, "never mined")
		e.reconcile()
	}
	failed, err := e.st.ListFailedSweepTxs(ctx, e.funder(), store.SweepTxTopUp)
	require.NoError(t, err)
	require.Len(t, failed, 1)
}
