package storetest

import (
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func multiChainTests() []test {
	return []test{
		{"MultiChain_IndexesSideBySide", testChainsSideBySide},
		{"MultiChain_SameTransactionOnTwoChains", testSameTxTwoChains},
		{"MultiChain_UnboundHandleRefuses", testUnboundRefuses},
		{"MultiChain_NamedLocksPerChain", testLocksPerChain},
		{"MultiChain_MoneyOutPerChain", testMoneyOutPerChain},
		{"MultiChain_ServiceWalletOpenedPerChain", testWalletOpenedPerChain},
		{"MultiChain_WrongNetworkPayments", testWrongNetworkPayments},
		{"MultiChain_MoveInvoice", testMoveInvoice},
	}
}

// Two chains in one database: the same block numbers, each chain's own
// blocks, transactions, cursors, identity, checkpoints, finalized block
// and reorgs; a reorg of one deletes nothing of the other.
func testChainsSideBySide(t *testing.T, st store.Store) {
	a, b := st.Chain(1), st.Chain(262144)
	ablocks, atxs := chainOf(0, 4, 2, common.Hash{})
	bblocks, btxs := chainOf(0, 6, 1, common.Hash{})
	require.NoError(t, a.InsertBlocks(ctx, ablocks, atxs))
	require.NoError(t, b.InsertBlocks(ctx, bblocks, btxs))

	for _, c := range []struct {
		st     store.Store
		blocks []store.Block
		txs    []store.Transaction
		other  []store.Transaction
	}{{a, ablocks, atxs, btxs}, {b, bblocks, btxs, atxs}} {
		head, err := c.st.LatestBlock(ctx)
		require.NoError(t, err)
		require.Equal(t, c.blocks[len(c.blocks)-1].Hash, head.Hash)
		got, err := c.st.GetBlock(ctx, 2)
		require.NoError(t, err)
		require.Equal(t, c.blocks[2].Hash, got.Hash)
		_, err = c.st.GetBlockByHash(ctx, c.blocks[1].Hash)
		require.NoError(t, err)
		hashes, err := c.st.ListBlockHashes(ctx, 0, 100)
		require.NoError(t, err)
		require.Len(t, hashes, len(c.blocks))
		_, err = c.st.GetTx(ctx, c.txs[0].Hash)
		require.NoError(t, err)
		_, err = c.st.GetTx(ctx, c.other[0].Hash)
		require.ErrorIs(t, err, store.ErrNotFound, "another chain's transaction")
		in2, err := c.st.ListTxsByBlock(ctx, 2)
		require.NoError(t, err)
		require.Len(t, in2, len(c.txs)/len(c.blocks))
	}

	// Cursors, identities, checkpoints and finalized blocks of one name,
	// one per chain.
	for i, c := range []store.Store{a, b} {
		require.NoError(t, c.SetCursor(ctx, store.Cursor{Name: store.CursorIndexer, BlockNumber: uint64(10 + i),
			BlockHash: common.Hash{byte(i + 1)}, UpdatedAt: now()}))
		require.NoError(t, c.SetFinalizedBlock(ctx, uint64(100+i)))
		require.NoError(t, c.SaveCheckpoints(ctx, []store.Checkpoint{{BlockNumber: 5, BlockHash: common.Hash{byte(i + 7)}, RecordedAt: now()}}))
	}
	idA, err := a.RecordChainIdentity(ctx, store.ChainIdentity{ChainID: 1, GenesisHash: common.Hash{1}, RecordedAt: now()})
	require.NoError(t, err)
	idB, err := b.RecordChainIdentity(ctx, store.ChainIdentity{ChainID: 262144, GenesisHash: common.Hash{2}, RecordedAt: now()})
	require.NoError(t, err)
	require.Equal(t, common.Hash{1}, idA.GenesisHash)
	require.Equal(t, common.Hash{2}, idB.GenesisHash, "a second chain's identity is its own record, not the first's")
	_, err = a.RecordChainIdentity(ctx, store.ChainIdentity{ChainID: 262144, GenesisHash: common.Hash{2}, RecordedAt: now()})
	require.ErrorIs(t, err, store.ErrOtherChain, "a handle on chain 1 records no other chain's identity")
	for i, c := range []store.Store{a, b} {
		cur, err := c.GetCursor(ctx, store.CursorIndexer)
		require.NoError(t, err)
		require.EqualValues(t, 10+i, cur.BlockNumber)
		fin, ok, err := c.FinalizedBlock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.EqualValues(t, 100+i, fin)
		cps, err := c.ListCheckpoints(ctx, 10, 10)
		require.NoError(t, err)
		require.Len(t, cps, 1)
		require.Equal(t, common.Hash{byte(i + 7)}, cps[0].BlockHash)
	}
	require.NoError(t, a.CompareAndSetCursor(ctx, store.CursorSettlement, nil,
		store.Cursor{BlockNumber: 3, BlockHash: ablocks[3].Hash, UpdatedAt: now()}))
	_, err = b.GetCursor(ctx, store.CursorSettlement)
	require.ErrorIs(t, err, store.ErrNotFound, "chain 1's settlement cursor is not chain 262144's")

	// A reorg on chain 1 from block 1 leaves chain 262144 whole.
	require.NoError(t, a.InsertReorg(ctx, &store.Reorg{ForkBlock: 1, Depth: 3, DetectedAt: now()}))
	n, err := a.DeleteBlocksFrom(ctx, 1)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	hashes, err := b.ListBlockHashes(ctx, 0, 100)
	require.NoError(t, err)
	require.Len(t, hashes, len(bblocks))
	rs, err := b.ListReorgs(ctx, 0, 10)
	require.NoError(t, err)
	require.Empty(t, rs, "chain 1's reorg is not chain 262144's")
	rs, err = a.ListReorgs(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, rs, 1)
}

// A transaction replayed on a second chain (pre-EIP-155 signatures have no
// chain) has the same hash on both: each chain indexes it.
func testSameTxTwoChains(t *testing.T, st store.Store) {
	blocks, txs := chainOf(7, 1, 2, common.Hash{})
	require.NoError(t, st.Chain(1).InsertBlocks(ctx, blocks, txs))
	require.NoError(t, st.Chain(10).InsertBlocks(ctx, blocks, txs), "the same block and transactions on another chain")
	err := st.Chain(10).InsertBlocks(ctx, blocks, nil)
	require.ErrorIs(t, err, store.ErrConflict, "but twice on one chain is a conflict")
	transfers := []store.TokenTransfer{{BlockNumber: 7, BlockHash: blocks[0].Hash, TxHash: txs[1].Hash, TxIndex: 1,
		LogIndex: 0, Token: randAddr(), From: randAddr(), To: randAddr(), Value: store.NewAmount(5)}}
	require.NoError(t, st.Chain(1).InsertTokenTransfers(ctx, transfers))
	require.NoError(t, st.Chain(10).InsertTokenTransfers(ctx, transfers))
	for _, c := range []uint64{1, 10} {
		got, err := st.Chain(c).ListTokenTransfersByTx(ctx, txs[1].Hash)
		require.NoError(t, err)
		require.Len(t, got, 1, "chain %d", c)
	}
}

// A handle bound to no chain refuses every chain-scoped call, reads and
// writes alike, and writes nothing; the rest of the store works.
func testUnboundRefuses(t *testing.T, st store.Store) {
	u := st.Chain(0)
	blocks, txs := chainOf(0, 1, 1, common.Hash{})
	require.ErrorIs(t, u.InsertBlocks(ctx, blocks, txs), store.ErrNoChain)
	_, err := u.LatestBlock(ctx)
	require.ErrorIs(t, err, store.ErrNoChain)
	_, err = u.GetCursor(ctx, store.CursorIndexer)
	require.ErrorIs(t, err, store.ErrNoChain)
	require.ErrorIs(t, u.SetCursor(ctx, store.Cursor{Name: "x", UpdatedAt: time.Now()}), store.ErrNoChain)
	_, err = u.GetChainIdentity(ctx)
	require.ErrorIs(t, err, store.ErrNoChain)
	_, _, err = u.FinalizedBlock(ctx)
	require.ErrorIs(t, err, store.ErrNoChain)
	_, err = u.ListInvoiceTxsInBlock(ctx, 0, nil)
	require.ErrorIs(t, err, store.ErrNoChain)
	_, err = st.LatestBlock(ctx)
	require.ErrorIs(t, err, store.ErrNotFound, "nothing was written")
	_, err = u.GetMerchant(ctx, 1)
	require.ErrorIs(t, err, store.ErrNotFound, "merchants are not chain-scoped")
}

// Each chain's single-runner work has a runner of its own: a named lock
// taken through one chain's handle leaves the other chain's free.
func testLocksPerChain(t *testing.T, st store.Store) {
	a, err := st.Chain(1).TryLock(ctx, "indexer")
	require.NoError(t, err)
	defer a.Unlock()
	b, err := st.Chain(2).TryLock(ctx, "indexer")
	require.NoError(t, err, "chain 2's indexer lock is its own")
	defer b.Unlock()
	_, err = st.Chain(1).TryLock(ctx, "indexer")
	require.ErrorIs(t, err, store.ErrLocked, "a second runner of chain 1's indexer is refused")
}

// What the sweep and the refund engine read is their chain's: one wallet
// address has a nonce sequence per chain, its unsent transactions and the
// sweeps, refunds, payouts and ledger entries due are the chain's.
func testMoneyOutPerChain(t *testing.T, st store.Store) {
	a, b := st.Chain(1337), st.Chain(10)
	wallet := randAddr()
	for _, c := range []store.Store{a, b} {
		n, err := c.ReserveNonce(ctx, wallet, 4)
		require.NoError(t, err)
		require.EqualValues(t, 4, n, "each chain's sequence starts at its own chain nonce")
	}
	n, err := a.ReserveNonce(ctx, wallet, 0)
	require.NoError(t, err)
	require.EqualValues(t, 5, n)
	n, err = b.ReserveNonce(ctx, wallet, 0)
	require.NoError(t, err)
	require.EqualValues(t, 5, n, "chain 10's sequence did not move with chain 1337's")

	m := newMerchant(t, st)
	onA := newInvoice(t, a, m.ID, func(inv *store.Invoice) {
		inv.Status, inv.SweepStatus = store.StatusConfirmed, store.SweepQueued
	})
	onB := newInvoice(t, b, m.ID, func(inv *store.Invoice) {
		inv.ChainID, inv.Status, inv.SweepStatus = 10, store.StatusConfirmed, store.SweepQueued
	})
	for _, c := range []struct {
		st  store.Store
		inv store.Invoice
	}{{a, onA}, {b, onB}} {
		claimed, err := c.st.ClaimSweeps(ctx, now(), time.Minute, 10)
		require.NoError(t, err)
		require.Equal(t, []int64{c.inv.ID}, invoiceIDs(claimed), "a chain's sweep claims its chain's invoices")
		queued, err := c.st.ListInvoicesBySweepStatus(ctx, store.SweepQueued, 0, 10)
		require.NoError(t, err)
		require.Equal(t, []int64{c.inv.ID}, invoiceIDs(queued))

		tx := store.SweepTx{InvoiceID: &c.inv.ID, Kind: store.SweepTxFunding, From: wallet, To: c.inv.DepositAddress,
			Nonce: 5, ValueWei: store.NewAmount(1), GasLimit: 21000, MaxFeeWei: store.NewAmount(2),
			MaxPriorityFeeWei: store.NewAmount(1), TxHash: randHash(), RawTx: randBytes(10),
			Status: store.SweepTxSigned, CreatedAt: now(), UpdatedAt: now()}
		require.NoError(t, c.st.CreateSweepTx(ctx, &tx), "nonce 5 on each chain: no conflict")
		unmined, err := c.st.ListUnminedSweepTxs(ctx, wallet)
		require.NoError(t, err)
		require.Len(t, unmined, 1, "the wallet's unmined transactions on this chain only")
		require.Equal(t, tx.TxHash, unmined[0].TxHash)
		byNonce, err := c.st.ListSweepTxsByNonce(ctx, wallet, store.SweepTxFunding, 5)
		require.NoError(t, err)
		require.Len(t, byNonce, 1)
		byHash, err := c.st.ListSweepTxsByHashes(ctx, []common.Hash{unmined[0].TxHash})
		require.NoError(t, err)
		require.Len(t, byHash, 1)

		o := newOutbound(t, c.st, m) // a payout, sent on this chain
		claimedOut, err := c.st.ClaimOutbounds(ctx, now().Add(time.Hour), time.Minute, 10)
		require.NoError(t, err)
		require.Len(t, claimedOut, 1, "a chain's refund engine claims its chain's refunds")
		require.Equal(t, o.ID, claimedOut[0].ID)

		require.NoError(t, c.st.InsertLedgerEntries(ctx, []store.LedgerEntry{{Kind: store.LedgerGasFee,
			MerchantID: &m.ID, Amount: store.NewAmount(3), At: now(), RecordedAt: now(), BlockNumber: ptr(uint64(1))}}))
		es, err := c.st.ScanLedgerEntries(ctx, store.LedgerScan{MaxBlock: 100, Limit: 10})
		require.NoError(t, err)
		require.Len(t, es, 1, "a chain's ledger scan reads its chain's entries")
	}
}

// A service wallet is one record, and one opening block of the ledger per
// chain: registered with its opening block through chain 1337, it is
// unopened on chain 10 until chain 10's ledger opens it.
func testWalletOpenedPerChain(t *testing.T, st store.Store) {
	a, b := st.Chain(1337), st.Chain(10)
	w := store.ServiceWallet{Address: randAddr(), Role: store.WalletSweep, CreatedAt: now(), LedgerFromBlock: ptr(uint64(5))}
	require.NoError(t, a.RegisterServiceWallet(ctx, w))
	got, err := b.GetServiceWallet(ctx, w.Address)
	require.NoError(t, err, "one wallet, every chain")
	require.Nil(t, got.LedgerFromBlock, "not opened on chain 10")
	n, err := b.OpenServiceWallets(ctx, 9)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	for _, c := range []struct {
		st   store.Store
		from uint64
	}{{a, 5}, {b, 9}} {
		ws, err := c.st.ListServiceWallets(ctx)
		require.NoError(t, err)
		require.Len(t, ws, 1)
		require.NotNil(t, ws[0].LedgerFromBlock)
		require.Equal(t, c.from, *ws[0].LedgerFromBlock)
	}
	// Registering it again through chain 1337 with another block changes
	// nothing: its opening block there is recorded.
	w.LedgerFromBlock = ptr(uint64(77))
	require.NoError(t, a.RegisterServiceWallet(ctx, w))
	got, err = a.GetServiceWallet(ctx, w.Address)
	require.NoError(t, err)
	require.Equal(t, uint64(5), *got.LedgerFromBlock)
}

// A payment carries the chain it arrived on, that of the handle that
// recorded it: the deposit address of an invoice of chain 1337 paid on
// chain 10 is found by chain 10's block reads and recorded there as a
// wrong-network payment. The same transaction hash and log index are one
// payment per chain; a reorg of one chain deletes only that chain's
// payments; the ledger entry is on the payment's chain; confirmations
// wait only for the invoice's own chain's counted payments; a flagged
// invoice is never archived.
func testWrongNetworkPayments(t *testing.T, st store.Store) {
	a, b := st.Chain(1337), st.Chain(10)
	m := newMerchant(t, st)
	inv := newInvoice(t, a, m.ID) // an invoice of chain 1337

	// Chain 10's block 5 pays the invoice's deposit address; so does
	// chain 1337's block 5.
	for _, c := range []store.Store{a, b} {
		blk := store.Block{Number: 5, Hash: randHash(), Timestamp: 1_700_000_000, Miner: randAddr(),
			GasLimit: 30_000_000, IndexedAt: now()}
		to := inv.DepositAddress
		tx := store.Transaction{Hash: randHash(), BlockNumber: 5, BlockHash: blk.Hash, From: randAddr(), To: &to,
			ValueWei: store.NewAmount(7), Gas: 21000, Type: 2, Input: []byte{}}
		require.NoError(t, c.InsertBlocks(ctx, []store.Block{blk}, []store.Transaction{tx}))
	}
	found, err := b.ListInvoiceTxsInBlock(ctx, 5, nil)
	require.NoError(t, err)
	require.Len(t, found, 1, "chain 10's block reads find the deposit address of chain 1337's invoice")
	require.Equal(t, inv.ID, found[0].InvoiceID)
	require.EqualValues(t, 10, found[0].ChainID, "the transaction's chain")
	found, err = b.ListInvoiceTxsInBlock(ctx, 5, []common.Address{inv.DepositAddress})
	require.NoError(t, err)
	require.Len(t, found, 1, "restricted to the recipient too")
	own, err := a.ListInvoiceTxsInBlock(ctx, 5, nil)
	require.NoError(t, err)
	require.Len(t, own, 1)
	require.EqualValues(t, 1337, own[0].ChainID)

	// One transaction hash and log index, one payment per chain.
	hash := randHash()
	onA := store.Payment{InvoiceID: inv.ID, TxHash: hash, LogIndex: store.NativeLogIndex, BlockNumber: 5,
		BlockHash: randHash(), From: randAddr(), AmountWei: store.NewAmount(1_000), CreatedAt: now()}
	require.NoError(t, a.InsertPayment(ctx, &onA))
	require.EqualValues(t, 1337, onA.ChainID, "the store records the handle's chain")
	onB := onA
	onB.ID, onB.ChainID, onB.WrongNetwork, onB.AmountWei, onB.BlockNumber = 0, 0, true, store.NewAmount(7), 5
	require.NoError(t, b.InsertPayments(ctx, []store.Payment{onB}), "the same hash and log index on another chain")
	again := onA
	again.ID = 0
	require.ErrorIs(t, a.InsertPayment(ctx, &again), store.ErrConflict, "twice on one chain is a conflict")
	unbound := onA
	unbound.ID, unbound.TxHash = 0, randHash()
	require.ErrorIs(t, st.Chain(0).InsertPayment(ctx, &unbound), store.ErrNoChain)
	require.ErrorIs(t, st.Chain(0).InsertPayments(ctx, []store.Payment{unbound}), store.ErrNoChain)

	ps, err := a.ListPaymentsByInvoice(ctx, inv.ID)
	require.NoError(t, err)
	require.Len(t, ps, 2, "an invoice's payments of every chain")
	byChain := map[uint64]store.Payment{}
	for _, p := range ps {
		byChain[p.ChainID] = p
	}
	require.False(t, byChain[1337].WrongNetwork)
	require.True(t, byChain[1337].Counted())
	require.True(t, byChain[10].WrongNetwork)
	require.False(t, byChain[10].Counted(), "a wrong-network payment never counts")
	batch, err := b.ListPaymentsByInvoices(ctx, []int64{inv.ID})
	require.NoError(t, err)
	require.Len(t, batch, 2)

	// The ledger: each payment's entry on the chain it arrived on.
	for _, c := range []struct {
		st     store.Store
		chain  uint64
		amount string
	}{{a, 1337, "1000"}, {b, 10, "7"}} {
		es, err := c.st.ScanLedgerEntries(ctx, store.LedgerScan{MaxBlock: 100, Limit: 10})
		require.NoError(t, err)
		require.Len(t, es, 1, "chain %d's ledger holds its own payment", c.chain)
		require.Equal(t, store.LedgerPayment, es[0].Kind)
		require.Equal(t, c.chain, es[0].ChainID)
		require.Equal(t, c.amount, es[0].Amount.String())
		require.Equal(t, inv.DepositAddress, *es[0].To, "money at the deposit address on chain %d", c.chain)
		require.Equal(t, m.ID, *es[0].MerchantID)
	}

	// Confirmations: a PAID invoice of chain 1337 waits for its counted
	// payment at block 5 only, not for a wrong-network payment high on
	// chain 10; chain 10 lists none of chain 1337's invoices.
	require.NoError(t, st.InTx(ctx, func(tx store.Tx) error {
		invs, err := tx.GetInvoicesForUpdate(ctx, []int64{inv.ID})
		if err != nil {
			return err
		}
		invs[0].Status = store.StatusPaid
		return tx.UpdateInvoiceStates(ctx, []*store.Invoice{&invs[0]})
	}))
	high := onA
	high.ID, high.TxHash, high.BlockNumber, high.WrongNetwork = 0, randHash(), 500, true
	require.NoError(t, b.InsertPayment(ctx, &high))
	ids, err := a.ListConfirmable(ctx, 10, 10)
	require.NoError(t, err)
	require.Equal(t, []int64{inv.ID}, ids, "the wrong-network payment at block 500 of chain 10 holds nothing back")
	ids, err = a.ListConfirmableSince(ctx, 4, 10, 10)
	require.NoError(t, err)
	require.Equal(t, []int64{inv.ID}, ids)
	ids, err = a.ListConfirmableSince(ctx, 100, 1000, 10)
	require.NoError(t, err)
	require.Empty(t, ids, "chain 1337's block range holds no payment of it: chain 10's block 500 is not chain 1337's")
	ids, err = b.ListConfirmable(ctx, 1000, 10)
	require.NoError(t, err)
	require.Empty(t, ids, "chain 10 confirms its own invoices only")

	// A reorg of chain 10 from block 5 deletes chain 10's payments only,
	// and reverses their ledger entries on chain 10.
	gone, err := b.DeletePaymentsFromBlock(ctx, 5)
	require.NoError(t, err)
	require.Len(t, gone, 2)
	for _, p := range gone {
		require.EqualValues(t, 10, p.ChainID)
		require.True(t, p.WrongNetwork)
	}
	ps, err = a.ListPaymentsByInvoice(ctx, inv.ID)
	require.NoError(t, err)
	require.Len(t, ps, 1, "chain 1337's payment at the same block number stays")
	require.Equal(t, onA.ID, ps[0].ID)
	es, err := b.ScanLedgerEntries(ctx, store.LedgerScan{MaxBlock: 1000, Limit: 10})
	require.NoError(t, err)
	require.Len(t, es, 4, "chain 10: two entries and their reversals")
	for _, e := range es {
		require.EqualValues(t, 10, e.ChainID)
	}
	es, err = a.ScanLedgerEntries(ctx, store.LedgerScan{MaxBlock: 1000, Limit: 10})
	require.NoError(t, err)
	require.Len(t, es, 1, "chain 1337's ledger untouched")

	// An expired invoice that only ever got a wrong-network payment is
	// flagged, and a flagged invoice is never archived.
	old := newInvoice(t, a, m.ID, func(i *store.Invoice) {
		i.Status, i.NeedsAttention, i.CreatedAt = store.StatusExpired, true, now().Add(-400*24*time.Hour)
	})
	stray := store.Payment{InvoiceID: old.ID, TxHash: randHash(), LogIndex: store.NativeLogIndex, BlockNumber: 9,
		BlockHash: randHash(), From: randAddr(), AmountWei: store.NewAmount(3), CreatedAt: now(), WrongNetwork: true}
	require.NoError(t, b.InsertPayment(ctx, &stray))
	clean := newInvoice(t, a, m.ID, func(i *store.Invoice) {
		i.Status, i.CreatedAt = store.StatusExpired, now().Add(-400*24*time.Hour)
	})
	moved, err := st.ArchiveInvoices(ctx, now().Add(-365*24*time.Hour), 10)
	require.NoError(t, err)
	require.Equal(t, 1, moved, "the unflagged expired invoice only")
	_, err = st.GetInvoice(ctx, old.ID)
	require.NoError(t, err, "the invoice with a wrong-network payment stays")
	_, err = st.GetInvoice(ctx, clean.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// A fiat invoice of chain 1337 quoting its token on chain 1338 too moves
// there (Invoice.MoveToChain, MoveInvoice): its chain, asset, amount,
// payment URI and pricing are written, fenced by its version; a stale
// copy conflicts. Each chain's ListExpiring lists its own chain's
// invoices: the moved one is chain 1338's.
func testMoveInvoice(t *testing.T, st store.Store) {
	a, b := st.Chain(1337), st.Chain(1338)
	m := newMerchant(t, st)
	p := fiatPricing()
	onB := p.Quotes[0]
	onB.ChainID, onB.Amount, onB.PaymentURI = 1338, store.NewAmount(99_800_000), "ethereum:0xC1@1338/transfer"
	onB.Rate = store.MustParseDecimal("0.5")
	p.Quotes = append(p.Quotes, onB)
	require.NoError(t, p.Validate())
	inv := newInvoice(t, a, m.ID, fiatInvoice(p), func(i *store.Invoice) {
		i.PaymentURI = p.Quotes[0].PaymentURI
		i.ExpiresAt = now().Add(-time.Minute)
	})
	stale := inv

	other := randAddr()
	require.False(t, inv.MoveToChain(1338, &other), "no quote of that token on 1338")
	require.False(t, inv.MoveToChain(1337, &fiatToken), "on 1337 already")
	require.False(t, inv.MoveToChain(10, &fiatToken), "no quote on chain 10")
	require.True(t, inv.AcceptsOn(1338, &fiatToken))
	require.False(t, inv.AcceptsOn(1338, nil), "the native coin is quoted on 1337 only")
	require.True(t, inv.MoveToChain(1338, &fiatToken))
	inv.UpdatedAt = now()
	require.NoError(t, b.InTx(ctx, func(tx store.Tx) error { return tx.MoveInvoice(ctx, &inv) }))
	require.Equal(t, stale.Version+1, inv.Version)

	got, err := st.GetInvoice(ctx, inv.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1338, got.ChainID)
	require.Equal(t, fiatToken, *got.TokenAddress)
	require.Equal(t, "USDC", got.AssetSymbol)
	require.EqualValues(t, 6, got.AssetDecimals)
	require.Equal(t, "99800000", got.AmountWei.String())
	require.Equal(t, "ethereum:0xC1@1338/transfer", got.PaymentURI)
	require.Equal(t, inv.Version, got.Version)
	require.Len(t, got.Pricing.Quotes, 3)
	require.EqualValues(t, 1338, got.Pricing.Quotes[0].ChainID, "its own quote first")
	require.Equal(t, "0.5", got.Pricing.Quotes[0].Rate.String())
	for _, q := range got.Pricing.Quotes[1:] {
		require.EqualValues(t, 1337, q.ChainID, "the quotes that named no chain name 1337")
	}
	require.True(t, got.Accepts(&fiatToken))
	require.False(t, got.Accepts(nil), "on 1338 the native coin is not quoted")
	require.True(t, got.AcceptsOn(1337, nil), "on 1337 it is, still")

	stale.ChainID = 1337
	require.ErrorIs(t, a.InTx(ctx, func(tx store.Tx) error { return tx.MoveInvoice(ctx, &stale) }), store.ErrConflict)

	exp, err := a.ListExpiring(ctx, now(), 10)
	require.NoError(t, err)
	require.NotContains(t, invoiceIDs(exp), inv.ID, "chain 1337 no longer expires it")
	exp, err = b.ListExpiring(ctx, now(), 10)
	require.NoError(t, err)
	require.Contains(t, invoiceIDs(exp), inv.ID, "chain 1338 does")
	_, err = st.Chain(0).ListExpiring(ctx, now(), 10)
	require.ErrorIs(t, err, store.ErrNoChain)
}
