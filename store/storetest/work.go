package storetest

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func testEvents(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID, func(i *store.Invoice) { i.Metadata = store.RawJSON(`{"k":"v"}`) })
	e1 := newEvent(t, st, inv, store.EventInvoicePaid)
	e2 := newEvent(t, st, inv, store.EventInvoiceConfirmed)

	got, err := st.GetEvent(ctx, e1.ID)
	require.NoError(t, err)
	require.Equal(t, store.EventInvoicePaid, got.Type)
	require.Equal(t, m.ID, got.MerchantID)
	var snap store.Invoice
	require.NoError(t, json.Unmarshal(got.Data, &snap))
	require.Equal(t, inv.ID, snap.ID)
	require.Equal(t, inv.AmountWei, snap.AmountWei)
	require.Nil(t, snap.LookupTokenHash, "the snapshot carries no secret")
	require.NotContains(t, string(got.Data), "lookup_token")

	list, err := st.ListEventsByInvoice(ctx, inv.ID)
	require.NoError(t, err)
	require.Equal(t, []int64{e1.ID, e2.ID}, []int64{list[0].ID, list[1].ID})

	var claimed []store.Event
	require.NoError(t, st.InTx(ctx, func(tx store.Tx) error {
		claimed, err = tx.ClaimUndispatchedEvents(ctx, 1)
		if err != nil {
			return err
		}
		return tx.MarkEventDispatched(ctx, claimed[0].ID, now())
	}))
	require.Len(t, claimed, 1)
	require.Equal(t, e1.ID, claimed[0].ID, "oldest first")
	rest, err := st.ClaimUndispatchedEvents(ctx, 10)
	require.NoError(t, err)
	require.Len(t, rest, 1)
	require.Equal(t, e2.ID, rest[0].ID)
	require.ErrorIs(t, st.MarkEventDispatched(ctx, e2.ID+100, now()), store.ErrNotFound)
}

func newDelivery(t *testing.T, st store.Tx, ev store.Event, due time.Time) store.Delivery {
	t.Helper()
	d := store.Delivery{EventID: ev.ID, MerchantID: ev.MerchantID, InvoiceID: ev.InvoiceID,
		EventType: ev.Type, Status: store.DeliveryPending, NextAttemptAt: &due,
		CreatedAt: now(), UpdatedAt: now()}
	require.NoError(t, st.CreateDelivery(ctx, &d))
	require.NotZero(t, d.ID)
	return d
}

func testDeliveries(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	ev := newEvent(t, st, inv, store.EventInvoicePaid)
	d := newDelivery(t, st, ev, now())
	dup := d
	require.ErrorIs(t, st.CreateDelivery(ctx, &dup), store.ErrConflict, "one delivery per event")

	status := 503
	last := now().Add(time.Second)
	next := now().Add(5 * time.Second)
	d.Attempt = 1
	d.ResponseStatus = &status
	d.LastAttemptAt = &last
	d.NextAttemptAt = &next
	d.LastError = "HTTP 503"
	d.UpdatedAt = last
	require.NoError(t, st.UpdateDelivery(ctx, d))
	got, err := st.GetDelivery(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, 503, *got.ResponseStatus)
	require.Equal(t, 1, got.Attempt)
	requireTimePtr(t, &next, got.NextAttemptAt)
	require.Equal(t, "HTTP 503", got.LastError)

	got.Status = store.DeliveryFailed
	got.Attempt = 8
	got.ResponseStatus = nil
	require.NoError(t, st.UpdateDelivery(ctx, got))
	got, err = st.GetDelivery(ctx, d.ID)
	require.NoError(t, err)
	require.Nil(t, got.ResponseStatus, "a timeout records no status")

	ev2 := newEvent(t, st, inv, store.EventInvoiceConfirmed)
	newDelivery(t, st, ev2, now())
	failed, err := st.ListDeliveries(ctx, store.DeliveryFilter{MerchantID: m.ID, Status: store.DeliveryFailed})
	require.NoError(t, err)
	require.Len(t, failed, 1)
	require.Equal(t, d.ID, failed[0].ID)
	all, err := st.ListDeliveries(ctx, store.DeliveryFilter{MerchantID: m.ID})
	require.NoError(t, err)
	require.Len(t, all, 2)
	other, err := st.ListDeliveries(ctx, store.DeliveryFilter{MerchantID: m.ID + 1})
	require.NoError(t, err)
	require.Empty(t, other)
	n, err := st.CountDeliveries(ctx, store.DeliveryFailed, 8)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	_, err = st.GetDelivery(ctx, d.ID+100)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testClaimDeliveries(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	const n = 40
	for i := 0; i < n; i++ {
		newDelivery(t, st, newEvent(t, st, inv, store.EventInvoicePaid), now().Add(-time.Duration(i)*time.Second))
	}
	notDue := newDelivery(t, st, newEvent(t, st, inv, store.EventInvoicePaid), now().Add(time.Hour))

	claimed := claimConcurrently(t, 6, func() ([]int64, error) {
		ds, err := st.ClaimDueDeliveries(ctx, now(), time.Minute, 3)
		ids := make([]int64, len(ds))
		for i := range ds {
			ids[i] = ds[i].ID
		}
		return ids, err
	})
	require.Len(t, claimed, n)
	require.False(t, claimed[notDue.ID], "a delivery not yet due is not claimed")
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

func testInTxRollback(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	errBoom := errors.New("boom")
	var invID int64
	err := st.InTx(ctx, func(tx store.Tx) error {
		inv := newInvoice(t, tx, m.ID)
		invID = inv.ID
		newEvent(t, tx, inv, store.EventInvoicePaid)
		blocks, txs := chainOf(0, 1, 2, randHash())
		require.NoError(t, tx.InsertBlocks(ctx, blocks, txs))
		require.NoError(t, tx.SetCursor(ctx, store.Cursor{Name: "x", BlockHash: randHash(), UpdatedAt: now()}))
		got, err := tx.GetInvoice(ctx, inv.ID)
		require.NoError(t, err, "the transaction sees its own writes")
		require.Equal(t, inv.ID, got.ID)
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)
	_, err = st.GetInvoice(ctx, invID)
	require.ErrorIs(t, err, store.ErrNotFound)
	evs, err := st.ListEventsByInvoice(ctx, invID)
	require.NoError(t, err)
	require.Empty(t, evs)
	_, err = st.LatestBlock(ctx)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.GetCursor(ctx, "x")
	require.ErrorIs(t, err, store.ErrNotFound)
	idx, err := st.NextDerivationIndex(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 0, idx)
}

func testInTxPanic(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	var invID int64
	require.Panics(t, func() {
		_ = st.InTx(ctx, func(tx store.Tx) error {
			invID = newInvoice(t, tx, m.ID).ID
			panic("crash mid-transaction")
		})
	})
	_, err := st.GetInvoice(ctx, invID)
	require.ErrorIs(t, err, store.ErrNotFound)
	// The store still works after the panic.
	newInvoice(t, st, m.ID)
}

func testLock(t *testing.T, st store.Store) {
	l, err := st.TryLock(ctx, "settlement")
	require.NoError(t, err)
	_, err = st.TryLock(ctx, "settlement")
	require.ErrorIs(t, err, store.ErrLocked)
	other, err := st.TryLock(ctx, "indexer")
	require.NoError(t, err, "locks are per name")
	require.NoError(t, other.Unlock())
	select {
	case <-l.Lost():
		t.Fatal("a held lock reports lost")
	default:
	}
	require.NoError(t, l.Unlock())
	require.NoError(t, l.Unlock(), "unlock twice is safe")
	l2, err := st.TryLock(ctx, "settlement")
	require.NoError(t, err, "released locks can be taken again")
	require.NoError(t, l2.Unlock())
}
