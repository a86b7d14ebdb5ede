package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func invoiceTests() []test {
	return []test{
		{"Merchant_CRUD", testMerchantCRUD},
		{"Merchant_DuplicateDigest_Conflict", testMerchantConflict},
		{"Invoice_CreateGetUpdate", testInvoiceCRUD},
		{"Invoice_StaleVersion_Conflict", testInvoiceStaleVersion},
		{"Invoice_UniqueColumns_Conflict", testInvoiceUnique},
		{"Invoice_ListFiltersAndPages", testInvoiceList},
		{"Invoice_ListSeveralStatuses_MergedNewestFirst", testInvoiceListStatuses},
		{"Invoice_ListExpiring", testInvoiceExpiring},
		{"Invoice_DerivationIndexHasNoGaps", testDerivationIndex},
		{"Invoice_ConcurrentDerivationIndexesUnique", testDerivationIndexConcurrent},
		{"Invoice_Archive", testArchive},
		{"Invoice_Archive_OldestFirst", testArchiveOldestFirst},
		{"Idempotency_Records", testIdempotency},
		{"Merchant_GetForUpdate", testMerchantForUpdate},
		{"Idempotency_ClaimExpiredLease", testIdempotencyClaim},
		{"Idempotency_ClaimConcurrently_OneWinner", testIdempotencyClaimConcurrent},
		{"Idempotency_CompleteOnlyUnderOwnLease", testIdempotencyComplete},
		{"Idempotency_ReleaseOnlyUnderOwnLease", testIdempotencyRelease},
		{"Invoice_ReserveDerivationIndexes_NoGaps", testReserveIndexes},
		{"Invoice_ReserveConcurrently_ContiguousAndDisjoint", testReserveIndexesConcurrent},
		{"Invoice_CreateInvoices_AllOrNone", testCreateInvoices},
		{"Idempotency_CompleteMany_OnlyUnderOwnLeases", testCompleteIdempotencyRecords},
		{"Idempotency_CreateMany_OnlyUnusedKeys", testCreateIdempotencyRecords},
	}
}

func testMerchantCRUD(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	got, err := st.GetMerchant(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, m.APIKeyDigest, got.APIKeyDigest)
	require.Equal(t, m.SettlementAddress, got.SettlementAddress)
	require.Equal(t, m.WebhookSecretCiphertext, got.WebhookSecretCiphertext)
	requireTime(t, m.CreatedAt, got.CreatedAt)
	require.Nil(t, got.DisabledAt)

	byDigest, err := st.GetMerchantByAPIKeyDigest(ctx, m.APIKeyDigest)
	require.NoError(t, err)
	require.Equal(t, m.ID, byDigest.ID)

	m.WebhookURL = "https://example.org/other"
	m.APIKeyDigest = randBytes(32)
	m.SettlementAddress = randAddr()
	disabled := now().Add(time.Hour)
	m.DisabledAt = &disabled
	require.NoError(t, st.UpdateMerchant(ctx, m))
	got, err = st.GetMerchant(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, "https://example.org/other", got.WebhookURL)
	require.Equal(t, m.SettlementAddress, got.SettlementAddress)
	requireTimePtr(t, m.DisabledAt, got.DisabledAt)

	_, err = st.GetMerchantByAPIKeyDigest(ctx, byDigest.APIKeyDigest)
	require.ErrorIs(t, err, store.ErrNotFound, "the old digest no longer finds the merchant")
	_, err = st.GetMerchant(ctx, m.ID+1000)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorIs(t, st.UpdateMerchant(ctx, store.Merchant{ID: m.ID + 1000, SettlementAddress: randAddr(), WebhookSecretCiphertext: []byte{1}, APIKeyDigest: []byte{1}}), store.ErrNotFound)

	newMerchant(t, st)
	all, err := st.ListMerchants(ctx)
	require.NoError(t, err)
	require.Len(t, all, 2)
}

func testMerchantConflict(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	dup := m
	dup.ID = 0
	require.ErrorIs(t, st.CreateMerchant(ctx, &dup), store.ErrConflict)
}

func testInvoiceCRUD(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID, func(inv *store.Invoice) {
		inv.OrderID = "order-1"
		inv.Description = "two coffees"
		inv.Metadata = store.RawJSON(`{"table": 4, "note": "ünïcode"}`)
		inv.RedirectURL = "https://shop.example/orders/1?paid=1"
	})
	require.EqualValues(t, 1, inv.Version)
	got, err := st.GetInvoice(ctx, inv.ID)
	require.NoError(t, err)
	require.Equal(t, inv.DepositAddress, got.DepositAddress)
	require.Equal(t, inv.DerivationIndex, got.DerivationIndex)
	require.Equal(t, "order-1", got.OrderID)
	require.Equal(t, "https://shop.example/orders/1?paid=1", got.RedirectURL)
	require.JSONEq(t, `{"table": 4, "note": "ünïcode"}`, string(got.Metadata))
	require.Equal(t, store.SweepNone, got.SweepStatus)
	require.Nil(t, got.SweepTxHash)
	require.Nil(t, got.PaidAt)
	requireTime(t, inv.ExpiresAt, got.ExpiresAt)
	require.False(t, got.Underpaid)

	byToken, err := st.GetInvoiceByLookupTokenHash(ctx, inv.LookupTokenHash)
	require.NoError(t, err)
	require.Equal(t, inv.ID, byToken.ID)

	paidAt := now().Add(time.Minute)
	txHash := common.HexToHash("0xabc")
	got.Status = store.StatusPaid
	got.PaidWei = store.MustParseAmount("1600000000000000000")
	got.Overpaid = true
	got.PaidAt = &paidAt
	got.SweepStatus = store.SweepSent
	got.SweepTxHash = &txHash
	got.SweepError = "nonce too low"
	got.UpdatedAt = paidAt
	require.NoError(t, st.UpdateInvoice(ctx, &got))
	require.EqualValues(t, 2, got.Version)

	again, err := st.GetInvoiceForUpdate(ctx, inv.ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusPaid, again.Status)
	require.Equal(t, "1600000000000000000", again.PaidWei.String())
	require.True(t, again.Overpaid)
	requireTimePtr(t, &paidAt, again.PaidAt)
	require.Equal(t, txHash, *again.SweepTxHash)
	require.Equal(t, "nonce too low", again.SweepError)
	require.EqualValues(t, 2, again.Version)

	_, err = st.GetInvoice(ctx, inv.ID+1000)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.GetInvoiceByLookupTokenHash(ctx, randBytes(32))
	require.ErrorIs(t, err, store.ErrNotFound)
	missing := store.Invoice{ID: inv.ID + 1000, Version: 1, Status: store.StatusPaid, SweepStatus: store.SweepNone}
	require.ErrorIs(t, st.UpdateInvoice(ctx, &missing), store.ErrNotFound)
}

func testInvoiceStaleVersion(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	a, err := st.GetInvoice(ctx, inv.ID)
	require.NoError(t, err)
	b := a
	a.Status = store.StatusPaid
	require.NoError(t, st.UpdateInvoice(ctx, &a))
	b.Status = store.StatusExpired
	require.ErrorIs(t, st.UpdateInvoice(ctx, &b), store.ErrConflict)
	got, err := st.GetInvoice(ctx, inv.ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusPaid, got.Status, "the stale write changed nothing")
}

func testInvoiceUnique(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	cases := map[string]func(*store.Invoice){
		"deposit address":  func(i *store.Invoice) { i.DepositAddress = inv.DepositAddress },
		"derivation index": func(i *store.Invoice) { i.DerivationIndex = inv.DerivationIndex },
		"lookup token":     func(i *store.Invoice) { i.LookupTokenHash = inv.LookupTokenHash },
	}
	for name, mutate := range cases {
		dup := inv
		dup.ID = 0
		dup.DepositAddress = randAddr()
		dup.DerivationIndex = inv.DerivationIndex + 100
		dup.LookupTokenHash = randBytes(32)
		mutate(&dup)
		require.ErrorIs(t, st.CreateInvoice(ctx, &dup), store.ErrConflict, name)
	}
	list, err := st.ListInvoices(ctx, store.InvoiceFilter{})
	require.NoError(t, err)
	require.Len(t, list, 1)
}

func testInvoiceList(t *testing.T, st store.Store) {
	m1 := newMerchant(t, st)
	m2 := newMerchant(t, st)
	var ids []int64
	for i := 0; i < 5; i++ {
		inv := newInvoice(t, st, m1.ID, func(inv *store.Invoice) {
			inv.CreatedAt = now().Add(time.Duration(i) * time.Hour)
			if i%2 == 1 {
				inv.Status = store.StatusExpired
			}
		})
		ids = append(ids, inv.ID)
	}
	newInvoice(t, st, m2.ID)

	all, err := st.ListInvoices(ctx, store.InvoiceFilter{MerchantID: m1.ID})
	require.NoError(t, err)
	require.Len(t, all, 5)
	require.Equal(t, ids[4], all[0].ID, "newest first")

	page1, err := st.ListInvoices(ctx, store.InvoiceFilter{MerchantID: m1.ID, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []int64{ids[4], ids[3]}, invoiceIDs(page1))
	page2, err := st.ListInvoices(ctx, store.InvoiceFilter{MerchantID: m1.ID, Limit: 2, BeforeID: page1[1].ID})
	require.NoError(t, err)
	require.Equal(t, []int64{ids[2], ids[1]}, invoiceIDs(page2))

	expired, err := st.ListInvoices(ctx, store.InvoiceFilter{MerchantID: m1.ID, Statuses: []string{store.StatusExpired}})
	require.NoError(t, err)
	require.Equal(t, []int64{ids[3], ids[1]}, invoiceIDs(expired))

	ranged, err := st.ListInvoices(ctx, store.InvoiceFilter{MerchantID: m1.ID,
		CreatedAfter: now().Add(time.Hour), CreatedBefore: now().Add(3 * time.Hour)})
	require.NoError(t, err)
	require.Equal(t, []int64{ids[2], ids[1]}, invoiceIDs(ranged))

	counts, err := st.CountLiveInvoices(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{store.StatusPending: 4}, counts, "the two EXPIRED ones are history, not counted")
}

// A page of several statuses is every status's invoices merged newest
// first, cut at the limit, whatever the statuses' order or repetitions in
// the filter; pages follow each other by cursor without gap or repeat.
func testInvoiceListStatuses(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	other := newMerchant(t, st)
	statuses := []string{store.StatusSettled, store.StatusPending, store.StatusExpired, store.StatusSettled,
		store.StatusPaid, store.StatusExpired, store.StatusSettled, store.StatusConfirmed}
	var want []int64 // SETTLED or EXPIRED, newest first
	for i := 0; i < 24; i++ {
		status := statuses[i%len(statuses)]
		inv := newInvoice(t, st, m.ID, func(inv *store.Invoice) { inv.Status = status })
		newInvoice(t, st, other.ID, func(inv *store.Invoice) { inv.Status = status })
		if status == store.StatusSettled || status == store.StatusExpired {
			want = append([]int64{inv.ID}, want...)
		}
	}
	var got []int64
	f := store.InvoiceFilter{MerchantID: m.ID, Limit: 4,
		Statuses: []string{store.StatusExpired, store.StatusSettled, store.StatusExpired}}
	for {
		page, err := st.ListInvoices(ctx, f)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 4)
		for _, inv := range page {
			require.Equal(t, m.ID, inv.MerchantID)
			require.Contains(t, []string{store.StatusSettled, store.StatusExpired}, inv.Status)
		}
		got = append(got, invoiceIDs(page)...)
		if len(page) < 4 {
			break
		}
		f.BeforeID = page[len(page)-1].ID
	}
	require.Equal(t, want, got)
}

func invoiceIDs(invs []store.Invoice) []int64 {
	ids := make([]int64, len(invs))
	for i := range invs {
		ids[i] = invs[i].ID
	}
	return ids
}

func testInvoiceExpiring(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	old := newInvoice(t, st, m.ID, func(i *store.Invoice) { i.ExpiresAt = now().Add(-time.Minute) })
	atNow := newInvoice(t, st, m.ID, func(i *store.Invoice) { i.ExpiresAt = now() })
	newInvoice(t, st, m.ID, func(i *store.Invoice) { i.ExpiresAt = now().Add(time.Microsecond) })
	newInvoice(t, st, m.ID, func(i *store.Invoice) {
		i.ExpiresAt = now().Add(-time.Hour)
		i.Status = store.StatusPaid
	})
	got, err := st.ListExpiring(ctx, now(), 10)
	require.NoError(t, err)
	require.Equal(t, []int64{old.ID, atNow.ID}, invoiceIDs(got))
}

func testDerivationIndex(t *testing.T, st store.Store) {
	first, err := st.NextDerivationIndex(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 0, first)
	errBoom := errors.New("boom")
	err = st.InTx(ctx, func(tx store.Tx) error {
		idx, err := tx.NextDerivationIndex(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, idx)
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)
	next, err := st.NextDerivationIndex(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, next, "a rolled-back reservation leaves no gap")
}

func testDerivationIndexConcurrent(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	const n = 40
	var wg sync.WaitGroup
	idxs := make(chan uint32, n)
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- st.InTx(ctx, func(tx store.Tx) error {
				idx, err := tx.NextDerivationIndex(ctx)
				if err != nil {
					return err
				}
				inv := store.Invoice{MerchantID: m.ID, Status: store.StatusPending, ChainID: 1,
					DepositAddress: randAddr(), DerivationIndex: idx, LookupTokenHash: randBytes(32),
					ExpiresAt: now(), CreatedAt: now(), UpdatedAt: now(), SweepStatus: store.SweepNone}
				if err := tx.CreateInvoice(ctx, &inv); err != nil {
					return err
				}
				idxs <- idx
				return nil
			})
		}()
	}
	wg.Wait()
	close(errs)
	close(idxs)
	for err := range errs {
		require.NoError(t, err)
	}
	seen := map[uint32]bool{}
	for idx := range idxs {
		require.False(t, seen[idx], "index %d handed out twice", idx)
		seen[idx] = true
	}
	for i := uint32(0); i < n; i++ {
		require.True(t, seen[i], "index %d missing: a gap", i)
	}
}

func testArchive(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	old := now().AddDate(-2, 0, 0)
	settled := newInvoice(t, st, m.ID, func(i *store.Invoice) { i.CreatedAt = old; i.Status = store.StatusSettled })
	expired := newInvoice(t, st, m.ID, func(i *store.Invoice) { i.CreatedAt = old; i.Status = store.StatusExpired })
	paidLate := newInvoice(t, st, m.ID, func(i *store.Invoice) {
		i.CreatedAt = old
		i.Status = store.StatusExpired
		i.PaidWei = store.NewAmount(1)
	})
	confirmed := newInvoice(t, st, m.ID, func(i *store.Invoice) { i.CreatedAt = old; i.Status = store.StatusConfirmed })
	recent := newInvoice(t, st, m.ID, func(i *store.Invoice) { i.Status = store.StatusSettled })
	// A settled invoice with a refund still on its way stays: the refund
	// reads its invoice until it is done.
	refunding := newInvoice(t, st, m.ID, func(i *store.Invoice) { i.CreatedAt = old; i.Status = store.StatusSettled })
	newOutbound(t, st, m, func(o *store.Outbound) { o.Kind, o.InvoiceID = store.OutboundRefund, &refunding.ID })

	moved, err := st.ArchiveInvoices(ctx, now().AddDate(-1, 0, 0), 1)
	require.NoError(t, err)
	require.Equal(t, 1, moved, "batches are bounded")
	moved, err = st.ArchiveInvoices(ctx, now().AddDate(-1, 0, 0), 100)
	require.NoError(t, err)
	require.Equal(t, 1, moved)
	moved, err = st.ArchiveInvoices(ctx, now().AddDate(-1, 0, 0), 100)
	require.NoError(t, err)
	require.Zero(t, moved)

	for _, id := range []int64{settled.ID, expired.ID} {
		_, err := st.GetInvoice(ctx, id)
		require.ErrorIs(t, err, store.ErrNotFound)
	}
	for _, id := range []int64{paidLate.ID, confirmed.ID, recent.ID, refunding.ID} {
		_, err := st.GetInvoice(ctx, id)
		require.NoError(t, err, "invoice %d must stay", id)
	}
	// The archived invoice's address and index are never handed out again.
	next, err := st.NextDerivationIndex(ctx)
	require.NoError(t, err)
	require.Greater(t, next, recent.DerivationIndex)
	inv := newInvoice(t, st, m.ID)
	require.NotEqual(t, settled.ID, inv.ID, "ids of archived invoices are not reused")
}

// The archive moves the oldest invoices first, by creation time, whatever
// their ids.
func testArchiveOldestFirst(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	settled := func(created time.Time) func(*store.Invoice) {
		return func(i *store.Invoice) { i.CreatedAt = created; i.Status = store.StatusSettled }
	}
	newer := newInvoice(t, st, m.ID, settled(now().AddDate(-2, 0, 0)))
	older := newInvoice(t, st, m.ID, settled(now().AddDate(-3, 0, 0)))
	require.Greater(t, older.ID, newer.ID)

	moved, err := st.ArchiveInvoices(ctx, now().AddDate(-1, 0, 0), 1)
	require.NoError(t, err)
	require.Equal(t, 1, moved)
	_, err = st.GetInvoice(ctx, older.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "the oldest invoice moves first")
	_, err = st.GetInvoice(ctx, newer.ID)
	require.NoError(t, err)

	moved, err = st.ArchiveInvoices(ctx, now().AddDate(-1, 0, 0), 1)
	require.NoError(t, err)
	require.Equal(t, 1, moved)
	_, err = st.GetInvoice(ctx, newer.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testIdempotency(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	rec := store.IdempotencyRecord{MerchantID: m.ID, Key: "key-1", RequestHash: randBytes(32),
		Status: store.IdempotencyInFlight, LockedUntil: now().Add(time.Minute), CreatedAt: now(),
		ExpiresAt: now().Add(24 * time.Hour)}
	require.NoError(t, st.CreateIdempotencyRecord(ctx, rec))
	require.ErrorIs(t, st.CreateIdempotencyRecord(ctx, rec), store.ErrConflict)

	other := newMerchant(t, st)
	rec2 := rec
	rec2.MerchantID = other.ID
	require.NoError(t, st.CreateIdempotencyRecord(ctx, rec2), "keys are per merchant")

	got, err := st.GetIdempotencyRecord(ctx, m.ID, "key-1")
	require.NoError(t, err)
	require.Equal(t, store.IdempotencyInFlight, got.Status)
	require.Nil(t, got.ResponseStatus)

	status := 201
	invID := int64(42)
	got.Status = store.IdempotencyDone
	got.ResponseStatus = &status
	got.ResponseBody = []byte(`{"id":42}`)
	got.InvoiceID = &invID
	require.NoError(t, st.CompleteIdempotencyRecord(ctx, got))
	got, err = st.GetIdempotencyRecord(ctx, m.ID, "key-1")
	require.NoError(t, err)
	require.Equal(t, 201, *got.ResponseStatus)
	require.Equal(t, []byte(`{"id":42}`), got.ResponseBody)
	require.EqualValues(t, 42, *got.InvoiceID)

	n, err := st.DeleteExpiredIdempotencyRecords(ctx, now().Add(25*time.Hour))
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "only the finished record expires")
	_, err = st.GetIdempotencyRecord(ctx, m.ID, "key-1")
	require.ErrorIs(t, err, store.ErrNotFound)

	require.NoError(t, st.ReleaseIdempotencyRecord(ctx, other.ID, "key-1", rec2.LockedUntil))
	require.ErrorIs(t, st.ReleaseIdempotencyRecord(ctx, other.ID, "key-1", rec2.LockedUntil), store.ErrNotFound)
}

func testMerchantForUpdate(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	err := st.InTx(ctx, func(tx store.Tx) error {
		got, err := tx.GetMerchantForUpdate(ctx, m.ID)
		require.NoError(t, err)
		require.Equal(t, m.APIKeyDigest, got.APIKeyDigest)
		got.WebhookURL = "https://example.net/locked"
		return tx.UpdateMerchant(ctx, got)
	})
	require.NoError(t, err)
	got, err := st.GetMerchant(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, "https://example.net/locked", got.WebhookURL)
	_, err = st.GetMerchantForUpdate(ctx, m.ID+1000)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// inFlight returns an IN_FLIGHT record whose lease ends at lease. The lease
// has nanoseconds on purpose: stores keep microseconds, and the lease must
// still compare equal when passed back.
func inFlight(merchantID int64, key string, lease time.Time) store.IdempotencyRecord {
	return store.IdempotencyRecord{MerchantID: merchantID, Key: key, RequestHash: randBytes(32),
		Status: store.IdempotencyInFlight, LockedUntil: lease, CreatedAt: now(),
		ExpiresAt: now().Add(24 * time.Hour)}
}

func testIdempotencyClaim(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	lease := now().Add(30*time.Second + 789*time.Nanosecond)
	rec := inFlight(m.ID, "k", lease)
	require.NoError(t, st.CreateIdempotencyRecord(ctx, rec))

	next := inFlight(m.ID, "k", now().Add(time.Hour))
	require.ErrorIs(t, st.ClaimIdempotencyRecord(ctx, next, lease.Add(-time.Second)), store.ErrConflict,
		"a running lease is not claimable")
	require.NoError(t, st.ClaimIdempotencyRecord(ctx, next, lease.Add(time.Second)))
	got, err := st.GetIdempotencyRecord(ctx, m.ID, "k")
	require.NoError(t, err)
	require.Equal(t, next.RequestHash, got.RequestHash)
	requireTime(t, next.LockedUntil, got.LockedUntil)

	status := 201
	next.Status = store.IdempotencyDone
	next.ResponseStatus = &status
	next.ResponseBody = []byte("sealed")
	require.NoError(t, st.CompleteIdempotencyRecord(ctx, next))
	require.ErrorIs(t, st.ClaimIdempotencyRecord(ctx, inFlight(m.ID, "k", now()), now().Add(48*time.Hour)),
		store.ErrConflict, "a finished record is never claimable")
	require.ErrorIs(t, st.ClaimIdempotencyRecord(ctx, inFlight(m.ID, "absent", now()), now().Add(48*time.Hour)),
		store.ErrConflict)
}

func testIdempotencyClaimConcurrent(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	require.NoError(t, st.CreateIdempotencyRecord(ctx, inFlight(m.ID, "k", now())))
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- st.ClaimIdempotencyRecord(ctx, inFlight(m.ID, "k", now().Add(time.Minute)), now().Add(time.Second))
		}()
	}
	wg.Wait()
	close(errs)
	won := 0
	for err := range errs {
		if err == nil {
			won++
			continue
		}
		require.ErrorIs(t, err, store.ErrConflict)
	}
	require.Equal(t, 1, won, "exactly one claimer takes over an expired lease")
}

func testIdempotencyComplete(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	lease := now().Add(time.Minute + 999*time.Nanosecond)
	rec := inFlight(m.ID, "k", lease)
	require.NoError(t, st.CreateIdempotencyRecord(ctx, rec))

	status := 201
	invID := int64(7)
	done := rec
	done.Status = store.IdempotencyDone
	done.ResponseStatus = &status
	done.ResponseBody = []byte("sealed response")
	done.InvoiceID = &invID
	stale := done
	stale.LockedUntil = lease.Add(-time.Microsecond)
	require.ErrorIs(t, st.CompleteIdempotencyRecord(ctx, stale), store.ErrConflict)

	err := st.InTx(ctx, func(tx store.Tx) error { return tx.CompleteIdempotencyRecord(ctx, done) })
	require.NoError(t, err)
	got, err := st.GetIdempotencyRecord(ctx, m.ID, "k")
	require.NoError(t, err)
	require.Equal(t, store.IdempotencyDone, got.Status)
	require.Equal(t, 201, *got.ResponseStatus)
	require.Equal(t, []byte("sealed response"), got.ResponseBody)
	require.EqualValues(t, 7, *got.InvoiceID)
	require.ErrorIs(t, st.CompleteIdempotencyRecord(ctx, done), store.ErrConflict, "completes once")
	require.ErrorIs(t, st.CompleteIdempotencyRecord(ctx, inFlight(m.ID, "absent", lease)), store.ErrConflict)
}

func testIdempotencyRelease(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	lease := now().Add(time.Minute + 1*time.Nanosecond)
	require.NoError(t, st.CreateIdempotencyRecord(ctx, inFlight(m.ID, "k", lease)))
	require.ErrorIs(t, st.ReleaseIdempotencyRecord(ctx, m.ID, "k", lease.Add(time.Second)), store.ErrNotFound)
	require.NoError(t, st.ReleaseIdempotencyRecord(ctx, m.ID, "k", lease))
	_, err := st.GetIdempotencyRecord(ctx, m.ID, "k")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorIs(t, st.ReleaseIdempotencyRecord(ctx, m.ID, "k", lease), store.ErrNotFound)
}

func testReserveIndexes(t *testing.T, st store.Store) {
	first, err := st.ReserveDerivationIndexes(ctx, 3)
	require.NoError(t, err)
	require.EqualValues(t, 0, first)
	next, err := st.NextDerivationIndex(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, next, "the reservation took 0, 1 and 2")
	first, err = st.ReserveDerivationIndexes(ctx, 2)
	require.NoError(t, err)
	require.EqualValues(t, 4, first)

	errBoom := errors.New("boom")
	err = st.InTx(ctx, func(tx store.Tx) error {
		first, err := tx.ReserveDerivationIndexes(ctx, 5)
		require.NoError(t, err)
		require.EqualValues(t, 6, first)
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)
	first, err = st.ReserveDerivationIndexes(ctx, 1)
	require.NoError(t, err)
	require.EqualValues(t, 6, first, "a rolled-back reservation leaves no gap")

	for _, n := range []int{0, -1} {
		_, err := st.ReserveDerivationIndexes(ctx, n)
		require.Error(t, err, "n = %d", n)
	}
	next, err = st.NextDerivationIndex(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 7, next, "refused reservations change nothing")
}

// testReserveIndexesConcurrent has transactions reserve ranges of several
// sizes at once and insert an invoice per index; a third of them roll
// back. The committed indexes are exactly 0…n-1.
func testReserveIndexesConcurrent(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	const workers = 24
	errBoom := errors.New("boom")
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		kept []uint32
		errs = make(chan error, workers)
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 1 + w%5
			var mine []uint32
			err := st.InTx(ctx, func(tx store.Tx) error {
				first, err := tx.ReserveDerivationIndexes(ctx, n)
				if err != nil {
					return err
				}
				invs := make([]*store.Invoice, n)
				for i := range invs {
					invs[i] = &store.Invoice{MerchantID: m.ID, Status: store.StatusPending, ChainID: 1,
						DepositAddress: randAddr(), DerivationIndex: first + uint32(i), LookupTokenHash: randBytes(32),
						ExpiresAt: now(), CreatedAt: now(), UpdatedAt: now(), SweepStatus: store.SweepNone}
					mine = append(mine, first+uint32(i))
				}
				if err := tx.CreateInvoices(ctx, invs); err != nil {
					return err
				}
				if w%3 == 0 {
					return errBoom
				}
				return nil
			})
			if errors.Is(err, errBoom) {
				return
			}
			if err == nil {
				mu.Lock()
				kept = append(kept, mine...)
				mu.Unlock()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	seen := map[uint32]bool{}
	for _, idx := range kept {
		require.False(t, seen[idx], "index %d handed out twice", idx)
		seen[idx] = true
	}
	for i := uint32(0); i < uint32(len(kept)); i++ {
		require.True(t, seen[i], "index %d missing: a gap", i)
	}
	next, err := st.NextDerivationIndex(ctx)
	require.NoError(t, err)
	require.EqualValues(t, len(kept), next, "rolled-back reservations were handed out again")
	invs, err := st.ListInvoices(ctx, store.InvoiceFilter{MerchantID: m.ID, Limit: 1000})
	require.NoError(t, err)
	require.Len(t, invs, len(kept))
}

func testCreateInvoices(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	require.NoError(t, st.CreateInvoices(ctx, nil))
	mk := func(idx uint32) *store.Invoice {
		return &store.Invoice{MerchantID: m.ID, Status: store.StatusPending,
			AmountWei: store.NewAmount(uint64(idx) + 1), ChainID: 1337, DepositAddress: randAddr(),
			DerivationIndex: idx, PaymentURI: "ethereum:0x0@1337?value=1", OrderID: "o", Description: "d",
			RedirectURL: "https://shop.example/back", Metadata: store.RawJSON(`{"i":1}`), LookupTokenHash: randBytes(32), ExpiresAt: now().Add(time.Hour),
			CreatedAt: now(), UpdatedAt: now(), SweepStatus: store.SweepNone}
	}
	// More rows than one statement takes, in an order unlike the indexes.
	var invs []*store.Invoice
	for i := 700; i > 0; i-- {
		invs = append(invs, mk(uint32(i*3)))
	}
	require.NoError(t, st.CreateInvoices(ctx, invs))
	ids := map[int64]bool{}
	for _, inv := range invs {
		require.NotZero(t, inv.ID)
		require.False(t, ids[inv.ID], "ids are distinct")
		ids[inv.ID] = true
		require.EqualValues(t, 1, inv.Version)
	}
	for _, inv := range []*store.Invoice{invs[0], invs[350], invs[699]} {
		got, err := st.GetInvoice(ctx, inv.ID)
		require.NoError(t, err)
		require.Equal(t, inv.DerivationIndex, got.DerivationIndex, "the id belongs to this invoice")
		require.Equal(t, inv.DepositAddress, got.DepositAddress)
		require.Equal(t, inv.AmountWei.String(), got.AmountWei.String())
		require.Equal(t, inv.LookupTokenHash, got.LookupTokenHash)
		require.JSONEq(t, `{"i":1}`, string(got.Metadata))
		require.Equal(t, "o", got.OrderID)
		require.Equal(t, "https://shop.example/back", got.RedirectURL)
		requireTime(t, inv.ExpiresAt, got.ExpiresAt)
	}

	count := func() int {
		list, err := st.ListInvoices(ctx, store.InvoiceFilter{MerchantID: m.ID, Limit: 1000})
		require.NoError(t, err)
		return len(list)
	}
	require.Equal(t, 700, count())
	taken := mk(invs[5].DerivationIndex)
	require.ErrorIs(t, st.CreateInvoices(ctx, []*store.Invoice{mk(1), taken, mk(2)}), store.ErrConflict)
	twice := []*store.Invoice{mk(4), mk(4)}
	require.ErrorIs(t, st.CreateInvoices(ctx, twice), store.ErrConflict)
	sameAddr := []*store.Invoice{mk(7), mk(8)}
	sameAddr[1].DepositAddress = sameAddr[0].DepositAddress
	require.ErrorIs(t, st.CreateInvoices(ctx, sameAddr), store.ErrConflict)
	require.Equal(t, 700, count(), "a failed insert inserts none")
}

func testCompleteIdempotencyRecords(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	require.NoError(t, st.CompleteIdempotencyRecords(ctx, nil))
	lease := now().Add(time.Minute + 123*time.Nanosecond)
	status := 201
	done := func(rec store.IdempotencyRecord, invoiceID int64) store.IdempotencyRecord {
		rec.Status = store.IdempotencyDone
		rec.ResponseStatus = &status
		rec.ResponseBody = []byte("sealed " + rec.Key)
		rec.InvoiceID = &invoiceID
		return rec
	}
	requireStatus := func(key, want string) {
		t.Helper()
		got, err := st.GetIdempotencyRecord(ctx, m.ID, key)
		require.NoError(t, err)
		require.Equal(t, want, got.Status, key)
	}

	// Enough records for a statement that is not kept prepared.
	var recs []store.IdempotencyRecord
	for i := 0; i < 70; i++ {
		rec := inFlight(m.ID, fmt.Sprintf("k-%d", i), lease)
		require.NoError(t, st.CreateIdempotencyRecord(ctx, rec))
		recs = append(recs, done(rec, int64(100+i)))
	}
	err := st.InTx(ctx, func(tx store.Tx) error { return tx.CompleteIdempotencyRecords(ctx, recs[:3]) })
	require.NoError(t, err)
	require.NoError(t, st.CompleteIdempotencyRecords(ctx, recs[3:]))
	for i, rec := range recs {
		got, err := st.GetIdempotencyRecord(ctx, m.ID, rec.Key)
		require.NoError(t, err)
		require.Equal(t, store.IdempotencyDone, got.Status)
		require.Equal(t, 201, *got.ResponseStatus)
		require.Equal(t, []byte("sealed "+rec.Key), got.ResponseBody)
		require.EqualValues(t, 100+i, *got.InvoiceID)
		requireTime(t, rec.ExpiresAt, got.ExpiresAt)
	}
	require.ErrorIs(t, st.CompleteIdempotencyRecords(ctx, recs[:2]), store.ErrConflict, "completes once")

	// One record whose lease was taken over: a conflict, and outside a
	// transaction none of the three is written.
	var next []store.IdempotencyRecord
	for _, key := range []string{"a", "b", "c"} {
		rec := inFlight(m.ID, key, lease)
		require.NoError(t, st.CreateIdempotencyRecord(ctx, rec))
		next = append(next, done(rec, 1))
	}
	require.NoError(t, st.ClaimIdempotencyRecord(ctx, inFlight(m.ID, "b", lease.Add(time.Hour)), lease))
	require.ErrorIs(t, st.CompleteIdempotencyRecords(ctx, next), store.ErrConflict)
	err = st.InTx(ctx, func(tx store.Tx) error { return tx.CompleteIdempotencyRecords(ctx, next) })
	require.ErrorIs(t, err, store.ErrConflict)
	for _, key := range []string{"a", "b", "c"} {
		requireStatus(key, store.IdempotencyInFlight)
	}
	require.NoError(t, st.CompleteIdempotencyRecords(ctx, []store.IdempotencyRecord{next[0], next[2]}))
	requireStatus("a", store.IdempotencyDone)
	requireStatus("b", store.IdempotencyInFlight)
	requireStatus("c", store.IdempotencyDone)
}

func testCreateIdempotencyRecords(t *testing.T, st store.Store) {
	m, other := newMerchant(t, st), newMerchant(t, st)
	created, err := st.CreateIdempotencyRecords(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, created)
	lease := now().Add(time.Minute + 456*time.Nanosecond)
	used := inFlight(m.ID, "used", lease)
	require.NoError(t, st.CreateIdempotencyRecord(ctx, used))

	// Enough records for a statement that is not kept prepared; the used
	// key in the middle, and the same key of another merchant.
	var recs []store.IdempotencyRecord
	for i := 0; i < 70; i++ {
		recs = append(recs, inFlight(m.ID, fmt.Sprintf("k-%d", i), lease))
	}
	mine := inFlight(m.ID, "used", lease.Add(time.Hour))
	recs = slices.Insert(recs, 35, mine, inFlight(other.ID, "used", lease))
	created, err = st.CreateIdempotencyRecords(ctx, recs)
	require.NoError(t, err)
	require.Len(t, created, len(recs))
	for i, rec := range recs {
		require.Equal(t, i != 35, created[i], "record %d (%s of merchant %d)", i, rec.Key, rec.MerchantID)
		got, err := st.GetIdempotencyRecord(ctx, rec.MerchantID, rec.Key)
		require.NoError(t, err)
		require.Equal(t, store.IdempotencyInFlight, got.Status)
		if i == 35 {
			require.Equal(t, used.RequestHash, got.RequestHash, "the stored record stays")
			requireTime(t, used.LockedUntil.Truncate(time.Microsecond), got.LockedUntil)
			continue
		}
		require.Equal(t, rec.RequestHash, got.RequestHash)
		requireTime(t, rec.LockedUntil.Truncate(time.Microsecond), got.LockedUntil)
	}
	// Each one lease-exact: the records complete under their own leases.
	done := recs[0]
	done.Status = store.IdempotencyDone
	require.NoError(t, st.CompleteIdempotencyRecord(ctx, done))

	// Inside a transaction they roll back with it.
	boom := errors.New("boom")
	err = st.InTx(ctx, func(tx store.Tx) error {
		created, err := tx.CreateIdempotencyRecords(ctx, []store.IdempotencyRecord{inFlight(m.ID, "tx", lease), recs[1]})
		require.NoError(t, err)
		require.Equal(t, []bool{true, false}, created)
		return boom
	})
	require.ErrorIs(t, err, boom)
	_, err = st.GetIdempotencyRecord(ctx, m.ID, "tx")
	require.ErrorIs(t, err, store.ErrNotFound)

	_, err = st.CreateIdempotencyRecords(ctx, []store.IdempotencyRecord{inFlight(m.ID, "twice", lease), inFlight(m.ID, "twice", lease)})
	require.Error(t, err, "one key twice in one call")
}
