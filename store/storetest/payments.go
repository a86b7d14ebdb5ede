package storetest

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
)

func settlementTests() []test {
	return []test{
		{"Payment_InsertListDelete", testPayments},
		{"Settlement_CursorCompareAndSet", testCursorCAS},
		{"Settlement_EarliestBlock", testEarliestBlock},
		{"Settlement_InvoiceTxsInBlock", testInvoiceTxsInBlock},
		{"Settlement_InvoiceTxsInBlock_OnlyTheRecipientsGiven", testInvoiceTxsInBlockRecipients},
		{"Settlement_BlockRecipients_DistinctWithValue", testBlockRecipients},
		{"Settlement_DepositAddresses_PagesUpToTheCounter", testDepositAddresses},
		{"Settlement_InvoicesForUpdateAndPaymentsInBatch", testSettlementBatchReads},
		{"Settlement_ListConfirmable", testListConfirmable},
		{"Settlement_ListConfirmableSince", testListConfirmableSince},
		{"Settlement_InsertPaymentsInBulk", testInsertPayments},
		{"Settlement_UpdateInvoiceStates", testUpdateInvoiceStates},
		{"Settlement_UpdateInvoiceStates_StaleVersionConflictsAndRollsBack", testUpdateInvoiceStatesConflict},
		{"Settlement_InsertEventsInBulk", testInsertEvents},
		{"Settlement_SettledBlocks", testSettledBlocks},
		{"Settlement_PendingInvoiceTxs", testPendingInvoiceTxs},
		{"Settlement_UnsweptConfirmed", testUnsweptConfirmed},
	}
}

func testPayments(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	mk := func(block uint64) store.Payment {
		p := store.Payment{InvoiceID: inv.ID, TxHash: randHash(), LogIndex: store.NativeLogIndex,
			BlockNumber: block, BlockHash: randHash(), From: randAddr(),
			AmountWei: store.NewAmount(block * 1000), CreatedAt: now()}
		require.NoError(t, st.InsertPayment(ctx, &p))
		require.NotZero(t, p.ID)
		return p
	}
	p10 := mk(10)
	p11 := mk(11)
	p12 := mk(12)

	dup := p10
	dup.ID = 0
	require.ErrorIs(t, st.InsertPayment(ctx, &dup), store.ErrConflict)
	dup.LogIndex = 3
	require.NoError(t, st.InsertPayment(ctx, &dup), "another log of the same tx is another payment")

	ps, err := st.ListPaymentsByInvoice(ctx, inv.ID)
	require.NoError(t, err)
	require.Len(t, ps, 4)
	require.Equal(t, p10.TxHash, ps[0].TxHash)
	require.Equal(t, p10.From, ps[0].From)

	deleted, err := st.DeletePaymentsFromBlock(ctx, 11)
	require.NoError(t, err)
	require.ElementsMatch(t, []int64{p11.ID, p12.ID}, []int64{deleted[0].ID, deleted[1].ID})
	ps, err = st.ListPaymentsByInvoice(ctx, inv.ID)
	require.NoError(t, err)
	require.Len(t, ps, 2)
}

func newPayment(t *testing.T, st store.Tx, invoiceID int64, block uint64, amount uint64) store.Payment {
	t.Helper()
	p := store.Payment{InvoiceID: invoiceID, TxHash: randHash(), LogIndex: store.NativeLogIndex,
		BlockNumber: block, BlockHash: randHash(), From: randAddr(),
		AmountWei: store.NewAmount(amount), CreatedAt: now()}
	require.NoError(t, st.InsertPayment(ctx, &p))
	return p
}

func testCursorCAS(t *testing.T, st store.Store) {
	name := store.CursorSettlement
	first := store.Cursor{BlockNumber: 7, BlockHash: randHash(), UpdatedAt: now()}
	require.NoError(t, st.CompareAndSetCursor(ctx, name, nil, first))
	require.ErrorIs(t, st.CompareAndSetCursor(ctx, name, nil, first), store.ErrConflict,
		"creating a cursor that exists")

	got, err := st.GetCursor(ctx, name)
	require.NoError(t, err)
	require.Equal(t, name, got.Name)
	require.EqualValues(t, 7, got.BlockNumber)
	require.Equal(t, first.BlockHash, got.BlockHash)

	next := store.Cursor{BlockNumber: 8, BlockHash: randHash(), UpdatedAt: now().Add(time.Second)}
	wrongHash := got
	wrongHash.BlockHash = randHash()
	require.ErrorIs(t, st.CompareAndSetCursor(ctx, name, &wrongHash, next), store.ErrConflict)
	wrongNumber := got
	wrongNumber.BlockNumber = 6
	require.ErrorIs(t, st.CompareAndSetCursor(ctx, name, &wrongNumber, next), store.ErrConflict)
	require.NoError(t, st.CompareAndSetCursor(ctx, name, &got, next))
	require.ErrorIs(t, st.CompareAndSetCursor(ctx, name, &got, next), store.ErrConflict,
		"the old position is gone once moved")

	got, err = st.GetCursor(ctx, name)
	require.NoError(t, err)
	require.EqualValues(t, 8, got.BlockNumber)
	require.Equal(t, next.BlockHash, got.BlockHash)
	requireTime(t, next.UpdatedAt, got.UpdatedAt)

	// Moving backwards (a reorg) is a compare-and-set like any other.
	back := store.Cursor{BlockNumber: 5, BlockHash: randHash(), UpdatedAt: now()}
	require.NoError(t, st.CompareAndSetCursor(ctx, name, &got, back))
	_, err = st.GetCursor(ctx, store.CursorIndexer)
	require.ErrorIs(t, err, store.ErrNotFound, "other cursors untouched")
}

func testInvoiceTxsInBlock(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	a := newInvoice(t, st, m.ID)
	b := newInvoice(t, st, m.ID)
	blocks, txs := chainOf(7, 2, 5, randHash())
	txs[1].To = &a.DepositAddress
	txs[3].To = &b.DepositAddress
	txs[4].To = &a.DepositAddress
	txs[6].To = &b.DepositAddress                                  // block 8
	txs[0].To, txs[0].ValueWei = &a.DepositAddress, store.Amount{} // pays nothing: not listed
	require.NoError(t, st.InsertBlocks(ctx, blocks, txs))
	got, err := st.ListInvoiceTxsInBlock(ctx, 7, nil)
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, []int64{a.ID, b.ID, a.ID}, []int64{got[0].InvoiceID, got[1].InvoiceID, got[2].InvoiceID})
	require.Equal(t, txs[3].Hash, got[1].Hash)
	require.Equal(t, txs[3].From, got[1].From)
	require.Equal(t, blocks[0].Hash, got[1].BlockHash)
	require.Equal(t, b.DepositAddress, *got[1].To)
	require.Equal(t, 3, got[1].Index)
	require.Equal(t, maxUint256(), got[1].ValueWei)
	got, err = st.ListInvoiceTxsInBlock(ctx, 8, nil)
	require.NoError(t, err)
	require.Len(t, got, 1)

	// The sweep's gas funding to a deposit address is not a payment.
	funding := store.SweepTx{InvoiceID: &b.ID, Kind: store.SweepTxFunding, From: randAddr(),
		To: b.DepositAddress, ValueWei: store.NewAmount(21000), GasLimit: 21000,
		MaxFeeWei: store.NewAmount(1), MaxPriorityFeeWei: store.NewAmount(1), TxHash: txs[6].Hash,
		RawTx: []byte{1}, Status: store.SweepTxMined, CreatedAt: now(), UpdatedAt: now()}
	require.NoError(t, st.CreateSweepTx(ctx, &funding))
	got, err = st.ListInvoiceTxsInBlock(ctx, 8, nil)
	require.NoError(t, err)
	require.Empty(t, got, "a transaction the sweep sent is not a payment")

	none, err := st.ListInvoiceTxsInBlock(ctx, 9, nil)
	require.NoError(t, err)
	require.Empty(t, none)
}

// Given recipients, only transactions and transfers to them are looked
// up; an empty list finds nothing, nil everything.
func testInvoiceTxsInBlockRecipients(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	a := newInvoice(t, st, m.ID)
	b := newInvoice(t, st, m.ID, func(inv *store.Invoice) { inv.SetAsset(usdc()) })
	blocks, txs := chainOf(7, 1, 5, randHash())
	txs[1].To, txs[2].To, txs[3].To = &a.DepositAddress, &b.DepositAddress, &a.DepositAddress
	trs := transfersOf(blocks, txs, *usdc().Address, 2)
	trs[1].To = b.DepositAddress
	require.NoError(t, st.InsertBlocks(ctx, blocks, txs))
	require.NoError(t, st.InsertTokenTransfers(ctx, trs))

	for _, c := range []struct {
		name      string
		to        []common.Address
		txs, trs  int
		invoiceID int64
	}{
		{"all", nil, 3, 1, 0},
		{"a", []common.Address{a.DepositAddress}, 2, 0, a.ID},
		{"b and a stranger", []common.Address{randAddr(), b.DepositAddress}, 1, 1, b.ID},
		{"a stranger", []common.Address{*txs[4].To}, 0, 0, 0},
		{"none", []common.Address{}, 0, 0, 0},
	} {
		got, err := st.ListInvoiceTxsInBlock(ctx, 7, c.to)
		require.NoError(t, err, c.name)
		require.Len(t, got, c.txs, c.name)
		gotTrs, err := st.ListInvoiceTokenTransfersInBlock(ctx, 7, c.to)
		require.NoError(t, err, c.name)
		require.Len(t, gotTrs, c.trs, c.name)
		for _, tx := range got {
			if c.invoiceID != 0 {
				require.Equal(t, c.invoiceID, tx.InvoiceID, c.name)
			}
		}
	}
}

// The recipients of value in a block: transactions with a value (not a
// contract creation, not a zero-value call) and token transfers.
func testBlockRecipients(t *testing.T, st store.Store) {
	blocks, txs := chainOf(30, 2, 6, randHash())
	twice := randAddr()
	txs[1].To, txs[2].To = &twice, &twice
	txs[3].ValueWei = store.Amount{} // a call without value
	trs := transfersOf(blocks, txs, randAddr(), 2)
	trs[1].To = twice
	require.NoError(t, st.InsertBlocks(ctx, blocks, txs))
	require.NoError(t, st.InsertTokenTransfers(ctx, trs))

	got, err := st.ListBlockRecipients(ctx, 30)
	require.NoError(t, err)
	want := []common.Address{twice, *txs[4].To, *txs[5].To, trs[0].To}
	require.ElementsMatch(t, want, slices.Compact(sortedAddrs(got)))
	none, err := st.ListBlockRecipients(ctx, 99)
	require.NoError(t, err)
	require.Empty(t, none)
}

// Deposit addresses come in pages of derivation indexes that stop at the
// counter; an invoice inserted above the counter (its index never
// reserved) shows in Highest, so that a reader knows its pages miss it.
func testDepositAddresses(t *testing.T, st store.Store) {
	page, err := st.ListDepositAddresses(ctx, 0, 100)
	require.NoError(t, err)
	require.Equal(t, store.DepositAddresses{Highest: -1}, page)

	m := newMerchant(t, st)
	var want []common.Address
	for i := 0; i < 5; i++ {
		want = append(want, newInvoice(t, st, m.ID).DepositAddress)
	}
	page, err = st.ListDepositAddresses(ctx, 0, 3)
	require.NoError(t, err)
	require.EqualValues(t, 5, page.Counter)
	require.EqualValues(t, 4, page.Highest)
	require.EqualValues(t, 3, page.Next)
	require.ElementsMatch(t, want[:3], page.Addresses)
	page, err = st.ListDepositAddresses(ctx, page.Next, 3)
	require.NoError(t, err)
	require.EqualValues(t, 5, page.Next, "the page stops at the counter")
	require.ElementsMatch(t, want[3:], page.Addresses)
	page, err = st.ListDepositAddresses(ctx, page.Next, 3)
	require.NoError(t, err)
	require.EqualValues(t, 5, page.Next)
	require.Empty(t, page.Addresses)

	newInvoice(t, st, m.ID, func(inv *store.Invoice) { inv.DerivationIndex = 1000 })
	page, err = st.ListDepositAddresses(ctx, 5, 3)
	require.NoError(t, err)
	require.EqualValues(t, 1000, page.Highest)
	require.EqualValues(t, 6, page.Counter, "newInvoice reserved index 5, then used 1000 instead")
	require.EqualValues(t, 6, page.Next)
	require.Empty(t, page.Addresses, "index 5 has no invoice; 1000 is above the counter")
}

func sortedAddrs(as []common.Address) []common.Address {
	return slices.SortedFunc(slices.Values(as), func(a, b common.Address) int { return a.Cmp(b) })
}

func testEarliestBlock(t *testing.T, st store.Store) {
	_, err := st.EarliestBlock(ctx)
	require.ErrorIs(t, err, store.ErrNotFound)
	blocks, txs := chainOf(40, 3, 1, randHash())
	require.NoError(t, st.InsertBlocks(ctx, blocks, txs))
	b, err := st.EarliestBlock(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 40, b.Number)
	require.Equal(t, blocks[0].Hash, b.Hash)
}

func testSettlementBatchReads(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	a := newInvoice(t, st, m.ID)
	b := newInvoice(t, st, m.ID)
	c := newInvoice(t, st, m.ID)
	pb1 := newPayment(t, st, b.ID, 9, 1)
	pa := newPayment(t, st, a.ID, 5, 2)
	pb0 := newPayment(t, st, b.ID, 3, 3)
	newPayment(t, st, c.ID, 4, 4)

	err := st.InTx(ctx, func(tx store.Tx) error {
		invs, err := tx.GetInvoicesForUpdate(ctx, []int64{b.ID, a.ID, 1 << 40})
		require.NoError(t, err)
		require.Equal(t, []int64{a.ID, b.ID}, invoiceIDs(invs), "by id, missing ids left out")
		require.Equal(t, a.DepositAddress, invs[0].DepositAddress)
		require.Equal(t, a.Version, invs[0].Version)

		none, err := tx.GetInvoicesForUpdate(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, none)

		ps, err := tx.ListPaymentsByInvoices(ctx, []int64{b.ID, a.ID})
		require.NoError(t, err)
		ids := make([]int64, len(ps))
		for i, p := range ps {
			ids[i] = p.ID
		}
		require.Equal(t, []int64{pa.ID, pb0.ID, pb1.ID}, ids, "by invoice, then block")
		require.Equal(t, pb0.AmountWei, ps[1].AmountWei)
		return nil
	})
	require.NoError(t, err)
}

func testListConfirmable(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	paid := func() store.Invoice {
		return newInvoice(t, st, m.ID, func(inv *store.Invoice) { inv.Status = store.StatusPaid })
	}
	deep := paid()
	newPayment(t, st, deep.ID, 10, 1)
	newPayment(t, st, deep.ID, 20, 1)
	shallow := paid() // one payment deep enough, one not
	newPayment(t, st, shallow.ID, 10, 1)
	newPayment(t, st, shallow.ID, 21, 1)
	edge := paid()
	newPayment(t, st, edge.ID, 20, 1)
	pending := newInvoice(t, st, m.ID)
	newPayment(t, st, pending.ID, 1, 1)
	confirmed := newInvoice(t, st, m.ID, func(inv *store.Invoice) { inv.Status = store.StatusConfirmed })
	newPayment(t, st, confirmed.ID, 1, 1)

	ids, err := st.ListConfirmable(ctx, 20, 100)
	require.NoError(t, err)
	require.Equal(t, []int64{deep.ID, edge.ID}, ids)

	ids, err = st.ListConfirmable(ctx, 20, 1)
	require.NoError(t, err)
	require.Equal(t, []int64{deep.ID}, ids, "limit")

	ids, err = st.ListConfirmable(ctx, math.MaxUint64, 100)
	require.NoError(t, err)
	require.Equal(t, []int64{deep.ID, shallow.ID, edge.ID}, ids)

	ids, err = st.ListConfirmable(ctx, 9, 100)
	require.NoError(t, err)
	require.Empty(t, ids)
}

func testListConfirmableSince(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	paid := func(blocks ...uint64) store.Invoice {
		inv := newInvoice(t, st, m.ID, func(inv *store.Invoice) { inv.Status = store.StatusPaid })
		for _, b := range blocks {
			newPayment(t, st, inv.ID, b, 1)
		}
		return inv
	}
	old := paid(10)         // confirmable, but before the range
	inRange := paid(5, 15)  // its last payment in the range
	twice := paid(12, 14)   // two payments in the range: listed once
	shallow := paid(15, 21) // a payment above maxBlock
	edge := paid(20)        // at maxBlock
	lower := paid(11)       // just above after
	pending := newInvoice(t, st, m.ID)
	newPayment(t, st, pending.ID, 15, 1)

	ids, err := st.ListConfirmableSince(ctx, 10, 20, 100)
	require.NoError(t, err)
	require.Equal(t, []int64{inRange.ID, twice.ID, edge.ID, lower.ID}, ids)
	require.NotContains(t, ids, old.ID)
	require.NotContains(t, ids, shallow.ID)

	ids, err = st.ListConfirmableSince(ctx, 10, 20, 2)
	require.NoError(t, err)
	require.Equal(t, []int64{inRange.ID, twice.ID}, ids, "limit")

	ids, err = st.ListConfirmableSince(ctx, 20, 20, 100)
	require.NoError(t, err)
	require.Empty(t, ids, "an empty range")

	ids, err = st.ListConfirmableSince(ctx, 0, math.MaxUint64, 100)
	require.NoError(t, err)
	require.Equal(t, []int64{old.ID, inRange.ID, twice.ID, shallow.ID, edge.ID, lower.ID}, ids)
}

func testSettledBlocks(t *testing.T, st store.Store) {
	hashes := map[uint64]common.Hash{}
	for n := uint64(100); n < 110; n++ {
		hashes[n] = randHash()
		require.NoError(t, st.InsertSettledBlock(ctx, n, hashes[n]))
	}
	require.ErrorIs(t, st.InsertSettledBlock(ctx, 105, randHash()), store.ErrConflict)

	got, err := st.ListSettledBlockHashes(ctx, 103, 105)
	require.NoError(t, err)
	require.Equal(t, map[uint64]common.Hash{103: hashes[103], 104: hashes[104], 105: hashes[105]}, got)

	require.NoError(t, st.DeleteSettledBlocks(ctx, 0, 108)) // a reorg from 108
	require.NoError(t, st.DeleteSettledBlocks(ctx, 102, math.MaxUint64))
	got, err = st.ListSettledBlockHashes(ctx, 0, math.MaxUint64)
	require.NoError(t, err)
	require.Len(t, got, 6)
	require.Contains(t, got, uint64(102))
	require.Contains(t, got, uint64(107))
	require.NotContains(t, got, uint64(101))
	require.NotContains(t, got, uint64(108))
}

func testPendingInvoiceTxs(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	pending := newInvoice(t, st, m.ID)
	paid := newInvoice(t, st, m.ID, func(inv *store.Invoice) { inv.Status = store.StatusPaid })

	old, oldTxs := chainOf(1, 2, 3, randHash())
	fresh, freshTxs := chainOf(3, 1, 3, old[1].Hash)
	fresh[0].IndexedAt = now().Add(10 * time.Minute)
	for i := range freshTxs {
		freshTxs[i].BlockHash = fresh[0].Hash
	}
	oldTxs[1].To = &pending.DepositAddress
	oldTxs[1].ValueWei = store.NewAmount(5)
	oldTxs[4].To = &pending.DepositAddress
	oldTxs[4].ValueWei = store.NewAmount(6)
	oldTxs[2].To = &paid.DepositAddress
	freshTxs[1].To = &pending.DepositAddress
	require.NoError(t, st.InsertBlocks(ctx, append(old, fresh...), append(oldTxs, freshTxs...)))

	rows, err := st.ListPendingInvoiceTxs(ctx, now(), 100)
	require.NoError(t, err)
	require.Len(t, rows, 2, "only PENDING invoices, only blocks indexed before the cutoff")
	require.Equal(t, pending.ID, rows[0].InvoiceID)
	require.Equal(t, pending.AmountWei, rows[0].AmountWei)
	require.Equal(t, oldTxs[1].Hash, rows[0].TxHash)
	require.EqualValues(t, 1, rows[0].BlockNumber)
	require.Equal(t, "5", rows[0].ValueWei.String())
	requireTime(t, now(), rows[0].IndexedAt)
	require.Equal(t, oldTxs[4].Hash, rows[1].TxHash)

	rows, err = st.ListPendingInvoiceTxs(ctx, now().Add(time.Hour), 100)
	require.NoError(t, err)
	require.Len(t, rows, 3)
	rows, err = st.ListPendingInvoiceTxs(ctx, now().Add(-time.Second), 100)
	require.NoError(t, err)
	require.Empty(t, rows)

	// A token invoice counts transfers of its token, never the native coin
	// or another token.
	tokenInv := newInvoice(t, st, m.ID, func(inv *store.Invoice) { inv.SetAsset(usdc()) })
	blocks, txs := chainOf(10, 1, 3, fresh[0].Hash)
	txs[0].To, txs[0].ValueWei = &tokenInv.DepositAddress, store.NewAmount(1_000_000_000_000_000_000)
	trs := transfersOf(blocks, txs, *usdc().Address, 3)
	trs[0].To, trs[0].Value = tokenInv.DepositAddress, store.NewAmount(7)
	trs[1].To, trs[1].Token = tokenInv.DepositAddress, randAddr()
	require.NoError(t, st.InsertBlocks(ctx, blocks, txs))
	require.NoError(t, st.InsertTokenTransfers(ctx, trs))
	rows, err = st.ListPendingInvoiceTxs(ctx, now(), 100)
	require.NoError(t, err)
	require.Len(t, rows, 3)
	require.Equal(t, tokenInv.ID, rows[2].InvoiceID)
	require.Equal(t, trs[0].TxHash, rows[2].TxHash)
	require.Equal(t, "7", rows[2].ValueWei.String(), "the token amount, not the native coin sent alongside")
}

func testUnsweptConfirmed(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	confirmed := func(at time.Time) store.Invoice {
		return newInvoice(t, st, m.ID, func(inv *store.Invoice) {
			inv.Status = store.StatusConfirmed
			inv.SweepStatus = store.SweepQueued
			inv.ConfirmedAt = &at
		})
	}
	older := confirmed(now().Add(-time.Hour))
	old := confirmed(now().Add(-30 * time.Minute))
	recent := confirmed(now())
	swept := confirmed(now().Add(-2 * time.Hour))
	newInvoice(t, st, m.ID, func(inv *store.Invoice) { inv.Status = store.StatusPaid })

	funding := store.SweepTx{InvoiceID: &old.ID, Kind: store.SweepTxFunding, From: randAddr(), To: old.DepositAddress,
		ValueWei: store.NewAmount(1), GasLimit: 21000, MaxFeeWei: store.NewAmount(1), MaxPriorityFeeWei: store.NewAmount(1),
		TxHash: randHash(), RawTx: randBytes(10), Status: store.SweepTxSent, CreatedAt: now(), UpdatedAt: now()}
	require.NoError(t, st.CreateSweepTx(ctx, &funding))
	sweep := funding
	sweep.InvoiceID, sweep.Kind, sweep.TxHash = &swept.ID, store.SweepTxSweep, randHash()
	require.NoError(t, st.CreateSweepTx(ctx, &sweep))
	pulled := confirmed(now().Add(-2 * time.Hour)) // a token sweep by permit: its transferFrom
	pull := funding
	pull.InvoiceID, pull.Kind, pull.TxHash = &pulled.ID, store.SweepTxPull, randHash()
	require.NoError(t, st.CreateSweepTx(ctx, &pull))

	invs, err := st.ListUnsweptConfirmed(ctx, now().Add(-time.Minute), 100)
	require.NoError(t, err)
	require.Equal(t, []int64{older.ID, old.ID}, invoiceIDs(invs),
		"oldest first; a funding transaction is not a sweep, a token's transferFrom is")
	invs, err = st.ListUnsweptConfirmed(ctx, now(), 1)
	require.NoError(t, err)
	require.Equal(t, []int64{older.ID}, invoiceIDs(invs))
	_ = recent
}

func testInsertPayments(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	a := newInvoice(t, st, m.ID)
	b := newInvoice(t, st, m.ID)
	ps := []store.Payment{
		{InvoiceID: a.ID, TxHash: randHash(), LogIndex: store.NativeLogIndex, BlockNumber: 9, BlockHash: randHash(),
			From: randAddr(), AmountWei: maxUint256(), Late: true, CreatedAt: now()},
		{InvoiceID: b.ID, TxHash: randHash(), LogIndex: 2, BlockNumber: 9, BlockHash: randHash(),
			From: randAddr(), AmountWei: store.NewAmount(5), CreatedAt: now()},
	}
	require.NoError(t, st.InTx(ctx, func(tx store.Tx) error { return tx.InsertPayments(ctx, ps) }))
	require.NoError(t, st.InsertPayments(ctx, nil))
	got, err := st.ListPaymentsByInvoice(ctx, a.ID)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.NotZero(t, got[0].ID)
	want := ps[0]
	want.ID = got[0].ID
	require.True(t, want.CreatedAt.Equal(got[0].CreatedAt))
	want.CreatedAt = got[0].CreatedAt
	require.Equal(t, want, got[0])

	dup := []store.Payment{ps[1]}
	dup[0].BlockNumber = 10
	err = st.InTx(ctx, func(tx store.Tx) error { return tx.InsertPayments(ctx, dup) })
	require.ErrorIs(t, err, store.ErrConflict)
	got, err = st.ListPaymentsByInvoice(ctx, b.ID)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.EqualValues(t, 9, got[0].BlockNumber)
}

func testUpdateInvoiceStates(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	var invs []*store.Invoice
	for i := 0; i < 3; i++ {
		inv := newInvoice(t, st, m.ID, func(inv *store.Invoice) { inv.Description = "keep" })
		invs = append(invs, &inv)
	}
	paidAt := now().Add(time.Minute)
	invs[0].Status, invs[0].PaidWei, invs[0].Overpaid, invs[0].PaidAt = store.StatusPaid, maxUint256(), true, &paidAt
	invs[1].Status, invs[1].SweepStatus, invs[1].ConfirmedAt = store.StatusConfirmed, store.SweepQueued, &paidAt
	invs[1].PaidAt = &paidAt
	invs[2].Underpaid, invs[2].PaidLate, invs[2].NeedsAttention = true, true, true
	invs[2].PaidWei = store.NewAmount(1)
	for _, inv := range invs {
		inv.UpdatedAt = paidAt
		inv.Description = "ignored: not a settlement field"
	}
	require.NoError(t, st.InTx(ctx, func(tx store.Tx) error { return tx.UpdateInvoiceStates(ctx, invs) }))
	require.NoError(t, st.UpdateInvoiceStates(ctx, nil))
	for _, inv := range invs {
		require.EqualValues(t, 2, inv.Version, "versions bumped")
		got, err := st.GetInvoice(ctx, inv.ID)
		require.NoError(t, err)
		require.Equal(t, inv.Version, got.Version)
		require.Equal(t, inv.Status, got.Status)
		require.Equal(t, inv.PaidWei, got.PaidWei)
		require.Equal(t, inv.Underpaid, got.Underpaid)
		require.Equal(t, inv.Overpaid, got.Overpaid)
		require.Equal(t, inv.PaidLate, got.PaidLate)
		require.Equal(t, inv.NeedsAttention, got.NeedsAttention)
		require.Equal(t, inv.SweepStatus, got.SweepStatus)
		requireTimePtr(t, inv.PaidAt, got.PaidAt)
		requireTimePtr(t, inv.ConfirmedAt, got.ConfirmedAt)
		requireTime(t, paidAt, got.UpdatedAt)
		require.Equal(t, "keep", got.Description)
	}
	// A stale version is refused by UpdateInvoice too: the versions are shared.
	stale := *invs[0]
	stale.Version = 1
	require.ErrorIs(t, st.UpdateInvoice(ctx, &stale), store.ErrConflict)
}

func testUpdateInvoiceStatesConflict(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	a := newInvoice(t, st, m.ID)
	b := newInvoice(t, st, m.ID)
	other := b
	other.SweepStatus = store.SweepSent // another writer (the sweep) got there first
	require.NoError(t, st.UpdateInvoice(ctx, &other))

	a.Status, b.Status = store.StatusPaid, store.StatusPaid
	err := st.InTx(ctx, func(tx store.Tx) error { return tx.UpdateInvoiceStates(ctx, []*store.Invoice{&a, &b}) })
	require.ErrorIs(t, err, store.ErrConflict)
	got, err := st.GetInvoice(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusPending, got.Status, "rolled back with the transaction")
	got, err = st.GetInvoice(ctx, b.ID)
	require.NoError(t, err)
	require.Equal(t, store.SweepSent, got.SweepStatus)
	require.Equal(t, store.StatusPending, got.Status)
}

func testInsertEvents(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	e1, err := api.InvoiceEvent(store.EventInvoicePaid, inv, now(), nil)
	require.NoError(t, err)
	e2, err := api.InvoiceEvent(store.EventInvoiceConfirmed, inv, now().Add(time.Second), nil)
	require.NoError(t, err)
	require.NoError(t, st.InTx(ctx, func(tx store.Tx) error { return tx.InsertEvents(ctx, []store.Event{e1, e2}) }))
	require.NoError(t, st.InsertEvents(ctx, nil))
	evs, err := st.ListEventsByInvoice(ctx, inv.ID)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.Equal(t, store.EventInvoicePaid, evs[0].Type)
	require.Equal(t, store.EventInvoiceConfirmed, evs[1].Type)
	require.Equal(t, m.ID, evs[1].MerchantID)
	require.JSONEq(t, string(e2.Data), string(evs[1].Data))
	requireTime(t, e2.CreatedAt, evs[1].CreatedAt)
	require.Nil(t, evs[0].DispatchedAt)
	n, err := st.DispatchEvents(ctx, now(), now(), 10)
	require.NoError(t, err)
	require.Equal(t, 2, n, "bulk events are in the outbox like any other")

	// The data is stored byte for byte: what a webhook signs is what
	// settlement wrote (HTML characters, escapes, non-ASCII, big numbers).
	odd := store.Event{Type: store.EventInvoicePaid, MerchantID: m.ID, InvoiceID: inv.ID, CreatedAt: now(),
		Data: store.RawJSON(`{"description":"<b>Tom & Jerry</b> \u00e9 é \"q\" \n","amount":115792089237316195423570985008687907853269984665640564039457584007913129639935,"x":[1.50,-0,{}]}`)}
	require.NoError(t, st.InsertEvents(ctx, []store.Event{odd}))
	evs, err = st.ListEventsByInvoice(ctx, inv.ID)
	require.NoError(t, err)
	require.Len(t, evs, 3)
	require.Equal(t, string(odd.Data), string(evs[2].Data))
}
