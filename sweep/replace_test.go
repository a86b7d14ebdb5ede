package sweep

import (
	"math/big"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

// lowTip makes the sweeper offer a 1 wei tip while it is set: the simulated
// node accepts such a transaction (its pool's minimum is 1 wei) and never
// mines it (its miner wants 0.001 gwei), as a Cosmos EVM node does with an
// underpriced transaction.
func lowTip(e *env, s *Sweeper) *atomic.Bool {
	var low atomic.Bool
	s.tipHook = func() *big.Int {
		if low.Load() {
			return big.NewInt(1)
		}
		tip, err := e.client.SuggestGasTipCap(ctx)
		require.NoError(e.t, err)
		return tip
	}
	return &low
}

func (e *env) mined(t store.SweepTx) bool {
	_, err := e.client.TransactionReceipt(ctx, t.TxHash)
	return err == nil
}

func TestSweep_StuckFunding_ReplacedWithSameNonceAndBumpedFee(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.confirmedInvoices(1, eth(1))[0]
	s := e.sweeper(Config{Confirmations: 1, ReplaceAfterBlocks: 2})
	low := lowTip(e, s)

	low.Store(true)
	require.NoError(t, s.RunOnce(ctx))
	low.Store(false)
	stuck := e.sweepTxs(inv.ID, store.SweepTxFunding)[0]
	for range 2 {
		e.sim.Commit()
		require.False(t, e.mined(stuck), "accepted, never mined")
		require.NoError(t, s.RunOnce(ctx))
	}
	// Two blocks after it was accepted: replaced.
	fs := e.sweepTxs(inv.ID, store.SweepTxFunding)
	require.Len(t, fs, 2)
	old, repl := fs[0], fs[1]
	require.Equal(t, store.SweepTxReplaced, old.Status)
	require.Equal(t, old.Nonce, repl.Nonce, "same nonce")
	require.Equal(t, old.ValueWei, repl.ValueWei, "same funding")
	requireBumped(t, old, repl)
	got := e.invoice(inv.ID)
	require.Equal(t, ReasonNotMined, got.SweepError)
	require.Equal(t, 1, got.SweepAttempts)

	e.drive(5, e.all([]int64{inv.ID}, store.SweepSwept), s)
	fs = e.sweepTxs(inv.ID, store.SweepTxFunding)
	require.Equal(t, store.SweepTxReplaced, fs[0].Status)
	require.Equal(t, store.SweepTxMined, fs[1].Status)
	require.Empty(t, e.invoice(inv.ID).SweepError)
	require.Equal(t, 0, e.balance(e.merchant.SettlementAddress).Cmp(eth(1)))
}

// requireBumped checks the replacement rule nodes apply: fee cap and tip
// both at least 10% higher.
func requireBumped(t *testing.T, old, repl store.SweepTx) {
	t.Helper()
	for _, pair := range [][2]store.Amount{{old.MaxFeeWei, repl.MaxFeeWei}, {old.MaxPriorityFeeWei, repl.MaxPriorityFeeWei}} {
		min := new(big.Int).Mul(pair[0].Big(), big.NewInt(110))
		min.Div(min, big.NewInt(100))
		require.GreaterOrEqual(t, pair[1].Big().Cmp(min), 0, "bumped ≥ 10%%: %s → %s", pair[0], pair[1])
		require.Positive(t, pair[1].Cmp(pair[0]))
	}
}

func TestSweep_StuckSponsoredSweep_FundsTheExtraGasThenReplaces(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	paid := big.NewInt(777_777_777_777_777_777)
	inv := e.confirmedInvoices(1, paid)[0]
	s := e.sweeper(Config{Confirmations: 1, ReplaceAfterBlocks: 2})
	low := lowTip(e, s)

	require.NoError(t, s.RunOnce(ctx)) // funding
	e.sim.Commit()
	low.Store(true)
	require.NoError(t, s.RunOnce(ctx)) // the sweep, underpriced
	low.Store(false)
	stuck := e.sweepTxs(inv.ID, store.SweepTxSweep)[0]
	e.sim.Commit()
	require.NoError(t, s.RunOnce(ctx))
	e.sim.Commit()
	require.False(t, e.mined(stuck))
	// Replacing it needs a higher fee cap with the same value: the wallet
	// funds the difference first.
	require.NoError(t, s.RunOnce(ctx))
	fs := e.sweepTxs(inv.ID, store.SweepTxFunding)
	require.Len(t, fs, 2, "an extra funding")
	require.NotEqual(t, fs[0].Nonce, fs[1].Nonce)
	require.Len(t, e.sweepTxs(inv.ID, store.SweepTxSweep), 1, "not replaced before the extra gas is there")

	e.drive(5, e.all([]int64{inv.ID}, store.SweepSwept), s)
	sweeps := e.sweepTxs(inv.ID, store.SweepTxSweep)
	require.Len(t, sweeps, 2)
	old, repl := sweeps[0], sweeps[1]
	require.Equal(t, store.SweepTxReplaced, old.Status)
	require.Equal(t, store.SweepTxMined, repl.Status)
	require.Equal(t, old.Nonce, repl.Nonce)
	requireBumped(t, old, repl)
	require.Equal(t, 0, e.balance(e.merchant.SettlementAddress).Cmp(paid), "still exactly what the payer sent")

	got := e.invoice(inv.ID)
	require.Equal(t, repl.TxHash, *got.SweepTxHash)
	funded := new(big.Int).Add(fs[0].ValueWei.Big(), fs[1].ValueWei.Big())
	dust := new(big.Int).Sub(funded, repl.FeeWei.Big())
	require.Equal(t, amountOf(dust), *got.DustWei)
	require.Equal(t, 0, e.balance(inv.DepositAddress).Cmp(dust))
	require.EqualValues(t, 1, e.nonce(inv.DepositAddress))
}

func TestSweep_StuckDeductSweep_ReplacedWithLowerValue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.confirmedInvoices(1, eth(1))[0]
	s := e.sweeper(Config{Policy: PolicyDeduct, Confirmations: 1, ReplaceAfterBlocks: 1})
	low := lowTip(e, s)
	low.Store(true)
	require.NoError(t, s.RunOnce(ctx))
	low.Store(false)
	e.sim.Commit()
	require.NoError(t, s.RunOnce(ctx)) // replaced
	e.drive(5, e.all([]int64{inv.ID}, store.SweepSwept), s)

	sweeps := e.sweepTxs(inv.ID, store.SweepTxSweep)
	require.Len(t, sweeps, 2)
	old, repl := sweeps[0], sweeps[1]
	requireBumped(t, old, repl)
	require.Equal(t, -1, repl.ValueWei.Cmp(old.ValueWei), "the higher fee comes out of the value")
	require.Equal(t, 0, e.balance(e.merchant.SettlementAddress).Cmp(repl.ValueWei.Big()))
	require.Equal(t, repl.ValueWei, *e.invoice(inv.ID).SweptWei)
}

func TestSweep_NotMinedAfterMaxAttempts_FailsThenRetryCompletes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.confirmedInvoices(1, eth(1))[0]
	s := e.sweeper(Config{Confirmations: 1, ReplaceAfterBlocks: 1, MaxAttempts: 3, OperatorToken: operatorToken})
	low := lowTip(e, s)
	low.Store(true) // every replacement is still underpriced (2, 3, 4 wei tips…)
	e.drive(10, e.all([]int64{inv.ID}, store.SweepFailed), s)
	got := e.invoice(inv.ID)
	require.Equal(t, ReasonNotMined, got.SweepError)
	require.Len(t, e.sweepTxs(inv.ID, store.SweepTxFunding), 4, "the original and MaxAttempts replacements")
	require.Equal(t, 3, got.SweepAttempts)

	low.Store(false)
	res, err := s.Retry(ctx, []int64{inv.ID})
	require.NoError(t, err)
	require.Len(t, res.Requeued, 1)
	e.drive(8, e.all([]int64{inv.ID}, store.SweepSwept), s)
	fs := e.sweepTxs(inv.ID, store.SweepTxFunding)
	require.Equal(t, store.SweepTxMined, fs[len(fs)-1].Status)
	for _, f := range fs[:len(fs)-1] {
		require.Equal(t, store.SweepTxReplaced, f.Status)
		require.Equal(t, fs[0].Nonce, f.Nonce)
	}
}
