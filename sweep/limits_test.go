package sweep

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

// blockNonce reserves addr's next nonce in the store without a
// transaction: the next one the sweeper signs sits behind a nonce gap, so
// the node accepts it (into its queue) and never mines it.
func (e *env) blockNonce(addr common.Address) {
	e.t.Helper()
	n, err := e.st.ReserveNonce(ctx, addr, e.nonce(addr))
	require.NoError(e.t, err)
	require.Equal(e.t, e.nonce(addr), n)
}

// run makes a pass and a block, blocks times.
func (e *env) run(s *Sweeper, blocks int) {
	e.t.Helper()
	for range blocks {
		require.NoError(e.t, s.RunOnce(ctx))
		e.sim.Commit()
	}
}

func (e *env) nonceHistory(from common.Address, kind string, nonce uint64) []store.SweepTx {
	e.t.Helper()
	txs, err := e.st.ListSweepTxsByNonce(ctx, from, kind, nonce)
	require.NoError(e.t, err)
	return txs
}

func requireFeesAtMost(t *testing.T, txs []store.SweepTx, ceiling *big.Int) {
	t.Helper()
	for _, tx := range txs {
		require.LessOrEqual(t, tx.MaxFeeWei.Big().Cmp(ceiling), 0, "max fee %s above %s", tx.MaxFeeWei, ceiling)
		require.LessOrEqual(t, tx.MaxPriorityFeeWei.Cmp(tx.MaxFeeWei), 0)
	}
}

func requireAlert(t *testing.T, ws WalletStatus, reason string) {
	t.Helper()
	for _, a := range ws.Alerts {
		if strings.Contains(a, reason) {
			return
		}
	}
	require.Failf(t, "no alert", "want an alert with %q in %q", reason, ws.Alerts)
}

func TestTopUp_NeverMined_ReplacedAtMostMaxAttemptsThenAlerts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sweepWalletBalance(new(big.Int)))
	e.blockNonce(e.funder())
	reg := prometheus.NewRegistry()
	s := e.sweeper(Config{Registerer: reg})

	e.run(s, 60) // 20 replacement periods of ReplaceAfterBlocks (3)

	unmined, err := e.st.ListUnminedSweepTxs(ctx, e.funder())
	require.NoError(t, err)
	require.Len(t, unmined, 1, "one top-up at a time")
	hist := e.nonceHistory(e.funder(), store.SweepTxTopUp, unmined[0].Nonce)
	require.Len(t, hist, 1+s.cfg.MaxAttempts, "the original and MaxAttempts replacements, no more")
	requireFeesAtMost(t, hist, s.cfg.MaxFeePerGas.Big())
	first := hist[0].MaxFeeWei.Big()
	bound := new(big.Int).Set(first)
	for range s.cfg.MaxAttempts {
		bound = bigMax(bump(bound), bound)
	}
	// Each replacement is the larger of a 12.5% bump and a fresh price;
	// the simulated chain's base fee only falls, so bumps set the price.
	requireFeesAtMost(t, hist, bound)
	require.Equal(t, 0, e.balance(e.sweepWallet()).Sign(), "never mined")

	ws, err := s.WalletStatus(ctx)
	require.NoError(t, err)
	requireAlert(t, ws, ReasonReplacementCap)
	require.Equal(t, 1.0, metricValue(t, s.m.stopped.WithLabelValues(store.SweepTxTopUp, ReasonReplacementCap)), "alerted once")
	require.Equal(t, 1.0, metricValue(t, s.m.stuck))
}

func TestTopUp_NeverMined_StopsAtTheFeeCeilingWithAnAlert(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sweepWalletBalance(new(big.Int)))
	e.blockNonce(e.funder())
	ceiling := big.NewInt(3 * params1Gwei)
	s := e.sweeper(Config{MaxFeePerGas: amountOf(ceiling), MaxAttempts: 50})

	e.run(s, 90)

	unmined, err := e.st.ListUnminedSweepTxs(ctx, e.funder())
	require.NoError(t, err)
	require.Len(t, unmined, 1)
	hist := e.nonceHistory(e.funder(), store.SweepTxTopUp, unmined[0].Nonce)
	requireFeesAtMost(t, hist, ceiling)
	require.Less(t, len(hist), 20, "no replacement once at the ceiling")
	require.Positive(t, bump(hist[len(hist)-1].MaxFeeWei.Big()).Cmp(ceiling), "re-priced until the next bump would pass the ceiling")
	require.Greater(t, len(hist), 1, "re-priced below the ceiling")

	ws, err := s.WalletStatus(ctx)
	require.NoError(t, err)
	requireAlert(t, ws, ReasonFeeCeiling)
	require.Equal(t, 1.0, metricValue(t, s.m.stopped.WithLabelValues(store.SweepTxTopUp, ReasonFeeCeiling)))
}

func TestConfig_MaxFeePerGas_DefaultsToACeiling(t *testing.T) {
	t.Parallel()
	require.Equal(t, 0, Config{}.withDefaults().MaxFeePerGas.Big().Cmp(DefaultMaxFeePerGas()), "1000 gwei")
	high := store.NewAmount(500_000_000_000) // 500 gwei minimum gas price
	require.Equal(t, "5000000000000", Config{MinGasPrice: high}.withDefaults().MaxFeePerGas.String(), "10 × MinGasPrice")
}

func TestSweep_FundingNeverMined_ReplacedAtMostMaxAttemptsThenFailsWithAnAlert(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.confirmedInvoices(1, eth(1))[0]
	e.blockNonce(e.sweepWallet())
	reg := prometheus.NewRegistry()
	s := e.sweeper(Config{Confirmations: 1, Registerer: reg})

	e.drive(60, e.all([]int64{inv.ID}, store.SweepFailed), s)
	e.run(s, 20) // nothing more happens to it

	fund := e.sweepTxs(inv.ID, store.SweepTxFunding)
	require.Len(t, fund, 1+s.cfg.MaxAttempts, "the original and MaxAttempts replacements, no more")
	requireFeesAtMost(t, fund, s.cfg.MaxFeePerGas.Big())
	got := e.invoice(inv.ID)
	require.Equal(t, store.SweepFailed, got.SweepStatus)
	require.Equal(t, ReasonNotMined, got.SweepError)
	require.Equal(t, 1.0, metricValue(t, s.m.stopped.WithLabelValues(store.SweepTxFunding, ReasonReplacementCap)), "alerted once")
	ws, err := s.WalletStatus(ctx)
	require.NoError(t, err)
	requireAlert(t, ws, ReasonReplacementCap)
}

func TestSweep_StuckAtTheFeeCeiling_NotRepricedAboveItAndAlerts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.confirmedInvoices(1, eth(1))[0]
	e.blockNonce(e.sweepWallet())
	ceiling := big.NewInt(3 * params1Gwei)
	s := e.sweeper(Config{Confirmations: 1, MaxFeePerGas: amountOf(ceiling), MaxAttempts: 50})

	e.run(s, 30) // each pass at the ceiling uses one of the 50 attempts

	fund := e.sweepTxs(inv.ID, store.SweepTxFunding)
	requireFeesAtMost(t, fund, ceiling)
	require.Less(t, len(fund), 15, "no replacement once at the ceiling")
	require.Equal(t, ReasonFeeCeiling, e.invoice(inv.ID).SweepError)
	require.Equal(t, 1.0, metricValue(t, s.m.stopped.WithLabelValues(store.SweepTxFunding, ReasonFeeCeiling)))
	ws, err := s.WalletStatus(ctx)
	require.NoError(t, err)
	requireAlert(t, ws, ReasonFeeCeiling)
}

func TestSweep_SettlementAddressOfTheService_FailsAndSendsNothing(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		addr func(e *env, other store.Invoice) common.Address
	}{
		{"another invoice's deposit address", func(_ *env, other store.Invoice) common.Address { return other.DepositAddress }},
		{"the sweep wallet", func(e *env, _ store.Invoice) common.Address { return e.sweepWallet() }},
		{"the gas funder", func(e *env, _ store.Invoice) common.Address { return e.funder() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, policy := range []Policy{PolicySponsor, PolicyDeduct} {
				e := newEnv(t)
				invs := e.confirmedInvoices(2, eth(1))
				e.merchant.SettlementAddress = c.addr(e, invs[1])
				require.NoError(t, e.st.UpdateMerchant(ctx, e.merchant))
				s := e.sweeper(Config{Policy: policy, Confirmations: 1})

				e.run(s, 3)
				got := e.invoice(invs[0].ID)
				require.Equal(t, store.SweepFailed, got.SweepStatus, policy)
				require.Equal(t, ReasonSettlementIsService, got.SweepError)
				require.Contains(t, e.events(invs[0].ID), store.EventInvoiceSweepFailed)
				txs, err := e.st.ListSweepTxsByInvoice(ctx, invs[0].ID)
				require.NoError(t, err)
				require.Empty(t, txs, "nothing signed")
				require.Zero(t, e.nonce(e.sweepWallet()), "nothing sent")
				require.Zero(t, e.nonce(invs[0].DepositAddress))
				require.Equal(t, 0, e.balance(invs[0].DepositAddress).Cmp(eth(1)), "the funds stay where they are")
			}
		})
	}
}

// guardFunc is a ChainGuard.
type guardFunc func(ctx context.Context) error

func (g guardFunc) CheckChain(ctx context.Context) error { return g(ctx) }

var errOtherChain = errors.New("node serves another chain (genesis differs)")

func TestSweep_ChainGuardRefuses_NothingBroadcastAndStatusShowsIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.confirmedInvoices(1, eth(1))[0]
	s := e.sweeper(Config{Confirmations: 1, ChainGuard: guardFunc(func(context.Context) error { return errOtherChain })})

	for range 3 {
		err := s.RunOnce(ctx)
		require.ErrorIs(t, err, errChainGuard)
		require.ErrorIs(t, err, errOtherChain)
		e.sim.Commit()
	}
	pending, err := e.client.PendingNonceAt(ctx, e.sweepWallet())
	require.NoError(t, err)
	require.Zero(t, pending, "nothing sent")
	require.Empty(t, e.sweepTxs(inv.ID, store.SweepTxFunding))
	ws, err := s.WalletStatus(ctx)
	require.NoError(t, err)
	requireAlert(t, ws, errOtherChain.Error())
	require.Equal(t, 1.0, metricValue(t, s.m.chainGuard))
}

func TestSweep_ChainGuardRefusesAtBroadcast_StoredTxNotSentUntilItPasses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.confirmedInvoices(1, eth(1))[0]
	var calls, failFrom atomic.Int64
	failFrom.Store(2) // the pass starts, then the node is swapped before the broadcast
	guard := guardFunc(func(context.Context) error {
		if n := calls.Add(1); failFrom.Load() > 0 && n >= failFrom.Load() {
			return errOtherChain
		}
		return nil
	})
	s := e.sweeper(Config{Confirmations: 1, ChainGuard: guard})

	require.NoError(t, s.RunOnce(ctx)) // the invoice's broadcast error is transient: retried later
	fund := e.sweepTxs(inv.ID, store.SweepTxFunding)
	require.Len(t, fund, 1, "signed and stored")
	require.Equal(t, store.SweepTxSigned, fund[0].Status, "never broadcast")
	pending, err := e.client.PendingNonceAt(ctx, e.sweepWallet())
	require.NoError(t, err)
	require.Zero(t, pending, "nothing sent")

	// Stored transactions are not re-broadcast either while it refuses.
	e.sim.Commit()
	require.ErrorIs(t, s.RunOnce(ctx), errChainGuard)
	pending, err = e.client.PendingNonceAt(ctx, e.sweepWallet())
	require.NoError(t, err)
	require.Zero(t, pending)

	// The right node is back: the same stored bytes go out.
	failFrom.Store(0)
	e.clock.Advance(s.cfg.RetryBackoff)
	e.drive(20, e.all([]int64{inv.ID}, store.SweepSwept), s)
	fund = e.sweepTxs(inv.ID, store.SweepTxFunding)
	require.Len(t, fund, 1)
	require.Equal(t, store.SweepTxMined, fund[0].Status)
}
