package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func sweepTests() []test {
	return []test{
		{"Sweep_ClaimSweepsConcurrently", testClaimSweeps},
		{"Sweep_Txs", testSweepTxs},
		{"Sweep_ReserveNonceConcurrently", testReserveNonce},
		{"Sweep_OneLiveTxPerNonce", testSweepTxOneLivePerNonce},
		{"Sweep_OneLiveSweepPerDepositAddress", testSweepTxOneLiveSweep},
		{"Sweep_ListUnminedSweepTxs", testListUnminedSweepTxs},
		{"Sweep_ListInvoicesBySweepStatus", testListInvoicesBySweepStatus},
		{"Sweep_ListSweepTxsByNonce", testListSweepTxsByNonce},
		{"Sweep_ListFailedSweepTxs", testListFailedSweepTxs},
		{"Sweep_IsDepositAddress", testIsDepositAddress},
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
	mk := func(kind string, invoiceID *int64, nonce uint64) store.SweepTx {
		tx := store.SweepTx{InvoiceID: invoiceID, Kind: kind, From: wallet, To: inv.DepositAddress,
			Nonce: nonce, ValueWei: maxUint256(), GasLimit: 21000, MaxFeeWei: store.NewAmount(2e9),
			MaxPriorityFeeWei: store.NewAmount(1e9), TxHash: randHash(), RawTx: randBytes(110),
			Status: store.SweepTxSigned, CreatedAt: now(), UpdatedAt: now()}
		require.NoError(t, st.CreateSweepTx(ctx, &tx))
		require.NotZero(t, tx.ID)
		return tx
	}
	funding := mk(store.SweepTxFunding, &inv.ID, 3)
	topUp := mk(store.SweepTxTopUp, nil, 4)

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
	sentBlock := uint64(11)
	funding.SentBlock = &sentBlock
	funding.LastError = "nonce too low"
	require.NoError(t, st.UpdateSweepTx(ctx, funding))

	byInvoice, err := st.ListSweepTxsByInvoice(ctx, inv.ID)
	require.NoError(t, err)
	require.Len(t, byInvoice, 1)
	require.Equal(t, funding.RawTx, byInvoice[0].RawTx)
	require.Equal(t, maxUint256(), byInvoice[0].ValueWei)
	require.Equal(t, fee, *byInvoice[0].FeeWei)
	require.EqualValues(t, 12, *byInvoice[0].BlockNumber)
	require.EqualValues(t, 11, *byInvoice[0].SentBlock)
	require.Equal(t, "nonce too low", byInvoice[0].LastError)
	require.Nil(t, topUp.SentBlock)

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

func newSweepTx(t *testing.T, st store.Tx, kind string, invoiceID *int64, from, to common.Address, nonce uint64, status string) store.SweepTx {
	t.Helper()
	tx := store.SweepTx{InvoiceID: invoiceID, Kind: kind, From: from, To: to, Nonce: nonce,
		ValueWei: store.NewAmount(1), GasLimit: 21000, MaxFeeWei: store.NewAmount(2e9),
		MaxPriorityFeeWei: store.NewAmount(1e9), TxHash: randHash(), RawTx: randBytes(110),
		Status: status, CreatedAt: now(), UpdatedAt: now()}
	require.NoError(t, st.CreateSweepTx(ctx, &tx))
	return tx
}

func testSweepTxOneLivePerNonce(t *testing.T, st store.Store) {
	wallet, to := randAddr(), randAddr()
	first := newSweepTx(t, st, store.SweepTxFunding, nil, wallet, to, 7, store.SweepTxSent)

	dup := first
	dup.TxHash = randHash()
	require.ErrorIs(t, st.CreateSweepTx(ctx, &dup), store.ErrConflict,
		"a second live transaction for one (sender, kind, nonce)")

	// A replacement: the first is superseded and the new one stored, in one
	// transaction.
	var second store.SweepTx
	require.NoError(t, st.InTx(ctx, func(tx store.Tx) error {
		first.Status = store.SweepTxReplaced
		if err := tx.UpdateSweepTx(ctx, first); err != nil {
			return err
		}
		second = newSweepTx(t, tx, store.SweepTxFunding, nil, wallet, to, 7, store.SweepTxSigned)
		return nil
	}))
	// The replaced one turned out to be mined: it cannot become live again
	// while the replacement is.
	first.Status = store.SweepTxMined
	require.ErrorIs(t, st.UpdateSweepTx(ctx, first), store.ErrConflict)
	second.Status = store.SweepTxReplaced
	require.NoError(t, st.UpdateSweepTx(ctx, second))
	require.NoError(t, st.UpdateSweepTx(ctx, first))

	newSweepTx(t, st, store.SweepTxFunding, nil, wallet, to, 8, store.SweepTxSigned)
	newSweepTx(t, st, store.SweepTxFunding, nil, randAddr(), to, 7, store.SweepTxSigned)
	failed := newSweepTx(t, st, store.SweepTxFunding, nil, wallet, to, 9, store.SweepTxFailed)
	require.Equal(t, store.SweepTxFailed, failed.Status)
	newSweepTx(t, st, store.SweepTxFunding, nil, wallet, to, 9, store.SweepTxSigned)
}

func testSweepTxOneLiveSweep(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	deposit := inv.DepositAddress
	first := newSweepTx(t, st, store.SweepTxSweep, &inv.ID, deposit, m.SettlementAddress, 0, store.SweepTxSigned)
	dup := first
	dup.TxHash, dup.Nonce = randHash(), 1
	require.ErrorIs(t, st.CreateSweepTx(ctx, &dup), store.ErrConflict,
		"a deposit address is never swept twice, whatever the nonce")
	// Transactions from the deposit address of another kind are not sweeps.
	newSweepTx(t, st, store.SweepTxFunding, &inv.ID, deposit, m.SettlementAddress, 1, store.SweepTxSigned)

	// A wrong-asset token's sweep from the same deposit (its next nonce) is
	// another asset: allowed once per token, and stored with its token.
	token, other := randAddr(), randAddr()
	wrong := first
	wrong.TxHash, wrong.Nonce, wrong.To, wrong.WrongToken = randHash(), 1, token, &token
	require.NoError(t, st.CreateSweepTx(ctx, &wrong))
	again := wrong
	again.TxHash, again.Nonce = randHash(), 2
	require.ErrorIs(t, st.CreateSweepTx(ctx, &again), store.ErrConflict, "a wrong token is swept once")
	again.WrongToken, again.To, again.Nonce = &other, other, 3
	require.NoError(t, st.CreateSweepTx(ctx, &again), "another wrong token")
	txs, err := st.ListSweepTxsByInvoice(ctx, inv.ID)
	require.NoError(t, err)
	require.Len(t, txs, 4)
	require.Nil(t, txs[0].WrongToken, "the invoice's own sweep")
	require.Equal(t, &token, txs[2].WrongToken, "read back with its token")

	first.Status = store.SweepTxFailed
	require.NoError(t, st.UpdateSweepTx(ctx, first))
	newSweepTx(t, st, store.SweepTxSweep, &inv.ID, deposit, m.SettlementAddress, 2, store.SweepTxSigned)
}

func testListUnminedSweepTxs(t *testing.T, st store.Store) {
	wallet, to := randAddr(), randAddr()
	n5 := newSweepTx(t, st, store.SweepTxFunding, nil, wallet, to, 5, store.SweepTxSent)
	n3 := newSweepTx(t, st, store.SweepTxFunding, nil, wallet, to, 3, store.SweepTxSigned)
	newSweepTx(t, st, store.SweepTxFunding, nil, wallet, to, 2, store.SweepTxMined)
	newSweepTx(t, st, store.SweepTxFunding, nil, wallet, to, 4, store.SweepTxReplaced)
	newSweepTx(t, st, store.SweepTxFunding, nil, wallet, to, 4, store.SweepTxFailed)
	newSweepTx(t, st, store.SweepTxFunding, nil, randAddr(), to, 1, store.SweepTxSigned)

	got, err := st.ListUnminedSweepTxs(ctx, wallet)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, n3.ID, got[0].ID, "by nonce")
	require.Equal(t, n5.ID, got[1].ID)
}

func testListInvoicesBySweepStatus(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	var failed []int64
	for i := 0; i < 5; i++ {
		status := store.SweepFailed
		if i%2 == 1 {
			status = store.SweepQueued
		}
		inv := newInvoice(t, st, m.ID, func(inv *store.Invoice) {
			inv.Status = store.StatusConfirmed
			inv.SweepStatus = status
			inv.SweepError = "insufficient gas"
		})
		if status == store.SweepFailed {
			failed = append(failed, inv.ID)
		}
	}
	first, err := st.ListInvoicesBySweepStatus(ctx, store.SweepFailed, 0, 2)
	require.NoError(t, err)
	require.Equal(t, failed[:2], invoiceIDs(first))
	require.Equal(t, "insufficient gas", first[0].SweepError)
	rest, err := st.ListInvoicesBySweepStatus(ctx, store.SweepFailed, first[1].ID, 0)
	require.NoError(t, err)
	require.Equal(t, failed[2:], invoiceIDs(rest))
}

func testListSweepTxsByNonce(t *testing.T, st store.Store) {
	funder, wallet := randAddr(), randAddr()
	a := newSweepTx(t, st, store.SweepTxTopUp, nil, funder, wallet, 4, store.SweepTxReplaced)
	b := newSweepTx(t, st, store.SweepTxTopUp, nil, funder, wallet, 4, store.SweepTxReplaced)
	c := newSweepTx(t, st, store.SweepTxTopUp, nil, funder, wallet, 4, store.SweepTxSent)
	newSweepTx(t, st, store.SweepTxTopUp, nil, funder, wallet, 5, store.SweepTxSigned)
	newSweepTx(t, st, store.SweepTxFunding, nil, funder, wallet, 4, store.SweepTxSigned)
	newSweepTx(t, st, store.SweepTxTopUp, nil, randAddr(), wallet, 4, store.SweepTxSigned)

	got, err := st.ListSweepTxsByNonce(ctx, funder, store.SweepTxTopUp, 4)
	require.NoError(t, err)
	require.Equal(t, []int64{a.ID, b.ID, c.ID}, []int64{got[0].ID, got[1].ID, got[2].ID})
	require.Len(t, got, 3, "replaced ones included; other nonces, kinds and senders not")
	none, err := st.ListSweepTxsByNonce(ctx, funder, store.SweepTxTopUp, 9)
	require.NoError(t, err)
	require.Empty(t, none)
}

func testListFailedSweepTxs(t *testing.T, st store.Store) {
	funder, wallet := randAddr(), randAddr()
	late := newSweepTx(t, st, store.SweepTxTopUp, nil, funder, wallet, 7, store.SweepTxFailed)
	newSweepTx(t, st, store.SweepTxTopUp, nil, funder, wallet, 7, store.SweepTxSent)
	early := newSweepTx(t, st, store.SweepTxTopUp, nil, funder, wallet, 3, store.SweepTxFailed)
	newSweepTx(t, st, store.SweepTxTopUp, nil, funder, wallet, 4, store.SweepTxReplaced)
	newSweepTx(t, st, store.SweepTxFunding, nil, funder, wallet, 5, store.SweepTxFailed)
	newSweepTx(t, st, store.SweepTxTopUp, nil, randAddr(), wallet, 6, store.SweepTxFailed)

	got, err := st.ListFailedSweepTxs(ctx, funder, store.SweepTxTopUp)
	require.NoError(t, err)
	require.Len(t, got, 2, "FAILED only; other kinds and senders not")
	require.Equal(t, []int64{early.ID, late.ID}, []int64{got[0].ID, got[1].ID}, "by nonce")
	require.Equal(t, store.SweepTxFailed, got[0].Status)
}

func testIsDepositAddress(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	ok, err := st.IsDepositAddress(ctx, inv.DepositAddress)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = st.IsDepositAddress(ctx, randAddr())
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = st.IsDepositAddress(ctx, m.SettlementAddress)
	require.NoError(t, err)
	require.False(t, ok)

	// An archived invoice's address is still the service's.
	old := newInvoice(t, st, m.ID, func(inv *store.Invoice) {
		inv.Status = store.StatusSettled
		inv.CreatedAt = now().Add(-400 * 24 * time.Hour)
	})
	moved, err := st.ArchiveInvoices(ctx, now().Add(-365*24*time.Hour), 10)
	require.NoError(t, err)
	require.GreaterOrEqual(t, moved, 1)
	ok, err = st.IsDepositAddress(ctx, old.DepositAddress)
	require.NoError(t, err)
	require.True(t, ok, "archived")
}
