package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func webhookTests() []test {
	return []test{
		{"Event_InsertClaimDispatch", testEvents},
		{"Delivery_CRUD", testDeliveries},
		{"Delivery_ClaimConcurrently", testClaimDeliveries},
	}
}

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
