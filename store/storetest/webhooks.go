package storetest

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
)

func webhookTests() []test {
	return []test{
		{"Event_InsertClaimDispatch", testEvents},
		{"Delivery_CRUD", testDeliveries},
		{"Event_GetEvents", testGetEvents},
		{"Event_DispatchCreatesOneDeliveryEach", testDispatchEvents},
		{"Event_DispatchConcurrently", testDispatchEventsConcurrently},
		{"Delivery_ClaimPerMerchantCapAndExclusion", testClaimDeliveriesFair},
		{"Delivery_ClaimFairConcurrently", testClaimDeliveriesFairConcurrently},
		{"Delivery_ClaimWithEvents_EachWithItsEventAndMerchant", testClaimDeliveriesWithEvents},
		{"Delivery_LeaseFencing", testDeliveryLeaseFencing},
		{"Delivery_ExpiredLeaseTakenOver", testDeliveryLeaseTakeover},
		{"Delivery_RecordAttemptsInBulk_FencedEachByItsLease", testRecordDeliveryAttempts},
		{"Delivery_Replay", testReplayDelivery},
		{"Delivery_ReplayFailedSince", testReplayFailedDeliveries},
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
	var snap api.Invoice
	require.NoError(t, json.Unmarshal(got.Data, &snap))
	require.Equal(t, inv.ID, snap.ID)
	require.Equal(t, inv.AmountWei, snap.Amount)
	require.NotContains(t, string(got.Data), "lookup_token", "the snapshot carries no secret")

	list, err := st.ListEventsByInvoice(ctx, inv.ID)
	require.NoError(t, err)
	require.Equal(t, []int64{e1.ID, e2.ID}, []int64{list[0].ID, list[1].ID})

	n, err := st.DispatchEvents(ctx, now(), now(), 1)
	require.NoError(t, err)
	require.Equal(t, 1, n, "one event dispatched: the oldest")
	got, err = st.GetEvent(ctx, e1.ID)
	require.NoError(t, err)
	require.NotNil(t, got.DispatchedAt)
	got, err = st.GetEvent(ctx, e2.ID)
	require.NoError(t, err)
	require.Nil(t, got.DispatchedAt)
	n, err = st.DispatchEvents(ctx, now(), now(), 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = st.DispatchEvents(ctx, now(), now(), 10)
	require.NoError(t, err)
	require.Zero(t, n, "each event is dispatched once")
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

func testGetEvents(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	e1 := newEvent(t, st, inv, store.EventInvoicePaid)
	e2 := newEvent(t, st, inv, store.EventInvoiceConfirmed)
	got, err := st.GetEvents(ctx, []int64{e2.ID, e1.ID, e2.ID + 100})
	require.NoError(t, err)
	require.Len(t, got, 2, "missing ids are left out")
	require.Equal(t, e1.ID, got[0].ID)
	require.Equal(t, e2.ID, got[1].ID)
	require.JSONEq(t, string(e2.Data), string(got[1].Data))
	none, err := st.GetEvents(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, none)
}

func testDispatchEvents(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	evs := []store.Event{
		newEvent(t, st, inv, store.EventInvoicePaid),
		newEvent(t, st, inv, store.EventInvoiceConfirmed),
		newEvent(t, st, inv, store.EventInvoiceSettled),
	}
	at := now().Add(time.Minute)
	due := at.Add(time.Second)
	n, err := st.DispatchEvents(ctx, at, due, 2)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, err = st.DispatchEvents(ctx, at, due, 2)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = st.DispatchEvents(ctx, at, due, 2)
	require.NoError(t, err)
	require.Zero(t, n, "every event is dispatched once")

	ds, err := st.ListDeliveries(ctx, store.DeliveryFilter{MerchantID: m.ID})
	require.NoError(t, err)
	require.Len(t, ds, 3)
	for i, d := range ds { // newest first
		ev := evs[len(evs)-1-i]
		require.Equal(t, ev.ID, d.EventID)
		require.Equal(t, ev.Type, d.EventType)
		require.Equal(t, inv.ID, d.InvoiceID)
		require.Equal(t, store.DeliveryPending, d.Status)
		require.Zero(t, d.Attempt)
		require.False(t, d.Delivered)
		require.Nil(t, d.LockedUntil)
		requireTimePtr(t, &due, d.NextAttemptAt)
		requireTime(t, at, d.CreatedAt)
		got, err := st.GetEvent(ctx, ev.ID)
		require.NoError(t, err)
		requireTimePtr(t, &at, got.DispatchedAt)
	}
}

func testDispatchEventsConcurrently(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	const n = 60
	for i := 0; i < n; i++ {
		newEvent(t, st, inv, store.EventInvoicePaid)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k, err := st.DispatchEvents(ctx, now(), now(), 7)
				if err != nil {
					t.Error(err)
					return
				}
				if k == 0 {
					return
				}
				mu.Lock()
				total += k
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Equal(t, n, total, "each event dispatched by exactly one caller")
	ds, err := st.ListDeliveries(ctx, store.DeliveryFilter{MerchantID: m.ID, Limit: 1000})
	require.NoError(t, err)
	require.Len(t, ds, n)
}

func deliveryIDs(ds []store.Delivery) []int64 {
	ids := make([]int64, len(ds))
	for i := range ds {
		ids[i] = ds[i].ID
	}
	return ids
}

func testClaimDeliveriesFair(t *testing.T, st store.Store) {
	var (
		ms   [3]store.Merchant
		due  [3][]store.Delivery
		base = now().Add(-time.Hour)
	)
	for i := range ms {
		ms[i] = newMerchant(t, st)
		inv := newInvoice(t, st, ms[i].ID)
		for k := 0; k < 5; k++ {
			due[i] = append(due[i], newDelivery(t, st, newEvent(t, st, inv, store.EventInvoicePaid),
				base.Add(time.Duration(k*3+i)*time.Second)))
		}
	}
	got, err := st.ClaimDeliveries(ctx, store.DeliveryClaim{Now: now(), Lease: time.Minute, Limit: 10,
		PerMerchant: 2, ExcludeMerchants: []int64{ms[2].ID}})
	require.NoError(t, err)
	require.Equal(t, []int64{due[0][0].ID, due[1][0].ID, due[0][1].ID, due[1][1].ID}, deliveryIDs(got),
		"two per merchant, oldest due first, none of the excluded merchant")
	for _, d := range got {
		requireTimePtr(t, webhookPtr(now().Add(time.Minute)), d.LockedUntil)
	}

	got, err = st.ClaimDeliveries(ctx, store.DeliveryClaim{Now: now(), Lease: time.Minute, Limit: 3})
	require.NoError(t, err)
	require.Equal(t, []int64{due[2][0].ID, due[2][1].ID, due[0][2].ID}, deliveryIDs(got),
		"no cap: the oldest due deliveries not leased")

	got, err = st.ClaimDeliveries(ctx, store.DeliveryClaim{Now: base, Lease: time.Minute, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, got, "nothing is due yet at base (the leased ones are not free either)")
}

func webhookPtr[T any](v T) *T { return &v }

func testClaimDeliveriesWithEvents(t *testing.T, st store.Store) {
	var (
		ms   [2]store.Merchant
		evs  = map[int64]store.Event{}
		due  [2][]store.Delivery
		base = now().Add(-time.Hour)
	)
	for i := range ms {
		ms[i] = newMerchant(t, st)
		inv := newInvoice(t, st, ms[i].ID)
		for k := 0; k < 3; k++ {
			ev := newEvent(t, st, inv, store.EventInvoicePaid)
			d := newDelivery(t, st, ev, base.Add(time.Duration(k*2+i)*time.Second))
			evs[d.ID], due[i] = ev, append(due[i], d)
		}
	}
	// A delivery whose merchant is gone (the schema does not tie them).
	orphanEv := newEvent(t, st, newInvoice(t, st, ms[0].ID), store.EventInvoiceExpired)
	orphan := store.Delivery{EventID: orphanEv.ID, MerchantID: ms[1].ID + 1000, InvoiceID: orphanEv.InvoiceID,
		EventType: orphanEv.Type, Status: store.DeliveryPending, NextAttemptAt: webhookPtr(base.Add(-time.Second)),
		CreatedAt: now(), UpdatedAt: now()}
	require.NoError(t, st.CreateDelivery(ctx, &orphan))
	evs[orphan.ID] = orphanEv

	check := func(got []store.ClaimedDelivery, want []int64) {
		t.Helper()
		ids := make([]int64, len(got))
		for i, c := range got {
			ids[i] = c.ID
			requireTimePtr(t, webhookPtr(now().Add(time.Minute)), c.LockedUntil)
			require.NotNil(t, c.Event, "delivery %d has its event", c.ID)
			ev := evs[c.ID]
			require.Equal(t, ev.ID, c.Event.ID)
			require.Equal(t, ev.Type, c.Event.Type)
			require.Equal(t, ev.InvoiceID, c.Event.InvoiceID)
			require.JSONEq(t, string(ev.Data), string(c.Event.Data))
			requireTime(t, ev.CreatedAt, c.Event.CreatedAt)
			if c.ID == orphan.ID {
				require.Nil(t, c.Merchant, "the orphan's merchant does not exist")
				continue
			}
			require.NotNil(t, c.Merchant)
			m := ms[0]
			if c.MerchantID == ms[1].ID {
				m = ms[1]
			}
			require.Equal(t, m.ID, c.Merchant.ID)
			require.Equal(t, m.WebhookURL, c.Merchant.WebhookURL)
			require.Equal(t, m.WebhookSecretCiphertext, c.Merchant.WebhookSecretCiphertext)
			require.Equal(t, m.SettlementAddress, c.Merchant.SettlementAddress)
			require.Nil(t, c.Merchant.DisabledAt)
		}
		require.Equal(t, want, ids)
	}
	got, err := st.ClaimDeliveriesWithEvents(ctx, store.DeliveryClaim{Now: now(), Lease: time.Minute, Limit: 10,
		PerMerchant: 2, ExcludeMerchants: []int64{ms[1].ID}})
	require.NoError(t, err)
	check(got, []int64{orphan.ID, due[0][0].ID, due[0][1].ID})

	got, err = st.ClaimDeliveriesWithEvents(ctx, store.DeliveryClaim{Now: now(), Lease: time.Minute, Limit: 10, PerMerchant: 2})
	require.NoError(t, err)
	check(got, []int64{due[1][0].ID, due[1][1].ID, due[0][2].ID})

	got, err = st.ClaimDeliveriesWithEvents(ctx, store.DeliveryClaim{Now: now(), Lease: time.Minute, Limit: 10})
	require.NoError(t, err)
	check(got, []int64{due[1][2].ID})
	got, err = st.ClaimDeliveriesWithEvents(ctx, store.DeliveryClaim{Now: now(), Lease: time.Minute, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, got, "everything due is leased")
}

func testClaimDeliveriesFairConcurrently(t *testing.T, st store.Store) {
	const perMerchant = 15
	for i := 0; i < 3; i++ {
		m := newMerchant(t, st)
		inv := newInvoice(t, st, m.ID)
		for k := 0; k < perMerchant; k++ {
			newDelivery(t, st, newEvent(t, st, inv, store.EventInvoicePaid), now().Add(-time.Duration(k)*time.Second))
		}
	}
	claimed := claimConcurrently(t, 5, func() ([]int64, error) {
		ds, err := st.ClaimDeliveries(ctx, store.DeliveryClaim{Now: now(), Lease: time.Minute, Limit: 4, PerMerchant: 1})
		return deliveryIDs(ds), err
	})
	require.Len(t, claimed, 3*perMerchant)
}

func testDeliveryLeaseFencing(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	d := newDelivery(t, st, newEvent(t, st, inv, store.EventInvoicePaid), now())
	ds, err := st.ClaimDeliveries(ctx, store.DeliveryClaim{Now: now(), Lease: time.Minute})
	require.NoError(t, err)
	require.Len(t, ds, 1)
	held := *ds[0].LockedUntil

	_, err = st.RenewDeliveryLease(ctx, d.ID, held.Add(time.Second), now().Add(time.Hour))
	require.ErrorIs(t, err, store.ErrConflict, "renewing a lease not held")
	renewed, err := st.RenewDeliveryLease(ctx, d.ID, held, now().Add(2*time.Minute))
	require.NoError(t, err)
	requireTime(t, now().Add(2*time.Minute), renewed)

	rec := ds[0]
	status := 200
	rec.Status = store.DeliveryDelivered
	rec.Delivered = true
	rec.ResponseStatus = &status
	rec.Attempt = 1
	rec.LastAttemptAt = webhookPtr(now())
	rec.NextAttemptAt = nil
	rec.UpdatedAt = now()
	require.ErrorIs(t, st.RecordDeliveryAttempt(ctx, rec, held), store.ErrConflict, "the old lease is gone")
	require.NoError(t, st.RecordDeliveryAttempt(ctx, rec, renewed))
	got, err := st.GetDelivery(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, store.DeliveryDelivered, got.Status)
	require.True(t, got.Delivered)
	require.Equal(t, 1, got.Attempt)
	require.Nil(t, got.LockedUntil, "recording clears the lease")
	require.Nil(t, got.NextAttemptAt)
	require.ErrorIs(t, st.RecordDeliveryAttempt(ctx, rec, renewed), store.ErrConflict, "recorded once")
	require.ErrorIs(t, st.ReleaseDeliveryLease(ctx, d.ID, renewed), store.ErrConflict)

	d2 := newDelivery(t, st, newEvent(t, st, inv, store.EventInvoicePaid), now())
	ds, err = st.ClaimDeliveries(ctx, store.DeliveryClaim{Now: now(), Lease: time.Minute})
	require.NoError(t, err)
	require.Equal(t, []int64{d2.ID}, deliveryIDs(ds))
	require.NoError(t, st.ReleaseDeliveryLease(ctx, d2.ID, *ds[0].LockedUntil))
	ds, err = st.ClaimDeliveries(ctx, store.DeliveryClaim{Now: now(), Lease: time.Minute})
	require.NoError(t, err)
	require.Equal(t, []int64{d2.ID}, deliveryIDs(ds), "a released delivery is claimable at once")
}

func testDeliveryLeaseTakeover(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	d := newDelivery(t, st, newEvent(t, st, inv, store.EventInvoicePaid), now())
	first, err := st.ClaimDeliveries(ctx, store.DeliveryClaim{Now: now(), Lease: time.Minute})
	require.NoError(t, err)
	require.Len(t, first, 1)
	none, err := st.ClaimDeliveries(ctx, store.DeliveryClaim{Now: now().Add(59 * time.Second), Lease: time.Minute})
	require.NoError(t, err)
	require.Empty(t, none, "a live lease is not claimable")
	later := now().Add(61 * time.Second)
	second, err := st.ClaimDeliveries(ctx, store.DeliveryClaim{Now: later, Lease: time.Minute})
	require.NoError(t, err)
	require.Equal(t, []int64{d.ID}, deliveryIDs(second), "an expired lease is claimable")

	rec := first[0]
	rec.Attempt = 1
	rec.LastError = "HTTP 500"
	rec.UpdatedAt = later
	require.ErrorIs(t, st.RecordDeliveryAttempt(ctx, rec, *first[0].LockedUntil), store.ErrConflict,
		"the first claimer cannot overwrite the second's work")
	rec.LastError = "HTTP 503"
	require.NoError(t, st.RecordDeliveryAttempt(ctx, rec, *second[0].LockedUntil))
	got, err := st.GetDelivery(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, "HTTP 503", got.LastError)
}

func failDelivery(t *testing.T, st store.Store, d store.Delivery, status string) store.Delivery {
	t.Helper()
	d.Status = status
	d.Delivered = status == store.DeliveryDelivered
	d.Attempt = 8
	d.LastAttemptAt = webhookPtr(now())
	d.NextAttemptAt = nil
	d.LastError = "HTTP 500"
	require.NoError(t, st.UpdateDelivery(ctx, d))
	return d
}

func testReplayDelivery(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	other := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	failed := failDelivery(t, st, newDelivery(t, st, newEvent(t, st, inv, store.EventInvoicePaid), now()), store.DeliveryFailed)
	delivered := failDelivery(t, st, newDelivery(t, st, newEvent(t, st, inv, store.EventInvoicePaid), now()), store.DeliveryDelivered)
	pending := newDelivery(t, st, newEvent(t, st, inv, store.EventInvoicePaid), now())

	at := now().Add(time.Hour)
	got, err := st.ReplayDelivery(ctx, m.ID, failed.ID, at)
	require.NoError(t, err)
	require.Equal(t, failed.ID, got.ID)
	require.Equal(t, failed.EventID, got.EventID, "the same event: the same webhook id")
	require.Equal(t, store.DeliveryPending, got.Status)
	require.Zero(t, got.Attempt, "a replay starts a new run of the ladder")
	requireTimePtr(t, &at, got.NextAttemptAt)
	require.Nil(t, got.LockedUntil)
	requireTime(t, at, got.UpdatedAt)
	require.Equal(t, "HTTP 500", got.LastError, "the last error stays until the next attempt")

	got, err = st.ReplayDelivery(ctx, m.ID, delivered.ID, at)
	require.NoError(t, err)
	require.Equal(t, store.DeliveryPending, got.Status)
	require.False(t, got.Delivered)

	_, err = st.ReplayDelivery(ctx, m.ID, pending.ID, at)
	require.ErrorIs(t, err, store.ErrConflict, "a pending delivery is already on its way")
	_, err = st.ReplayDelivery(ctx, other.ID, failed.ID, at)
	require.ErrorIs(t, err, store.ErrNotFound, "another merchant's delivery is invisible")
	_, err = st.ReplayDelivery(ctx, m.ID, pending.ID+100, at)
	require.ErrorIs(t, err, store.ErrNotFound)

	ds, err := st.ClaimDeliveries(ctx, store.DeliveryClaim{Now: at, Lease: time.Minute})
	require.NoError(t, err)
	require.ElementsMatch(t, []int64{failed.ID, delivered.ID, pending.ID}, deliveryIDs(ds))
}

func testReplayFailedDeliveries(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	other := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	otherInv := newInvoice(t, st, other.ID)
	mk := func(inv store.Invoice, created time.Time, status string) store.Delivery {
		ev := newEvent(t, st, inv, store.EventInvoicePaid)
		d := store.Delivery{EventID: ev.ID, MerchantID: ev.MerchantID, InvoiceID: ev.InvoiceID,
			EventType: ev.Type, Status: store.DeliveryPending, NextAttemptAt: &created,
			CreatedAt: created, UpdatedAt: created}
		require.NoError(t, st.CreateDelivery(ctx, &d))
		if status != store.DeliveryPending {
			d = failDelivery(t, st, d, status)
		}
		return d
	}
	since := now().Add(-time.Hour)
	old := mk(inv, since.Add(-time.Second), store.DeliveryFailed)
	recent1 := mk(inv, since, store.DeliveryFailed)
	recent2 := mk(inv, since.Add(time.Minute), store.DeliveryFailed)
	mk(inv, since.Add(time.Minute), store.DeliveryDelivered)
	mk(inv, since.Add(time.Minute), store.DeliveryPending)
	otherFailed := mk(otherInv, since.Add(time.Minute), store.DeliveryFailed)

	n, err := st.ReplayFailedDeliveries(ctx, m.ID, since, now())
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	for _, d := range []store.Delivery{recent1, recent2} {
		got, err := st.GetDelivery(ctx, d.ID)
		require.NoError(t, err)
		require.Equal(t, store.DeliveryPending, got.Status)
		require.Zero(t, got.Attempt)
		requireTimePtr(t, webhookPtr(now()), got.NextAttemptAt)
	}
	for _, d := range []store.Delivery{old, otherFailed} {
		got, err := st.GetDelivery(ctx, d.ID)
		require.NoError(t, err)
		require.Equal(t, store.DeliveryFailed, got.Status, "older or another merchant's: untouched")
	}
}

func testRecordDeliveryAttempts(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	for range 3 {
		newDelivery(t, st, newEvent(t, st, inv, store.EventInvoicePaid), now())
	}
	ds, err := st.ClaimDeliveries(ctx, store.DeliveryClaim{Now: now(), Lease: time.Minute})
	require.NoError(t, err)
	require.Len(t, ds, 3)

	ok, err := st.RecordDeliveryAttempts(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, ok)

	status := 200
	delivered := ds[0]
	delivered.Status, delivered.Delivered, delivered.ResponseStatus = store.DeliveryDelivered, true, &status
	delivered.Attempt, delivered.LastAttemptAt, delivered.NextAttemptAt = 1, webhookPtr(now()), nil
	delivered.UpdatedAt = now()
	retry := ds[1]
	retry.Attempt, retry.LastAttemptAt, retry.NextAttemptAt = 1, webhookPtr(now()), webhookPtr(now().Add(5*time.Second))
	retry.LastError, retry.ResponseStatus, retry.UpdatedAt = "timeout after 15s", nil, now()
	stale := ds[2]
	stale.Attempt, stale.LastError = 1, "HTTP 500"

	ok, err = st.RecordDeliveryAttempts(ctx, []store.DeliveryAttempt{
		{Delivery: delivered, Held: *ds[0].LockedUntil},
		{Delivery: stale, Held: ds[2].LockedUntil.Add(time.Second)}, // a lease this claimer does not hold
		{Delivery: retry, Held: *ds[1].LockedUntil},
	})
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, true}, ok)

	got, err := st.GetDelivery(ctx, delivered.ID)
	require.NoError(t, err)
	require.Equal(t, store.DeliveryDelivered, got.Status)
	require.True(t, got.Delivered)
	require.Equal(t, &status, got.ResponseStatus)
	require.Equal(t, 1, got.Attempt)
	require.Nil(t, got.LockedUntil, "recording clears the lease")
	require.Nil(t, got.NextAttemptAt)

	got, err = st.GetDelivery(ctx, retry.ID)
	require.NoError(t, err)
	require.Equal(t, store.DeliveryPending, got.Status)
	require.Nil(t, got.ResponseStatus)
	require.Equal(t, "timeout after 15s", got.LastError)
	require.NotNil(t, got.NextAttemptAt)
	requireTime(t, now().Add(5*time.Second), *got.NextAttemptAt)
	require.Nil(t, got.LockedUntil)

	got, err = st.GetDelivery(ctx, stale.ID)
	require.NoError(t, err)
	require.Zero(t, got.Attempt, "the attempt whose lease is not held changed nothing")
	requireTimePtr(t, ds[2].LockedUntil, got.LockedUntil)

	ok, err = st.RecordDeliveryAttempts(ctx, []store.DeliveryAttempt{{Delivery: delivered, Held: *ds[0].LockedUntil}})
	require.NoError(t, err)
	require.Equal(t, []bool{false}, ok, "recorded once")
}
