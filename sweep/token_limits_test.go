package sweep

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
	"github.com/evmpay/evmpay/store"
)

// Token sweeps at the replacement cap (MaxAttempts) and at the fee ceiling
// (MaxFeePerGas): their stuck transactions are priced by the same
// replacement helper as native sweeps (replace.go), so a replacement a node
// would refuse as underpriced is never signed, and the stop-replacing alert
// and replacement_stopped_total count them.

// tokenWalletTxs are the two token paths with the sweep wallet's first
// transaction on each and the invoice's sweep status while it is unmined.
var tokenWalletTxs = []struct {
	path   TokenPath
	kind   testtoken.Kind
	stuck  string // the kind of the sweep wallet's first transaction
	status string
}{
	{TokenPathFund, testtoken.Tether, store.SweepTxFunding, store.SweepFunding},
	{TokenPathPermit, testtoken.Stable, store.SweepTxPermit, store.SweepSent},
}

// tokenInvoiceBehindANonceGap makes a CONFIRMED invoice of a new token of
// kind whose sweep wallet's next transaction waits behind a nonce gap: the
// node accepts it and never mines it.
func (e *env) tokenInvoiceBehindANonceGap(kind testtoken.Kind) store.Invoice {
	e.t.Helper()
	tok := e.deployToken(kind, 6)
	inv := e.confirmedTokenInvoices(tok, 1, usdc6)[0]
	e.blockNonce(e.sweepWallet())
	return inv
}

// aboveByATwentieth is x + x/20: a ceiling that leaves a transaction priced
// x room for a 5% raise only, less than the 10% nodes require of a
// replacement.
func aboveByATwentieth(x store.Amount) *big.Int {
	return new(big.Int).Add(x.Big(), new(big.Int).Div(x.Big(), big.NewInt(20)))
}

func TestTokenSweep_StuckAtTheFeeCeiling_NoUnderpricedReplacementSignedAndAlerts(t *testing.T) {
	t.Parallel()
	for _, c := range tokenWalletTxs {
		t.Run(string(c.path), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			inv := e.tokenInvoiceBehindANonceGap(c.kind)
			require.NoError(t, e.sweeper(Config{Confirmations: 1}).RunOnce(ctx))
			stuck := e.oneOf(inv.ID, c.stuck)

			// The operator lowers MaxFeePerGas to 5% above the stuck
			// transaction's fee cap: the next bump would pass it, and a
			// replacement at the ceiling would be refused as underpriced.
			ceiling := aboveByATwentieth(stuck.MaxFeeWei)
			s := e.sweeper(Config{Confirmations: 1, ReplaceAfterBlocks: 1, MaxFeePerGas: amountOf(ceiling)})
			e.run(s, 4)

			hist := e.nonceHistory(e.sweepWallet(), c.stuck, stuck.Nonce)
			require.Len(t, hist, 1, "no replacement signed, stored or broadcast")
			require.Equal(t, stuck.TxHash, hist[0].TxHash)
			require.Empty(t, hist[0].LastError, "never refused as underpriced")
			got := e.invoice(inv.ID)
			require.Equal(t, c.status, got.SweepStatus)
			require.Equal(t, ReasonFeeCeiling, got.SweepError)
			require.Equal(t, 1.0, metricValue(t, s.m.stopped.WithLabelValues(c.stuck, ReasonFeeCeiling)), "alerted once")
			ws, err := s.WalletStatus(ctx)
			require.NoError(t, err)
			requireAlert(t, ws, ReasonFeeCeiling)
		})
	}
}

func TestTokenSweep_Fund_StuckTransferAtTheFeeCeiling_NoExtraFundingNoReplacementAndAlerts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.deployToken(testtoken.Tether, 6)
	inv := e.confirmedTokenInvoices(tok, 1, usdc6)[0]
	first := e.sweeper(Config{Confirmations: 1})
	low := lowTip(e, first)
	require.NoError(t, first.RunOnce(ctx)) // the funding
	e.sim.Commit()
	low.Store(true)
	require.NoError(t, first.RunOnce(ctx)) // the transfer, with a 1 wei tip: accepted, never mined
	transfer := e.oneOf(inv.ID, store.SweepTxSweep)

	// A replacement must raise the fee cap by 10%; 5% is left below the
	// ceiling. Before the fix the extra funding for the higher cap was
	// sent, then a replacement refused as underpriced.
	s := e.sweeper(Config{Confirmations: 1, ReplaceAfterBlocks: 1, MaxFeePerGas: amountOf(aboveByATwentieth(transfer.MaxFeeWei))})
	lowTip(e, s).Store(true)
	e.run(s, 4)

	require.Len(t, e.sweepTxs(inv.ID, store.SweepTxFunding), 1, "no extra funding for a replacement that cannot be made")
	require.Len(t, e.sweepTxs(inv.ID, store.SweepTxSweep), 1, "no replacement signed")
	require.False(t, e.mined(transfer))
	got := e.invoice(inv.ID)
	require.Equal(t, store.SweepSent, got.SweepStatus)
	require.Equal(t, ReasonFeeCeiling, got.SweepError)
	require.Equal(t, 1.0, metricValue(t, s.m.stopped.WithLabelValues(store.SweepTxSweep, ReasonFeeCeiling)), "alerted once")
}

func TestTokenSweep_NeverMined_ReplacedAtMostMaxAttemptsThenFailsWithAnAlert(t *testing.T) {
	t.Parallel()
	for _, c := range tokenWalletTxs {
		t.Run(string(c.path), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			inv := e.tokenInvoiceBehindANonceGap(c.kind)
			s := e.sweeper(Config{Confirmations: 1, ReplaceAfterBlocks: 1})

			e.drive(40, e.all([]int64{inv.ID}, store.SweepFailed), s)
			e.run(s, 5) // nothing more happens to it

			hist := e.sweepTxs(inv.ID, c.stuck)
			require.Len(t, hist, 1+s.cfg.MaxAttempts, "the original and MaxAttempts replacements, no more")
			for i := 1; i < len(hist); i++ {
				require.Equal(t, hist[0].Nonce, hist[i].Nonce)
				requireBumped(t, hist[i-1], hist[i])
			}
			requireFeesAtMost(t, hist, s.cfg.MaxFeePerGas.Big())
			got := e.invoice(inv.ID)
			require.Equal(t, store.SweepFailed, got.SweepStatus)
			require.Equal(t, ReasonNotMined, got.SweepError)
			require.Equal(t, 1.0, metricValue(t, s.m.stopped.WithLabelValues(c.stuck, ReasonReplacementCap)), "alerted once")
			require.EqualValues(t, s.cfg.MaxAttempts, metricValue(t, s.m.replaced.WithLabelValues(c.stuck)))
			ws, err := s.WalletStatus(ctx)
			require.NoError(t, err)
			requireAlert(t, ws, ReasonReplacementCap)
		})
	}
}
