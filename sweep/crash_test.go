package sweep

import (
	"context"
	"math/big"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

// crashingChain is the real node with a crash injected: on the first
// broadcast of a matching transaction it cancels the process's context —
// after the node got the transaction, or before — so that nothing more is
// written, as if the process died there.
type crashingChain struct {
	Chain
	cancel  context.CancelFunc
	before  bool
	match   func(*types.Transaction) bool
	crashed atomic.Bool
}

func (c *crashingChain) SendTransaction(ctx context.Context, tx *types.Transaction) error {
	if c.match(tx) && c.crashed.CompareAndSwap(false, true) {
		if !c.before {
			if err := c.Chain.SendTransaction(ctx, tx); err != nil {
				return err
			}
		}
		c.cancel()
		return context.Canceled
	}
	return c.Chain.SendTransaction(ctx, tx)
}

func sentBy(addr common.Address) func(*types.Transaction) bool {
	signer := types.LatestSignerForChainID(big.NewInt(1337))
	return func(tx *types.Transaction) bool {
		from, err := types.Sender(signer, tx)
		return err == nil && from == addr
	}
}

func TestSweep_CrashAfterBroadcast_EndsWithExactlyOneSweepTx(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.confirmedInvoices(1, eth(3))[0]
	crashCtx, crash := context.WithCancel(ctx)
	defer crash()
	cc := &crashingChain{Chain: e.client, cancel: crash, match: sentBy(inv.DepositAddress)}
	s1 := e.sweeperOn(cc, Config{Confirmations: 2})

	require.NoError(t, s1.RunOnce(crashCtx)) // funding
	e.sim.Commit()
	require.ErrorIs(t, s1.RunOnce(crashCtx), context.Canceled, "the process dies right after broadcasting the sweep")
	sweeps := e.sweepTxs(inv.ID, store.SweepTxSweep)
	require.Len(t, sweeps, 1)
	require.Equal(t, store.SweepTxSigned, sweeps[0].Status, "stored before broadcast; the crash came before it was marked sent")
	e.sim.Commit() // the node mines what it got

	// A new process. The dead one's lease holds the invoice for a while.
	s2 := e.sweeper(Config{Confirmations: 2})
	require.NoError(t, s2.RunOnce(ctx))
	require.Equal(t, store.SweepSent, e.invoice(inv.ID).SweepStatus)
	e.clock.Advance(2 * time.Minute)
	e.drive(5, e.all([]int64{inv.ID}, store.SweepSwept), s2)

	sweeps = e.sweepTxs(inv.ID, store.SweepTxSweep)
	require.Len(t, sweeps, 1, "exactly one sweep transaction, never a second signature")
	require.Equal(t, store.SweepTxMined, sweeps[0].Status)
	require.Len(t, e.sweepTxs(inv.ID, store.SweepTxFunding), 1)
	require.EqualValues(t, 1, e.nonce(inv.DepositAddress), "the deposit address sent one transaction")
	require.Equal(t, 0, e.balance(e.merchant.SettlementAddress).Cmp(eth(3)))
	require.Equal(t, store.StatusSettled, e.invoice(inv.ID).Status)
}

func TestSweep_CrashBeforeBroadcast_StoredFundingFillsTheNonceGap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	invs := e.confirmedInvoices(2, eth(1))
	a, b := invs[0], invs[1]
	walletNonce := e.nonce(e.sweepWallet())
	crashCtx, crash := context.WithCancel(ctx)
	defer crash()
	cc := &crashingChain{Chain: e.client, cancel: crash, before: true, match: sentBy(e.sweepWallet())}
	s1 := e.sweeperOn(cc, Config{Confirmations: 1, Workers: 1, BatchSize: 1})

	require.ErrorIs(t, s1.RunOnce(crashCtx), context.Canceled, "the process dies between storing and broadcasting A's funding")
	fa := e.sweepTxs(a.ID, store.SweepTxFunding)
	require.Len(t, fa, 1)
	require.Equal(t, walletNonce, fa[0].Nonce)
	require.Equal(t, store.SweepTxSigned, fa[0].Status)

	// Another process funds B with the next nonce while A is still leased
	// to the dead one. A's stored funding, the head of the line, is
	// broadcast so that B's is not stuck behind the gap.
	s2 := e.sweeper(Config{Confirmations: 1})
	require.NoError(t, s2.RunOnce(ctx))
	fb := e.sweepTxs(b.ID, store.SweepTxFunding)
	require.Len(t, fb, 1)
	require.Equal(t, walletNonce+1, fb[0].Nonce)
	e.sim.Commit()
	require.Equal(t, walletNonce+2, e.nonce(e.sweepWallet()), "both fundings mined in the next block")
	require.Equal(t, store.SweepFunding, e.invoice(a.ID).SweepStatus, "A is still leased")

	e.clock.Advance(2 * time.Minute)
	e.drive(6, e.all(ids(invs), store.SweepSwept), s2)
	for _, inv := range invs {
		fs := e.sweepTxs(inv.ID, store.SweepTxFunding)
		require.Len(t, fs, 1)
		require.Equal(t, store.SweepTxMined, fs[0].Status)
	}
	require.Equal(t, 0, e.balance(e.merchant.SettlementAddress).Cmp(eth(2)))
}

func TestSweep_NonceTooLow_RetriedAfterOneBlockWithANewNonce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.confirmedInvoices(1, eth(1))[0]
	stored := fundingNonceTaken(t, e, inv)

	s2 := e.sweeper(Config{Confirmations: 1})
	require.NoError(t, s2.RunOnce(ctx))
	got := e.invoice(inv.ID)
	require.Equal(t, store.SweepFunding, got.SweepStatus, "not failed on first sight: the receipt may lag")
	require.Equal(t, ReasonNonceTooLow, got.SweepError)
	require.Equal(t, 1, got.SweepAttempts)

	e.sim.Commit() // one block later the nonce is still someone else's: fund again
	require.NoError(t, s2.RunOnce(ctx))
	fs := e.sweepTxs(inv.ID, store.SweepTxFunding)
	require.Len(t, fs, 2)
	require.Equal(t, store.SweepTxFailed, fs[0].Status)
	require.Equal(t, ReasonNonceTooLow, fs[0].LastError)
	require.Equal(t, stored.Nonce+1, fs[1].Nonce)

	e.drive(5, e.all([]int64{inv.ID}, store.SweepSwept), s2)
	got = e.invoice(inv.ID)
	require.Empty(t, got.SweepError)
	require.Equal(t, store.StatusSettled, got.Status)
	require.Equal(t, 0, e.balance(e.merchant.SettlementAddress).Cmp(eth(1)))
}

func TestSweep_ReorgOfFundingTx_RebroadcastsTheStoredTx(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.confirmedInvoices(1, eth(5))[0]
	s := e.sweeper(Config{Confirmations: 3})

	require.NoError(t, s.RunOnce(ctx)) // funding signed and sent
	parent, err := e.client.HeaderByNumber(ctx, nil)
	require.NoError(t, err)
	e.sim.Commit() // funding mined
	fundingBlock := e.head()
	require.NoError(t, s.RunOnce(ctx)) // funding seen mined; sweep signed and sent
	funding := e.sweepTxs(inv.ID, store.SweepTxFunding)[0]
	require.Equal(t, store.SweepTxMined, funding.Status)
	require.Equal(t, fundingBlock, *funding.BlockNumber)
	sweep := e.sweepTxs(inv.ID, store.SweepTxSweep)[0]

	// Reorg: the funding's block is replaced by an empty one, and the node
	// forgets both transactions.
	e.sim.Rollback()
	require.NoError(t, e.sim.Fork(parent.Hash()))
	e.sim.Rollback() // drops the funding the node re-injected from the old branch
	e.sim.Commit()
	require.Equal(t, fundingBlock, e.head())
	_, err = e.client.TransactionReceipt(ctx, funding.TxHash)
	require.Error(t, err, "the funding is gone from the chain")

	e.drive(10, e.all([]int64{inv.ID}, store.SweepSwept), s)

	fundings := e.sweepTxs(inv.ID, store.SweepTxFunding)
	require.Len(t, fundings, 1, "the stored funding was re-broadcast, not signed again")
	require.Equal(t, funding.TxHash, fundings[0].TxHash)
	require.Greater(t, *fundings[0].BlockNumber, fundingBlock, "mined again on the new branch")
	sweeps := e.sweepTxs(inv.ID, store.SweepTxSweep)
	require.Len(t, sweeps, 1)
	require.Equal(t, sweep.TxHash, sweeps[0].TxHash)
	require.Equal(t, 0, e.balance(e.merchant.SettlementAddress).Cmp(eth(5)))
	require.Equal(t, 1.0, metricValue(t, s.m.reorged.WithLabelValues(store.SweepTxFunding)))
	require.Equal(t, store.StatusSettled, e.invoice(inv.ID).Status)
}

func TestSweep_ReplacementUnderpriced_BumpedThenRecoversWhenTheNonceIsTaken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.confirmedInvoices(1, eth(1))[0]
	stored := unsentFunding(t, e, inv)

	// Another transaction with the same nonce and a much higher fee sits in
	// the node's pool.
	self := e.sweepWallet()
	rival, err := types.SignNewTx(e.sweepKey, types.LatestSignerForChainID(big.NewInt(1337)), &types.DynamicFeeTx{
		ChainID: big.NewInt(1337), Nonce: stored.Nonce,
		GasTipCap: new(big.Int).Mul(stored.MaxPriorityFeeWei.Big(), big.NewInt(3)),
		GasFeeCap: new(big.Int).Mul(stored.MaxFeeWei.Big(), big.NewInt(3)), Gas: 21000, To: &self, Value: big.NewInt(0),
	})
	require.NoError(t, err)
	require.NoError(t, e.client.SendTransaction(ctx, rival))
	e.clock.Advance(2 * time.Minute)

	s2 := e.sweeper(Config{Confirmations: 1})
	require.NoError(t, s2.RunOnce(ctx))
	got := e.invoice(inv.ID)
	require.Equal(t, ReasonReplacementUnderpriced, got.SweepError, "the node's refusal, mapped")
	fs := e.sweepTxs(inv.ID, store.SweepTxFunding)
	require.Len(t, fs, 2, "retried at once with a bumped fee")
	requireBumped(t, fs[0], fs[1])
	require.Equal(t, ReasonReplacementUnderpriced, fs[1].LastError)

	// The rival is mined; one block later the funding is signed again with
	// a new nonce and the sweep completes.
	e.drive(8, e.all([]int64{inv.ID}, store.SweepSwept), s2)
	fs = e.sweepTxs(inv.ID, store.SweepTxFunding)
	last := fs[len(fs)-1]
	require.Equal(t, store.SweepTxMined, last.Status)
	require.Equal(t, stored.Nonce+1, last.Nonce)
	for _, f := range fs[:len(fs)-1] {
		require.Equal(t, stored.Nonce, f.Nonce)
		require.NotEqual(t, store.SweepTxMined, f.Status)
	}
	require.Equal(t, 0, e.balance(e.merchant.SettlementAddress).Cmp(eth(1)))
	require.Empty(t, e.invoice(inv.ID).SweepError)
}

// With an indexed chain, a nonce someone else used is given up only once
// the index has reached the block it was seen used at and holds none of
// the slot's transactions: the sweep waits while the index lags, then
// funds again with a new nonce.
func TestSweep_NonceTooLow_Indexed_GivenUpOnceTheIndexShowsAnotherTransaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.confirmedInvoices(1, eth(1))[0]
	e.index()
	stored := fundingNonceTaken(t, e, inv)

	s2 := e.sweeper(Config{Confirmations: 1})
	require.NoError(t, s2.RunOnce(ctx)) // first seen: wait a block
	for range 3 {                       // the index lags: wait
		e.sim.Commit()
		require.NoError(t, s2.RunOnce(ctx))
		require.Len(t, e.sweepTxs(inv.ID, store.SweepTxFunding), 1, "not given up while the index lags")
		require.Equal(t, store.SweepFunding, e.invoice(inv.ID).SweepStatus)
	}
	e.index() // the index holds the other transaction, none of the slot's
	require.NoError(t, s2.RunOnce(ctx))
	fs := e.sweepTxs(inv.ID, store.SweepTxFunding)
	require.Len(t, fs, 2)
	require.Equal(t, store.SweepTxFailed, fs[0].Status)
	require.Equal(t, stored.Nonce+1, fs[1].Nonce)

	e.driveIndexed(5, e.all([]int64{inv.ID}, store.SweepSwept), s2)
	require.Equal(t, store.StatusSettled, e.invoice(inv.ID).Status)
	require.Equal(t, 0, e.balance(e.merchant.SettlementAddress).Cmp(eth(1)))
}

// unsentFunding stores the sweep wallet's funding of inv without
// broadcasting it (the process dies just before) and returns it.
func unsentFunding(t *testing.T, e *env, inv store.Invoice) store.SweepTx {
	t.Helper()
	crashCtx, crash := context.WithCancel(ctx)
	defer crash()
	cc := &crashingChain{Chain: e.client, cancel: crash, before: true, match: sentBy(e.sweepWallet())}
	s1 := e.sweeperOn(cc, Config{Confirmations: 1})
	require.ErrorIs(t, s1.RunOnce(crashCtx), context.Canceled)
	stored := e.sweepTxs(inv.ID, store.SweepTxFunding)[0]
	return stored
}

// fundingNonceTaken is unsentFunding, then someone else uses the sweep
// wallet's key at that nonce, mined.
func fundingNonceTaken(t *testing.T, e *env, inv store.Invoice) store.SweepTx {
	t.Helper()
	stored := unsentFunding(t, e, inv)
	self := e.sweepWallet()
	tx, err := types.SignNewTx(e.sweepKey, types.LatestSignerForChainID(big.NewInt(1337)), &types.DynamicFeeTx{
		ChainID: big.NewInt(1337), Nonce: stored.Nonce, GasTipCap: big.NewInt(params1Gwei),
		GasFeeCap: big.NewInt(10 * params1Gwei), Gas: 21000, To: &self, Value: big.NewInt(0),
	})
	require.NoError(t, err)
	require.NoError(t, e.client.SendTransaction(ctx, tx))
	e.sim.Commit()
	e.clock.Advance(2 * time.Minute)
	return stored
}
