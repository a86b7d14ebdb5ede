package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func chainTests() []test {
	return []test{
		{"Chain_BlocksAndTransactions", testChain},
		{"Chain_TxsByAddressPages", testTxsByAddress},
		{"Chain_DuplicateBlock_ConflictAndNothingWritten", testChainConflict},
		{"Chain_Reorgs", testReorgs},
		{"Chain_BlocksAndCursorCommitTogether", testBlocksWithCursor},
		{"Chain_ReorgDeleteInOneTransaction", testReorgInTx},
		{"Chain_ManyBlocksInOneInsert", testManyBlocks},
		{"Cursor_SetGet", testCursors},
	}
}

// chainOf builds n linked blocks from number `from`, each with txsPer
// transactions (values up to 2^256-1).
func chainOf(from uint64, n, txsPer int, parent common.Hash) ([]store.Block, []store.Transaction) {
	var (
		blocks []store.Block
		txs    []store.Transaction
	)
	for i := 0; i < n; i++ {
		fee := store.NewAmount(7)
		b := store.Block{Number: from + uint64(i), Hash: randHash(), ParentHash: parent,
			Timestamp: 1_700_000_000 + uint64(i), Miner: randAddr(), GasLimit: 30_000_000,
			GasUsed: 21_000 * uint64(txsPer), BaseFeeWei: &fee, TxCount: txsPer, IndexedAt: now()}
		blocks = append(blocks, b)
		parent = b.Hash
		for j := 0; j < txsPer; j++ {
			to := randAddr()
			tip := store.NewAmount(1)
			tx := store.Transaction{Hash: randHash(), BlockNumber: b.Number, BlockHash: b.Hash, Index: j,
				From: randAddr(), To: &to, ValueWei: maxUint256(), Nonce: uint64(j), Gas: 21000, Type: 2,
				MaxFeeWei: &fee, MaxPriorityFeeWei: &tip, Input: []byte{}}
			if j == 0 {
				tx.To = nil // a contract creation
				tx.Input = []byte{0x60, 0x80}
				tx.ValueWei = store.Amount{}
			}
			txs = append(txs, tx)
		}
	}
	return blocks, txs
}

func testChain(t *testing.T, st store.Store) {
	_, err := st.LatestBlock(ctx)
	require.ErrorIs(t, err, store.ErrNotFound)

	blocks, txs := chainOf(0, 5, 3, common.Hash{})
	require.NoError(t, st.InsertBlocks(ctx, blocks, txs))

	latest, err := st.LatestBlock(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4, latest.Number)
	require.Equal(t, blocks[4].Hash, latest.Hash)
	require.Equal(t, blocks[3].Hash, latest.ParentHash)
	require.Equal(t, blocks[4].Miner, latest.Miner)
	require.Equal(t, "7", latest.BaseFeeWei.String())
	require.Equal(t, 3, latest.TxCount)

	b2, err := st.GetBlock(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, blocks[2].Hash, b2.Hash)
	byHash, err := st.GetBlockByHash(ctx, blocks[3].Hash)
	require.NoError(t, err)
	require.EqualValues(t, 3, byHash.Number)
	_, err = st.GetBlock(ctx, 99)
	require.ErrorIs(t, err, store.ErrNotFound)

	hashes, err := st.ListBlockHashes(ctx, 1, 3)
	require.NoError(t, err)
	require.Equal(t, map[uint64]common.Hash{1: blocks[1].Hash, 2: blocks[2].Hash, 3: blocks[3].Hash}, hashes)

	inBlock, err := st.ListTxsByBlock(ctx, 2)
	require.NoError(t, err)
	require.Len(t, inBlock, 3)
	require.Nil(t, inBlock[0].To, "contract creation keeps a NULL recipient")
	require.Equal(t, []byte{0x60, 0x80}, inBlock[0].Input)
	require.Equal(t, maxUint256(), inBlock[1].ValueWei)
	require.Equal(t, *txs[7].To, *inBlock[1].To)

	tx, err := st.GetTx(ctx, txs[7].Hash)
	require.NoError(t, err)
	require.Equal(t, txs[7].From, tx.From)
	require.EqualValues(t, 2, tx.Type)
	require.Equal(t, "1", tx.MaxPriorityFeeWei.String())
	require.Nil(t, tx.GasPriceWei)
	_, err = st.GetTx(ctx, randHash())
	require.ErrorIs(t, err, store.ErrNotFound)

	n, err := st.DeleteBlocksFrom(ctx, 3)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	latest, err = st.LatestBlock(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, latest.Number)
	_, err = st.GetTx(ctx, txs[10].Hash)
	require.ErrorIs(t, err, store.ErrNotFound, "transactions leave with their block")
	gone, err := st.ListTxsByBlock(ctx, 3)
	require.NoError(t, err)
	require.Empty(t, gone)
}

func testTxsByAddress(t *testing.T, st store.Store) {
	addr := randAddr()
	blocks, txs := chainOf(100, 4, 3, randHash())
	// addr receives tx 1 of every block and sends tx 2 of blocks 101 and 103,
	// and sends to itself in block 102.
	for i := range txs {
		switch {
		case txs[i].Index == 1:
			a := addr
			txs[i].To = &a
		case txs[i].Index == 2 && txs[i].BlockNumber%2 == 1:
			txs[i].From = addr
		}
		if txs[i].BlockNumber == 102 && txs[i].Index == 1 {
			txs[i].From = addr
		}
	}
	require.NoError(t, st.InsertBlocks(ctx, blocks, txs))

	type pos struct {
		block uint64
		index int
	}
	want := []pos{{103, 2}, {103, 1}, {102, 1}, {101, 2}, {101, 1}, {100, 1}}
	var got []pos
	var beforeBlock uint64
	beforeIndex := 0
	for {
		page, err := st.ListTxsByAddress(ctx, addr, beforeBlock, beforeIndex, 4)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		require.LessOrEqual(t, len(page), 4)
		for _, tx := range page {
			got = append(got, pos{tx.BlockNumber, tx.Index})
		}
		last := page[len(page)-1]
		beforeBlock, beforeIndex = last.BlockNumber, last.Index
	}
	require.Equal(t, want, got, "newest first, each transaction once, across pages")
}

func testChainConflict(t *testing.T, st store.Store) {
	blocks, txs := chainOf(0, 2, 2, common.Hash{})
	require.NoError(t, st.InsertBlocks(ctx, blocks, txs))
	more, moreTxs := chainOf(2, 2, 2, blocks[1].Hash)
	more[1].Number = 1 // collides with an indexed block
	err := st.InsertBlocks(ctx, more, moreTxs)
	require.ErrorIs(t, err, store.ErrConflict)
	latest, err := st.LatestBlock(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, latest.Number)
	_, err = st.GetTx(ctx, moreTxs[0].Hash)
	require.ErrorIs(t, err, store.ErrNotFound, "a failed bulk insert writes nothing")
}

func testReorgs(t *testing.T, st store.Store) {
	r1 := store.Reorg{ForkBlock: 10, Depth: 2, OldHashes: store.HashList{randHash(), randHash()},
		NewHashes: store.HashList{randHash()}, DetectedAt: now()}
	require.NoError(t, st.InsertReorg(ctx, &r1))
	r2 := store.Reorg{ForkBlock: 20, Depth: 1, OldHashes: store.HashList{randHash()}, DetectedAt: now().Add(time.Second)}
	require.NoError(t, st.InsertReorg(ctx, &r2))
	rs, err := st.ListReorgs(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, rs, 2)
	require.Equal(t, r1.OldHashes, rs[0].OldHashes)
	require.Equal(t, r1.NewHashes, rs[0].NewHashes)
	require.Empty(t, rs[1].NewHashes)
	after, err := st.ListReorgs(ctx, r1.ID, 10)
	require.NoError(t, err)
	require.Len(t, after, 1)
	require.EqualValues(t, 20, after[0].ForkBlock)
}

func testCursors(t *testing.T, st store.Store) {
	_, err := st.GetCursor(ctx, store.CursorIndexer)
	require.ErrorIs(t, err, store.ErrNotFound)
	c := store.Cursor{Name: store.CursorIndexer, BlockNumber: 5, BlockHash: randHash(), UpdatedAt: now()}
	require.NoError(t, st.SetCursor(ctx, c))
	c.BlockNumber, c.BlockHash = 6, randHash()
	require.NoError(t, st.SetCursor(ctx, c))
	got, err := st.GetCursor(ctx, store.CursorIndexer)
	require.NoError(t, err)
	require.EqualValues(t, 6, got.BlockNumber)
	require.Equal(t, c.BlockHash, got.BlockHash)
	_, err = st.GetCursor(ctx, store.CursorSettlement)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// The indexer writes blocks, their transactions and its cursor in one
// transaction: a failure leaves none of them.
func testBlocksWithCursor(t *testing.T, st store.Store) {
	blocks, txs := chainOf(0, 3, 2, common.Hash{})
	cur := store.Cursor{Name: store.CursorIndexer, BlockNumber: 2, BlockHash: blocks[2].Hash, UpdatedAt: now()}
	boom := errors.New("boom")
	err := st.InTx(ctx, func(tx store.Tx) error {
		if err := tx.InsertBlocks(ctx, blocks, txs); err != nil {
			return err
		}
		if err := tx.SetCursor(ctx, cur); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	_, err = st.LatestBlock(ctx)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.GetTx(ctx, txs[0].Hash)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.GetCursor(ctx, store.CursorIndexer)
	require.ErrorIs(t, err, store.ErrNotFound)

	require.NoError(t, st.InTx(ctx, func(tx store.Tx) error {
		if err := tx.InsertBlocks(ctx, blocks, txs); err != nil {
			return err
		}
		return tx.SetCursor(ctx, cur)
	}))
	got, err := st.GetCursor(ctx, store.CursorIndexer)
	require.NoError(t, err)
	require.Equal(t, blocks[2].Hash, got.BlockHash)
	inBlock, err := st.ListTxsByBlock(ctx, 2)
	require.NoError(t, err)
	require.Len(t, inBlock, 2)
}

// A reorg deletes the orphaned blocks with their transactions, records
// itself and moves the cursor back, all or nothing.
func testReorgInTx(t *testing.T, st store.Store) {
	blocks, txs := chainOf(0, 6, 2, common.Hash{})
	require.NoError(t, st.InsertBlocks(ctx, blocks, txs))
	reorg := func(fail bool) error {
		return st.InTx(ctx, func(tx store.Tx) error {
			if _, err := tx.DeleteBlocksFrom(ctx, 4); err != nil {
				return err
			}
			r := store.Reorg{ForkBlock: 4, Depth: 2, OldHashes: store.HashList{blocks[4].Hash, blocks[5].Hash}, DetectedAt: now()}
			if err := tx.InsertReorg(ctx, &r); err != nil {
				return err
			}
			if err := tx.SetCursor(ctx, store.Cursor{Name: store.CursorIndexer, BlockNumber: 3, BlockHash: blocks[3].Hash, UpdatedAt: now()}); err != nil {
				return err
			}
			if fail {
				return errors.New("boom")
			}
			return nil
		})
	}
	require.Error(t, reorg(true))
	latest, err := st.LatestBlock(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 5, latest.Number, "a failed reorg deletes nothing")
	rs, err := st.ListReorgs(ctx, 0, 10)
	require.NoError(t, err)
	require.Empty(t, rs)

	require.NoError(t, reorg(false))
	latest, err = st.LatestBlock(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, latest.Number)
	_, err = st.GetTx(ctx, txs[10].Hash)
	require.ErrorIs(t, err, store.ErrNotFound)
	rs, err = st.ListReorgs(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	// The replacing branch goes in afterwards.
	more, moreTxs := chainOf(4, 3, 1, blocks[3].Hash)
	require.NoError(t, st.InsertBlocks(ctx, more, moreTxs))
	latest, err = st.LatestBlock(ctx)
	require.NoError(t, err)
	require.Equal(t, more[2].Hash, latest.Hash)
}

// One insert of many blocks (the indexer's catch-up batches; COPY on
// PostgreSQL) keeps every row.
func testManyBlocks(t *testing.T, st store.Store) {
	blocks, txs := chainOf(1000, 250, 8, randHash())
	require.NoError(t, st.InsertBlocks(ctx, blocks, txs))
	hashes, err := st.ListBlockHashes(ctx, 1000, 1249)
	require.NoError(t, err)
	require.Len(t, hashes, 250)
	for _, n := range []uint64{1000, 1123, 1249} {
		got, err := st.ListTxsByBlock(ctx, n)
		require.NoError(t, err)
		require.Len(t, got, 8)
		for i := range got {
			require.Equal(t, txs[int(n-1000)*8+i].Hash, got[i].Hash)
		}
	}
}
