package storetest

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func coreTests() []test {
	return []test{
		{"Amount_MaxUint256RoundTrips", testAmountRoundTrip},
		{"InTx_RollbackLeavesNothing", testInTxRollback},
		{"InTx_PanicRollsBack", testInTxPanic},
		{"Lock_Exclusive", testLock},
		{"Merchant_ExternalID_UniqueAndFound", testMerchantExternalID},
	}
}

func testMerchantExternalID(t *testing.T, st store.Store) {
	ext := "shop-" + randAddr().Hex()
	m := newMerchant(t, st)
	_, err := st.GetMerchantByExternalID(ctx, ext)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.GetMerchantByExternalID(ctx, "")
	require.ErrorIs(t, err, store.ErrNotFound, "no external id is no merchant, however many have none")
	withID := m
	withID.ID, withID.ExternalID, withID.APIKeyDigest = 0, ext, randBytes(32)
	require.NoError(t, st.CreateMerchant(ctx, &withID))
	got, err := st.GetMerchantByExternalID(ctx, ext)
	require.NoError(t, err)
	require.Equal(t, withID.ID, got.ID)
	require.Equal(t, ext, got.ExternalID)
	dup := withID
	dup.ID, dup.APIKeyDigest = 0, randBytes(32)
	require.ErrorIs(t, st.CreateMerchant(ctx, &dup), store.ErrConflict, "an external id names one merchant")
	other := newMerchant(t, st) // another merchant without one
	require.Empty(t, other.ExternalID)
}

func testAmountRoundTrip(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	max := maxUint256()
	inv := newInvoice(t, st, m.ID, func(inv *store.Invoice) {
		inv.AmountWei = max
		inv.PaidWei = store.MustParseAmount("115792089237316195423570985008687907853269984665640564039457584007913129639934")
		dust := store.NewAmount(1)
		inv.DustWei = &dust
	})
	got, err := st.GetInvoice(ctx, inv.ID)
	require.NoError(t, err)
	require.Equal(t, max.String(), got.AmountWei.String())
	require.Equal(t, "115792089237316195423570985008687907853269984665640564039457584007913129639935", got.AmountWei.String())
	require.Equal(t, inv.PaidWei.String(), got.PaidWei.String())
	require.Nil(t, got.SweptWei)
	require.Equal(t, "1", got.DustWei.String())

	p := store.Payment{InvoiceID: inv.ID, TxHash: randHash(), LogIndex: store.NativeLogIndex,
		BlockNumber: 7, BlockHash: randHash(), From: randAddr(), AmountWei: max, CreatedAt: now()}
	require.NoError(t, st.InsertPayment(ctx, &p))
	ps, err := st.ListPaymentsByInvoice(ctx, inv.ID)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, max, ps[0].AmountWei)
}

// claimConcurrently runs claim from workers goroutines until every one gets
// an empty batch, and fails if any id is handed out twice.
func claimConcurrently(t *testing.T, workers int, claim func() ([]int64, error)) map[int64]bool {
	t.Helper()
	var (
		mu   sync.Mutex
		seen = map[int64]bool{}
		dup  []int64
		wg   sync.WaitGroup
		errs = make(chan error, workers)
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; round < 1000; round++ {
				ids, err := claim()
				if err != nil {
					errs <- err
					return
				}
				if len(ids) == 0 {
					return
				}
				mu.Lock()
				for _, id := range ids {
					if seen[id] {
						dup = append(dup, id)
					}
					seen[id] = true
				}
				stop := len(dup) > 0
				mu.Unlock()
				if stop {
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Empty(t, dup, "rows handed to two claimers")
	return seen
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
