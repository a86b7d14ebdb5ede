package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func sweepTests() []test {
	return []test{
		{"Sweep_ClaimSweepsConcurrently", testClaimSweeps},
		{"Sweep_Txs", testSweepTxs},
		{"Sweep_ReserveNonceConcurrently", testReserveNonce},
	}
}

func testClaimSweeps(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	const n = 30
	for i := 0; i < n; i++ {
		newInvoice(t, st, m.ID, func(inv *store.Invoice) {
			inv.Status = store.StatusConfirmed
			inv.SweepStatus = store.SweepQueued
		})
	}
	later := now().Add(time.Hour)
	newInvoice(t, st, m.ID, func(inv *store.Invoice) {
		inv.Status = store.StatusConfirmed
		inv.SweepStatus = store.SweepQueued
		inv.SweepNextAttemptAt = &later
	})
	newInvoice(t, st, m.ID) // not queued

	claimed := claimConcurrently(t, 6, func() ([]int64, error) {
		invs, err := st.ClaimSweeps(ctx, now(), time.Minute, 4)
		return invoiceIDs(invs), err
	})
	require.Len(t, claimed, n, "every due invoice claimed exactly once")

	again, err := st.ClaimSweeps(ctx, now().Add(30*time.Second), time.Minute, 100)
	require.NoError(t, err)
	require.Empty(t, again, "leases are still live")
	expired, err := st.ClaimSweeps(ctx, now().Add(2*time.Minute), time.Minute, 100)
	require.NoError(t, err)
	require.Len(t, expired, n, "expired leases are claimable again")
}

func testSweepTxs(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	wallet := randAddr()
	mk := func(kind string, invoiceID *int64) store.SweepTx {
		tx := store.SweepTx{InvoiceID: invoiceID, Kind: kind, From: wallet, To: inv.DepositAddress,
			Nonce: 3, ValueWei: maxUint256(), GasLimit: 21000, MaxFeeWei: store.NewAmount(2e9),
			MaxPriorityFeeWei: store.NewAmount(1e9), TxHash: randHash(), RawTx: randBytes(110),
			Status: store.SweepTxSigned, CreatedAt: now(), UpdatedAt: now()}
		require.NoError(t, st.CreateSweepTx(ctx, &tx))
		require.NotZero(t, tx.ID)
		return tx
	}
	funding := mk(store.SweepTxFunding, &inv.ID)
	topUp := mk(store.SweepTxTopUp, nil)

	dup := funding
	require.ErrorIs(t, st.CreateSweepTx(ctx, &dup), store.ErrConflict, "a tx hash is stored once")

	mined := now().Add(time.Minute)
	block, gas := uint64(12), uint64(21000)
	fee := store.NewAmount(21000 * 2e9)
	funding.Status = store.SweepTxMined
	funding.BlockNumber = &block
	funding.GasUsed = &gas
	funding.FeeWei = &fee
	funding.MinedAt = &mined
	funding.SentAt = &mined
	require.NoError(t, st.UpdateSweepTx(ctx, funding))

	byInvoice, err := st.ListSweepTxsByInvoice(ctx, inv.ID)
	require.NoError(t, err)
	require.Len(t, byInvoice, 1)
	require.Equal(t, funding.RawTx, byInvoice[0].RawTx)
	require.Equal(t, maxUint256(), byInvoice[0].ValueWei)
	require.Equal(t, fee, *byInvoice[0].FeeWei)
	require.EqualValues(t, 12, *byInvoice[0].BlockNumber)

	signed, err := st.ListSweepTxsByStatus(ctx, []string{store.SweepTxSigned, store.SweepTxSent}, 10)
	require.NoError(t, err)
	require.Len(t, signed, 1)
	require.Equal(t, topUp.ID, signed[0].ID)
	require.Nil(t, signed[0].InvoiceID)

	spent, err := st.ListSweepTxsMinedSince(ctx, wallet, now())
	require.NoError(t, err)
	require.Len(t, spent, 1)
	none, err := st.ListSweepTxsMinedSince(ctx, wallet, mined.Add(time.Second))
	require.NoError(t, err)
	require.Empty(t, none)
}

func testReserveNonce(t *testing.T, st store.Store) {
	wallet := randAddr()
	n, err := st.ReserveNonce(ctx, wallet, 5)
	require.NoError(t, err)
	require.EqualValues(t, 5, n, "first use starts at the chain's nonce")
	n, err = st.ReserveNonce(ctx, wallet, 5)
	require.NoError(t, err)
	require.EqualValues(t, 6, n, "the stored nonce wins when ahead of the chain")
	n, err = st.ReserveNonce(ctx, wallet, 10)
	require.NoError(t, err)
	require.EqualValues(t, 10, n, "the chain's nonce wins when ahead")

	const workers = 30
	var wg sync.WaitGroup
	got := make(chan uint64, workers)
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := st.ReserveNonce(ctx, wallet, 0)
			if err == nil {
				got <- n
			}
		}()
	}
	wg.Wait()
	close(got)
	seen := map[uint64]bool{}
	for n := range got {
		require.False(t, seen[n], "nonce %d reserved twice", n)
		seen[n] = true
	}
	require.Len(t, seen, workers)
	for i := uint64(11); i < 11+workers; i++ {
		require.True(t, seen[i], "nonce %d skipped", i)
	}
}
