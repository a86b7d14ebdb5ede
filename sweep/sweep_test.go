package sweep

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
	"github.com/evmpay/evmpay/store/sqlite"
)

// The chain clients satisfy Chain with no adapter; the stores satisfy Store;
// the in-memory HD wallet is a DepositSigner.
var (
	_ Chain         = (*ethclient.Client)(nil)
	_ Chain         = simulated.Client(nil)
	_ Store         = (*postgres.Store)(nil)
	_ Store         = (*sqlite.Store)(nil)
	_ Store         = store.Store(nil)
	_ DepositSigner = (*hdwallet.Wallet)(nil)
	_ DepositSigner = hdwallet.Signer(nil)
	_ AccountSigner = (*KeySigner)(nil)
)

func TestSweep_Sponsor_MerchantReceivesExactAmount(t *testing.T) {
	t.Parallel()
	testSponsorExactAmount(t, newEnv(t))
}

func TestSweep_Sponsor_OnSQLite(t *testing.T) {
	t.Parallel()
	testSponsorExactAmount(t, newEnv(t, onSQLite()))
}

func testSponsorExactAmount(t *testing.T, e *env) {
	paid := big.NewInt(1_234_567_890_123_456_789)
	inv := e.confirmedInvoices(1, paid)[0]
	s := e.sweeper(Config{})
	walletBefore := e.balance(e.sweepWallet())

	// Pass 1 funds the deposit address; the funding is mined in the next
	// block, pass 2 sends the sweep, mined in the block after.
	require.NoError(t, s.RunOnce(ctx))
	require.Equal(t, store.SweepFunding, e.invoice(inv.ID).SweepStatus)
	e.sim.Commit()
	require.NoError(t, s.RunOnce(ctx))
	got := e.invoice(inv.ID)
	require.Equal(t, store.SweepSent, got.SweepStatus)
	require.NotNil(t, got.SweepTxHash)
	e.sim.Commit()
	sweptAt := e.head()

	// SETTLED only with 12 confirmations: head − block ≥ 12.
	blocks := e.drive(20, e.all([]int64{inv.ID}, store.SweepSwept), s)
	require.Equal(t, sweptAt+12, e.head(), "settled at the 12th confirmation, not before")
	require.Equal(t, 12, blocks)

	got = e.invoice(inv.ID)
	require.Equal(t, store.StatusSettled, got.Status)
	require.NotNil(t, got.SettledAt)
	require.Empty(t, got.SweepError)
	require.Equal(t, 0, e.balance(e.merchant.SettlementAddress).Cmp(paid), "the merchant receives exactly what the payer sent")
	require.Equal(t, amountOf(paid), *got.SweptWei)

	fundings := e.sweepTxs(inv.ID, store.SweepTxFunding)
	sweeps := e.sweepTxs(inv.ID, store.SweepTxSweep)
	require.Len(t, fundings, 1)
	require.Len(t, sweeps, 1)
	funding, sweep := fundings[0], sweeps[0]
	require.Equal(t, store.SweepTxMined, funding.Status)
	require.Equal(t, store.SweepTxMined, sweep.Status)
	require.Equal(t, *got.SweepTxHash, sweep.TxHash)
	require.EqualValues(t, 0, sweep.Nonce)
	require.EqualValues(t, 21000, *sweep.GasUsed)

	// The funding is exactly 21000 × the sweep's fee cap; what the sweep did
	// not spend of it stays at the deposit address, recorded as dust.
	require.Equal(t, 0, funding.ValueWei.Big().Cmp(gasCost(21000, sweep.MaxFeeWei.Big())))
	dust := new(big.Int).Sub(funding.ValueWei.Big(), sweep.FeeWei.Big())
	require.Equal(t, amountOf(dust), *got.DustWei)
	require.Equal(t, 0, e.balance(inv.DepositAddress).Cmp(dust))
	require.Positive(t, dust.Sign(), "the fee cap is above the price paid")

	// The wallet paid the funding and its fee, nothing else.
	spent := new(big.Int).Add(funding.ValueWei.Big(), funding.FeeWei.Big())
	require.Equal(t, 0, new(big.Int).Sub(walletBefore, e.balance(e.sweepWallet())).Cmp(spent))

	require.Equal(t, []string{store.EventInvoiceSettled}, e.events(inv.ID))
}

func TestSweep_Deduct_OneTransactionFromTheDeposit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	paid := eth(2)
	inv := e.confirmedInvoices(1, paid)[0]
	s := e.sweeper(Config{Policy: PolicyDeduct, Confirmations: 3})
	walletBefore := e.balance(e.sweepWallet())

	e.drive(10, e.all([]int64{inv.ID}, store.SweepSwept), s)

	require.Empty(t, e.sweepTxs(inv.ID, store.SweepTxFunding), "no funding under the deduct policy")
	sweeps := e.sweepTxs(inv.ID, store.SweepTxSweep)
	require.Len(t, sweeps, 1)
	sweep := sweeps[0]
	maxGas := gasCost(21000, sweep.MaxFeeWei.Big())
	require.Equal(t, 0, sweep.ValueWei.Big().Cmp(new(big.Int).Sub(paid, maxGas)), "value = balance − 21000 × fee cap")

	got := e.invoice(inv.ID)
	require.Equal(t, store.StatusSettled, got.Status)
	require.Equal(t, 0, e.balance(e.merchant.SettlementAddress).Cmp(sweep.ValueWei.Big()))
	require.Equal(t, sweep.ValueWei, *got.SweptWei)
	dust := new(big.Int).Sub(maxGas, sweep.FeeWei.Big())
	require.Equal(t, amountOf(dust), *got.DustWei, "dust = 21000 × (fee cap − price paid)")
	require.Equal(t, 0, e.balance(inv.DepositAddress).Cmp(dust))
	require.Equal(t, 0, e.balance(e.sweepWallet()).Cmp(walletBefore), "the sweep wallet pays nothing")
}

func TestSweep_HundredInvoicesConfirmedInOneBlock_AllSweptWithDistinctNonces(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 100
	invs := e.confirmedInvoices(n, eth(1))
	// Two sweepers, as two processes sharing one PostgreSQL database.
	a := e.sweeper(Config{Workers: 8, BatchSize: 30})
	b := e.sweeper(Config{Workers: 8, BatchSize: 30})
	walletNonce := e.nonce(e.sweepWallet())
	confirmed := e.head() // settlement confirmed them at this head

	blocks := e.drive(30, e.all(ids(invs), store.SweepSwept), a, b)
	require.Equal(t, 2+12, blocks, "funding block, sweep block, then 12 confirmations")

	nonces := map[uint64]bool{}
	for _, inv := range invs {
		fundings := e.sweepTxs(inv.ID, store.SweepTxFunding)
		require.Len(t, fundings, 1, "one funding per invoice")
		require.False(t, nonces[fundings[0].Nonce], "nonce %d used twice", fundings[0].Nonce)
		nonces[fundings[0].Nonce] = true
		sweeps := e.sweepTxs(inv.ID, store.SweepTxSweep)
		require.Len(t, sweeps, 1, "one sweep per deposit address")
		require.EqualValues(t, 0, sweeps[0].Nonce)
		require.Equal(t, confirmed+1, *fundings[0].BlockNumber, "every funding in the first block")
		require.Equal(t, confirmed+2, *sweeps[0].BlockNumber, "every sweep in the second block")
		require.Equal(t, store.StatusSettled, e.invoice(inv.ID).Status)
	}
	for i := walletNonce; i < walletNonce+n; i++ {
		require.True(t, nonces[i], "the sweep wallet's nonces are contiguous: %d missing", i)
	}
	require.Equal(t, walletNonce+n, e.nonce(e.sweepWallet()))
	require.Equal(t, 0, e.balance(e.merchant.SettlementAddress).Cmp(eth(n)))
}

func TestSweep_KeepsSettlementsConcurrentChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.confirmedInvoices(1, eth(1))[0]
	s := e.sweeper(Config{Confirmations: 1})
	require.NoError(t, s.RunOnce(ctx))

	// Settlement touches the row between passes (a late extra payment).
	cur := e.invoice(inv.ID)
	cur.PaidLate, cur.Overpaid = true, true
	require.NoError(t, e.st.UpdateInvoice(ctx, &cur))

	e.drive(5, e.all([]int64{inv.ID}, store.SweepSwept), s)
	got := e.invoice(inv.ID)
	require.True(t, got.PaidLate)
	require.True(t, got.Overpaid)
	require.Equal(t, store.StatusSettled, got.Status)
	require.Greater(t, got.Version, cur.Version)
}
