package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func settlementTests() []test {
	return []test{
		{"Payment_InsertListDelete", testPayments},
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
