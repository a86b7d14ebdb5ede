package storetest

import (
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func tokenTests() []test {
	return []test{
		{"Token_InvoiceAssetRoundTrip", testTokenInvoiceAsset},
		{"Token_TransfersWithBlocks_ListedAndRemovedWithTheirBlock", testTokenTransfers},
		{"Token_TransfersByAddressPages", testTokenTransfersByAddress},
		{"Token_DuplicateTransfer_ConflictAndNothingWritten", testTokenTransferConflict},
		{"Token_PaymentsKeepTokenAndWrongAsset", testTokenPayments},
		{"Token_ListConfirmable_IgnoresWrongAssetPayments", testConfirmableWrongAsset},
		{"Token_InvoiceTokenTransfersInBlock", testInvoiceTokenTransfersInBlock},
	}
}

func usdc() store.Asset {
	a := common.HexToAddress("0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48")
	return store.Asset{Symbol: "USDC", Address: &a, Decimals: 6}
}

func testTokenInvoiceAsset(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	native := newInvoice(t, st, m.ID)
	tok := newInvoice(t, st, m.ID, func(inv *store.Invoice) {
		inv.SetAsset(usdc())
		inv.AmountWei = store.NewAmount(12_500_000)
	})

	got, err := st.GetInvoice(ctx, native.ID)
	require.NoError(t, err)
	require.Nil(t, got.TokenAddress, "a native invoice has no token")
	require.True(t, got.Asset().IsNative())
	require.EqualValues(t, store.NativeDecimals, got.Asset().Decimals)

	got, err = st.GetInvoice(ctx, tok.ID)
	require.NoError(t, err)
	require.Equal(t, usdc(), got.Asset())
	require.Equal(t, "12.5", got.Asset().Format(got.AmountWei))

	// The bulk insert writes the asset too; an update keeps it.
	bulk := store.Invoice{MerchantID: m.ID, Status: store.StatusPending, AmountWei: store.NewAmount(1),
		ChainID: 1337, DepositAddress: randAddr(), DerivationIndex: 1 << 20, PaymentURI: "ethereum:x",
		LookupTokenHash: randBytes(32), ExpiresAt: now(), CreatedAt: now(), UpdatedAt: now(),
		SweepStatus: store.SweepNone}
	bulk.SetAsset(usdc())
	require.NoError(t, st.CreateInvoices(ctx, []*store.Invoice{&bulk}))
	got, err = st.GetInvoice(ctx, bulk.ID)
	require.NoError(t, err)
	require.Equal(t, usdc(), got.Asset())
	got.NeedsAttention = true
	require.NoError(t, st.UpdateInvoice(ctx, &got))
	got, err = st.GetInvoice(ctx, bulk.ID)
	require.NoError(t, err)
	require.Equal(t, usdc(), got.Asset())
	list, err := st.ListInvoices(ctx, store.InvoiceFilter{MerchantID: m.ID})
	require.NoError(t, err)
	require.Len(t, list, 3)
	require.Equal(t, usdc(), list[0].Asset())
	require.Nil(t, list[2].TokenAddress)
}

// transfersOf builds n token transfers in each block, values up to 2^256-1.
func transfersOf(blocks []store.Block, txs []store.Transaction, token common.Address, n int) []store.TokenTransfer {
	var out []store.TokenTransfer
	for _, b := range blocks {
		for i := 0; i < n; i++ {
			tr := store.TokenTransfer{BlockNumber: b.Number, BlockHash: b.Hash, LogIndex: i, Token: token,
				From: randAddr(), To: randAddr(), Value: maxUint256()}
			for _, tx := range txs {
				if tx.BlockNumber == b.Number {
					tr.TxHash, tr.TxIndex = tx.Hash, tx.Index
				}
			}
			out = append(out, tr)
		}
	}
	return out
}

func testTokenTransfers(t *testing.T, st store.Store) {
	token := randAddr()
	blocks, txs := chainOf(0, 4, 2, common.Hash{})
	trs := transfersOf(blocks, txs, token, 3)
	trs[4].Value = store.NewAmount(1)
	require.NoError(t, st.InTx(ctx, func(tx store.Tx) error {
		if err := tx.InsertBlocks(ctx, blocks, txs); err != nil {
			return err
		}
		return tx.InsertTokenTransfers(ctx, trs)
	}))

	got, err := st.ListTokenTransfersByTx(ctx, trs[4].TxHash)
	require.NoError(t, err)
	require.Equal(t, trs[3:6], got, "every field round-trips, by log index")
	require.Equal(t, maxUint256(), got[0].Value)
	none, err := st.ListTokenTransfersByTx(ctx, randHash())
	require.NoError(t, err)
	require.Empty(t, none)

	n, err := st.DeleteBlocksFrom(ctx, 2)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	gone, err := st.ListTokenTransfersByTx(ctx, trs[9].TxHash)
	require.NoError(t, err)
	require.Empty(t, gone, "token transfers leave with their block")
	kept, err := st.ListTokenTransfersByTx(ctx, trs[3].TxHash)
	require.NoError(t, err)
	require.Len(t, kept, 3)
	// The same positions can be indexed again on the new branch.
	blocks2, txs2 := chainOf(2, 1, 1, blocks[1].Hash)
	require.NoError(t, st.InTx(ctx, func(tx store.Tx) error {
		if err := tx.InsertBlocks(ctx, blocks2, txs2); err != nil {
			return err
		}
		return tx.InsertTokenTransfers(ctx, transfersOf(blocks2, txs2, token, 3))
	}))
}

func testTokenTransfersByAddress(t *testing.T, st store.Store) {
	addr := randAddr()
	blocks, txs := chainOf(100, 4, 1, randHash())
	trs := transfersOf(blocks, txs, randAddr(), 3)
	// addr receives log 1 of every block, sends log 2 of blocks 101 and
	// 103, and sends to itself in block 102.
	for i := range trs {
		switch {
		case trs[i].LogIndex == 1:
			trs[i].To = addr
		case trs[i].LogIndex == 2 && trs[i].BlockNumber%2 == 1:
			trs[i].From = addr
		}
		if trs[i].BlockNumber == 102 && trs[i].LogIndex == 1 {
			trs[i].From = addr
		}
	}
	require.NoError(t, st.InsertBlocks(ctx, blocks, txs))
	require.NoError(t, st.InsertTokenTransfers(ctx, trs))

	type pos struct {
		block uint64
		log   int
	}
	want := []pos{{103, 2}, {103, 1}, {102, 1}, {101, 2}, {101, 1}, {100, 1}}
	var got []pos
	var beforeBlock uint64
	beforeLog := 0
	for {
		page, err := st.ListTokenTransfersByAddress(ctx, addr, beforeBlock, beforeLog, 4)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		require.LessOrEqual(t, len(page), 4)
		for _, tr := range page {
			got = append(got, pos{tr.BlockNumber, tr.LogIndex})
		}
		last := page[len(page)-1]
		beforeBlock, beforeLog = last.BlockNumber, last.LogIndex
	}
	require.Equal(t, want, got, "newest first, each transfer once, across pages")
}

func testTokenTransferConflict(t *testing.T, st store.Store) {
	blocks, txs := chainOf(5, 1, 1, randHash())
	trs := transfersOf(blocks, txs, randAddr(), 2)
	require.NoError(t, st.InsertTokenTransfers(ctx, trs[:1]))
	err := st.InTx(ctx, func(tx store.Tx) error {
		if err := tx.InsertBlocks(ctx, blocks, txs); err != nil {
			return err
		}
		return tx.InsertTokenTransfers(ctx, trs)
	})
	require.ErrorIs(t, err, store.ErrConflict)
	_, err = st.GetBlock(ctx, 5)
	require.ErrorIs(t, err, store.ErrNotFound, "the block rolled back with its transfers")
	got, err := st.ListTokenTransfersByTx(ctx, trs[0].TxHash)
	require.NoError(t, err)
	require.Len(t, got, 1)
}

func testTokenPayments(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID, func(inv *store.Invoice) { inv.SetAsset(usdc()) })
	token := *usdc().Address
	other := randAddr()
	one := store.Payment{InvoiceID: inv.ID, TxHash: randHash(), LogIndex: 0, BlockNumber: 10,
		BlockHash: randHash(), From: randAddr(), AmountWei: maxUint256(), CreatedAt: now(), Token: &token}
	require.NoError(t, st.InsertPayment(ctx, &one))
	bulk := []store.Payment{
		{InvoiceID: inv.ID, TxHash: randHash(), LogIndex: 4, BlockNumber: 11, BlockHash: randHash(),
			From: randAddr(), AmountWei: store.NewAmount(7), CreatedAt: now(), Token: &other, WrongAsset: true},
		{InvoiceID: inv.ID, TxHash: randHash(), LogIndex: store.NativeLogIndex, BlockNumber: 12,
			BlockHash: randHash(), From: randAddr(), AmountWei: store.NewAmount(9), CreatedAt: now(), WrongAsset: true},
	}
	require.NoError(t, st.InsertPayments(ctx, bulk))

	ps, err := st.ListPaymentsByInvoice(ctx, inv.ID)
	require.NoError(t, err)
	require.Len(t, ps, 3)
	require.Equal(t, token, *ps[0].Token)
	require.False(t, ps[0].WrongAsset)
	require.Equal(t, maxUint256(), ps[0].AmountWei)
	require.Equal(t, other, *ps[1].Token)
	require.True(t, ps[1].WrongAsset)
	require.Nil(t, ps[2].Token, "native coin")
	require.True(t, ps[2].WrongAsset)

	batch, err := st.ListPaymentsByInvoices(ctx, []int64{inv.ID})
	require.NoError(t, err)
	require.Equal(t, ps, batch)
	removed, err := st.DeletePaymentsFromBlock(ctx, 11)
	require.NoError(t, err)
	require.Len(t, removed, 2)
	for _, p := range removed {
		require.True(t, p.WrongAsset)
	}
}

func testConfirmableWrongAsset(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID, func(inv *store.Invoice) { inv.Status = store.StatusPaid })
	newPayment(t, st, inv.ID, 10, 1)
	wrong := store.Payment{InvoiceID: inv.ID, TxHash: randHash(), LogIndex: 0, BlockNumber: 30,
		BlockHash: randHash(), From: randAddr(), AmountWei: store.NewAmount(5), CreatedAt: now(),
		Token: ptr(randAddr()), WrongAsset: true}
	require.NoError(t, st.InsertPayment(ctx, &wrong))
	ids, err := st.ListConfirmable(ctx, 20, 100)
	require.NoError(t, err)
	require.Equal(t, []int64{inv.ID}, ids, "a later payment in the wrong asset does not hold back confirmation")
	ids, err = st.ListConfirmableSince(ctx, 5, 20, 100)
	require.NoError(t, err)
	require.Equal(t, []int64{inv.ID}, ids)
	ids, err = st.ListConfirmableSince(ctx, 20, 40, 100)
	require.NoError(t, err)
	require.Empty(t, ids, "a wrong-asset payment in the range does not make an invoice a candidate")
}

func ptr[T any](v T) *T { return &v }

func testInvoiceTokenTransfersInBlock(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	a := newInvoice(t, st, m.ID, func(inv *store.Invoice) { inv.SetAsset(usdc()) })
	b := newInvoice(t, st, m.ID)
	blocks, txs := chainOf(7, 2, 3, randHash())
	trs := transfersOf(blocks, txs, *usdc().Address, 4)
	trs[1].To = a.DepositAddress
	trs[2].To = b.DepositAddress
	trs[3].To = a.DepositAddress
	trs[6].To = b.DepositAddress // block 8
	trs[6].TxHash = txs[4].Hash
	require.NoError(t, st.InsertBlocks(ctx, blocks, txs))
	require.NoError(t, st.InsertTokenTransfers(ctx, trs))

	got, err := st.ListInvoiceTokenTransfersInBlock(ctx, 7, nil)
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, []int64{a.ID, b.ID, a.ID}, []int64{got[0].InvoiceID, got[1].InvoiceID, got[2].InvoiceID})
	require.Equal(t, trs[2], got[1].TokenTransfer)
	got, err = st.ListInvoiceTokenTransfersInBlock(ctx, 8, nil)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, b.ID, got[0].InvoiceID)

	// A transaction the sweep sent is not a payment.
	sweep := store.SweepTx{InvoiceID: &b.ID, Kind: store.SweepTxFunding, From: randAddr(),
		To: b.DepositAddress, ValueWei: store.NewAmount(0), GasLimit: 60000,
		MaxFeeWei: store.NewAmount(1), MaxPriorityFeeWei: store.NewAmount(1), TxHash: txs[4].Hash,
		RawTx: []byte{1}, Status: store.SweepTxMined, CreatedAt: now(), UpdatedAt: now()}
	require.NoError(t, st.CreateSweepTx(ctx, &sweep))
	got, err = st.ListInvoiceTokenTransfersInBlock(ctx, 8, nil)
	require.NoError(t, err)
	require.Empty(t, got)
}
