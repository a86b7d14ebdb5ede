package settlement

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func TestReorg_PaymentReorgedOut_InvoiceRevertedToPending(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		inv := f.invoice(eth(1000))
		s := f.settler()
		f.mineN(3)
		orphan := f.mine(pay(inv.DepositAddress, eth(1000)))
		f.mine()
		f.sync(s)
		require.Equal(t, store.StatusPaid, f.get(inv.ID).Status)

		f.fork(orphan.Number) // the indexer follows a reorg: a longer branch without the payment
		f.mineN(3)
		f.sync(s)
		got := f.get(inv.ID)
		require.Equal(t, store.StatusPending, got.Status)
		require.True(t, got.PaidWei.IsZero())
		require.Nil(t, got.PaidAt)
		require.Empty(t, f.payments(inv.ID))
		typ, snap := f.lastEvent(inv.ID)
		require.Equal(t, store.EventInvoiceReverted, typ)
		require.Equal(t, store.StatusPending, snap.Status)
		require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceReverted}, f.events(inv.ID))
		require.Equal(t, f.head.Hash, f.cursor().BlockHash, "the new branch was processed")

		f.mineN(20)
		f.sync(s)
		require.Equal(t, store.StatusPending, f.get(inv.ID).Status, "nothing to confirm")
	})
}

func TestReorg_PaymentReincludedInNewBranch_PaidAgain(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		inv := f.invoice(eth(1000))
		s := f.settler()
		f.mine()
		tx := pay(inv.DepositAddress, eth(1000))
		orphan := f.mine(tx)
		f.sync(s)

		f.fork(orphan.Number)
		f.mine()
		again := f.mine(tx) // the same transaction, one block later
		f.sync(s)
		got := f.get(inv.ID)
		require.Equal(t, store.StatusPaid, got.Status)
		ps := f.payments(inv.ID)
		require.Len(t, ps, 1, "counted once")
		require.Equal(t, tx.Hash, ps[0].TxHash)
		require.Equal(t, again.Hash, ps[0].BlockHash)
		require.Equal(t, again.Number, ps[0].BlockNumber)
		require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceReverted, store.EventInvoicePaid}, f.events(inv.ID))

		f.mineN(11)
		f.sync(s)
		require.Equal(t, store.StatusPaid, f.get(inv.ID).Status, "confirmations count from the new block")
		f.mine()
		f.sync(s)
		require.Equal(t, store.StatusConfirmed, f.get(inv.ID).Status)
	})
}

func TestReorg_TipReplacedAtSameHeight(t *testing.T) {
	f := newFixture(t, pgStore(t))
	inv := f.invoice(eth(1000))
	s := f.settler()
	f.mine()
	tip := f.mine(pay(inv.DepositAddress, eth(1000)))
	f.sync(s)
	f.fork(tip.Number)
	f.mine() // same height, another hash, no payment
	f.sync(s)
	require.Equal(t, store.StatusPending, f.get(inv.ID).Status)
	require.Equal(t, f.head.Hash, f.cursor().BlockHash)
}

func TestReorg_ConfirmedWithQueuedSweep_Unqueued(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		inv := f.invoice(eth(1000))
		kept := f.invoice(eth(1000))
		s := f.settler()
		f.mine(pay(kept.DepositAddress, eth(1000)))
		orphan := f.mine(pay(inv.DepositAddress, eth(1000)))
		f.mineN(12)
		f.sync(s)
		require.Equal(t, store.StatusConfirmed, f.get(inv.ID).Status)

		f.fork(orphan.Number) // a 13-block reorg
		f.mineN(13)
		f.sync(s)
		got := f.get(inv.ID)
		require.Equal(t, store.StatusPending, got.Status)
		require.Equal(t, store.SweepNone, got.SweepStatus, "the queued sweep is withdrawn")
		require.Nil(t, got.ConfirmedAt)
		require.False(t, got.NeedsAttention)
		require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceConfirmed, store.EventInvoiceReverted},
			f.events(inv.ID))
		require.Equal(t, store.StatusConfirmed, f.get(kept.ID).Status, "payments below the fork stay")
		require.Len(t, f.events(kept.ID), 2)
	})
}

func TestReorg_ConfirmedPaymentStillInNewBranch_ReconfirmedAfterRevert(t *testing.T) {
	f := newFixture(t, pgStore(t))
	inv := f.invoice(eth(1000))
	s := f.settler()
	f.mine()
	tx := pay(inv.DepositAddress, eth(1000))
	orphan := f.mine(tx)
	f.mineN(12)
	f.sync(s)
	require.Equal(t, store.StatusConfirmed, f.get(inv.ID).Status)
	f.fork(orphan.Number)
	f.mine(tx)
	f.mineN(12)
	f.sync(s)
	got := f.get(inv.ID)
	require.Equal(t, store.StatusConfirmed, got.Status)
	require.Equal(t, store.SweepQueued, got.SweepStatus)
	require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceConfirmed, store.EventInvoiceReverted,
		store.EventInvoicePaid, store.EventInvoiceConfirmed}, f.events(inv.ID))
}

func TestReorg_AfterSweepSent_KeptAndFlaggedForOperator(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		inv := f.invoice(eth(1000))
		s := f.settler()
		f.mine()
		orphan := f.mine(pay(inv.DepositAddress, eth(1000)))
		f.mineN(12)
		f.sync(s)
		// The sweep worker sends the sweep.
		got := f.get(inv.ID)
		got.SweepStatus = store.SweepSent
		h := randHash()
		got.SweepTxHash = &h
		require.NoError(t, f.st.UpdateInvoice(ctx, &got))

		f.fork(orphan.Number)
		f.mineN(13)
		f.sync(s)
		got = f.get(inv.ID)
		require.Equal(t, store.StatusConfirmed, got.Status, "money may have moved: no going back")
		require.Equal(t, store.SweepSent, got.SweepStatus)
		require.True(t, got.NeedsAttention)
		require.True(t, got.PaidWei.IsZero(), "paid_wei is what the chain holds")
		require.Empty(t, f.payments(inv.ID))
		require.Equal(t, store.EventInvoiceReverted, f.events(inv.ID)[2])
	})
}

func TestReorg_LatePaymentReorgedOut_BackToExpired(t *testing.T) {
	f := newFixture(t, pgStore(t))
	inv := f.invoice(eth(1000))
	s := f.settler()
	f.mine()
	f.clock.Advance(20 * time.Minute)
	f.sync(s)
	orphan := f.mine(pay(inv.DepositAddress, eth(1000)))
	f.sync(s)
	require.Equal(t, store.StatusPaid, f.get(inv.ID).Status)
	f.fork(orphan.Number)
	f.mineN(2)
	f.sync(s)
	got := f.get(inv.ID)
	require.Equal(t, store.StatusExpired, got.Status)
	require.False(t, got.PaidLate)
	require.Equal(t, []string{store.EventInvoiceExpired, store.EventInvoicePaid, store.EventInvoiceReverted}, f.events(inv.ID))
}

func TestReorg_EveryProcessedBlockOrphaned_StartsOverBeforeFirst(t *testing.T) {
	f := newFixture(t, pgStore(t))
	inv := f.invoice(eth(1000))
	f.head = store.Block{Number: 99, Hash: randHash()}
	f.hasHead = true
	f.mine() // 100: the first indexed block
	f.sync(f.settler())
	f.mine(pay(inv.DepositAddress, eth(1000)))
	s := f.settler()
	f.sync(s)
	require.Equal(t, store.StatusPaid, f.get(inv.ID).Status)

	_, err := f.st.DeleteBlocksFrom(ctx, 100)
	require.NoError(t, err)
	f.head = store.Block{Number: 99, Hash: randHash()}
	f.mineN(3)
	f.sync(s)
	require.Equal(t, store.StatusPending, f.get(inv.ID).Status)
	require.Equal(t, f.head.Hash, f.cursor().BlockHash)
}

func TestReorg_DeeperThanHistory_StopsWithError(t *testing.T) {
	f := newFixture(t, pgStore(t))
	inv := f.invoice(eth(1000))
	s := f.settler(func(c *Config) { c.MaxReorgDepth = 3 })
	f.mineN(2)
	f.mine(pay(inv.DepositAddress, eth(1000)))
	f.mineN(5)
	f.sync(s)
	before := f.cursor()
	f.fork(3)
	f.mineN(10)
	err := s.Sync(ctx)
	require.ErrorIs(t, err, store.ErrReorgTooDeep)
	require.Equal(t, before.BlockHash, f.cursor().BlockHash, "nothing moved")
	require.Equal(t, store.StatusPaid, f.get(inv.ID).Status)
}

func TestReorg_HistoryPruned(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	s := f.settler(func(c *Config) { c.MaxReorgDepth = 10 })
	f.mineN(200)
	f.sync(s)
	hs, err := f.st.ListSettledBlockHashes(ctx, 0, 1000)
	require.NoError(t, err)
	require.Less(t, len(hs), 10+pruneEvery+1, "history kept to about MaxReorgDepth")
	require.Contains(t, hs, f.head.Number-10)
}
