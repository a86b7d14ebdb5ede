package settlement

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func TestConditions_PaidButPendingAfter5Minutes_Reported(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		stale := f.invoice(eth(1000))
		partial := f.invoice(eth(1000))
		settled := f.invoice(eth(1000))
		f.mine(pay(stale.DepositAddress, eth(600)), pay(partial.DepositAddress, eth(999)),
			pay(settled.DepositAddress, eth(1000)))
		f.mine(pay(stale.DepositAddress, eth(400)), pay(partial.DepositAddress, store.Amount{}))
		// Only settled's payment is processed (settlement then stalls).
		require.NoError(t, f.st.InTx(ctx, func(tx store.Tx) error {
			inv, err := tx.GetInvoice(ctx, settled.ID)
			require.NoError(t, err)
			inv.Status = store.StatusPaid
			return tx.UpdateInvoice(ctx, &inv)
		}))

		now := f.clock.Now()
		c, err := CheckConditions(ctx, f.st, now.Add(5*time.Minute-time.Microsecond))
		require.NoError(t, err)
		require.True(t, c.Healthy(), "not yet 5 minutes")

		c, err = CheckConditions(ctx, f.st, now.Add(5*time.Minute))
		require.NoError(t, err)
		require.False(t, c.Healthy())
		require.Len(t, c.StalePaidPending, 1, "the partial one and the processed one are fine")
		require.Equal(t, stale.ID, c.StalePaidPending[0].ID)
		require.Empty(t, c.UnsweptConfirmed)

		f.sync(f.settler())
		c, err = CheckConditions(ctx, f.st, now.Add(time.Hour))
		require.NoError(t, err)
		require.Empty(t, c.StalePaidPending, "settlement caught up")
	})
}

func TestConditions_ConfirmedWithoutSweepTx_Reported(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		waiting := f.invoice(eth(1000))
		swept := f.invoice(eth(1000))
		f.mine(pay(waiting.DepositAddress, eth(1000)), pay(swept.DepositAddress, eth(1000)))
		f.mineN(12)
		f.sync(f.settler())
		require.Equal(t, store.StatusConfirmed, f.get(waiting.ID).Status)
		sweep := store.SweepTx{InvoiceID: &swept.ID, Kind: store.SweepTxSweep, From: swept.DepositAddress,
			To: f.merchant.SettlementAddress, ValueWei: eth(999), GasLimit: 21000, MaxFeeWei: store.NewAmount(1),
			MaxPriorityFeeWei: store.NewAmount(1), TxHash: randHash(), RawTx: randBytes(100),
			Status: store.SweepTxSent, CreatedAt: f.clock.Now(), UpdatedAt: f.clock.Now()}
		require.NoError(t, f.st.CreateSweepTx(ctx, &sweep))

		c, err := CheckConditions(ctx, f.st, f.clock.Now().Add(UnsweptConfirmedAfter-time.Second))
		require.NoError(t, err)
		require.Empty(t, c.UnsweptConfirmed)
		c, err = CheckConditions(ctx, f.st, f.clock.Now().Add(UnsweptConfirmedAfter))
		require.NoError(t, err)
		require.Len(t, c.UnsweptConfirmed, 1)
		require.Equal(t, waiting.ID, c.UnsweptConfirmed[0].ID)
		require.Empty(t, c.StalePaidPending)
	})
}
