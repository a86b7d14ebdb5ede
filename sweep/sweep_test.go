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
