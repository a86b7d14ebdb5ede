package storetest

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func identityTests() []test {
	return []test{
		{"Identity_RecordedOnce_FirstWins", testIdentityFirstWins},
		{"Identity_CheckpointsListPruneDelete", testCheckpoints},
		{"Identity_CheckpointsRollBackWithTransaction", testCheckpointsInTx},
		{"Finality_FinalizedBlock_AbsentNotOK_NeverMovesBack", testFinalizedBlock},
		{"Stop_RecordedPerChain_ReplacedAndCleared", testChainStop},
	}
}

func testIdentityFirstWins(t *testing.T, st store.Store) {
	st = st.Chain(math.MaxInt64) // the largest chain id a record keeps
	_, err := st.GetChainIdentity(ctx)
	require.ErrorIs(t, err, store.ErrNotFound)

	first := store.ChainIdentity{ChainID: math.MaxInt64, GenesisNumber: 1, GenesisHash: randHash(), RecordedAt: now()}
	got, err := st.RecordChainIdentity(ctx, first)
	require.NoError(t, err)
	require.Equal(t, first.ChainID, got.ChainID)
	require.Equal(t, first.GenesisNumber, got.GenesisNumber)
	require.Equal(t, first.GenesisHash, got.GenesisHash)
	requireTime(t, first.RecordedAt, got.RecordedAt)

	// A second record of the chain (another process, another node) does
	// not overwrite the first: it gets the first back, to compare with.
	second := store.ChainIdentity{ChainID: math.MaxInt64, GenesisHash: randHash(), RecordedAt: now().Add(time.Hour)}
	got, err = st.RecordChainIdentity(ctx, second)
	require.NoError(t, err)
	require.Equal(t, first.ChainID, got.ChainID)
	require.Equal(t, first.GenesisHash, got.GenesisHash)

	stored, err := st.GetChainIdentity(ctx)
	require.NoError(t, err)
	require.Equal(t, first.GenesisHash, stored.GenesisHash)
	require.Equal(t, first.GenesisNumber, stored.GenesisNumber)
}

func testCheckpoints(t *testing.T, st store.Store) {
	cps, err := st.ListCheckpoints(ctx, math.MaxUint64, 10)
	require.NoError(t, err)
	require.Empty(t, cps)

	var all []store.Checkpoint
	for n := uint64(1); n <= 10; n++ {
		all = append(all, store.Checkpoint{BlockNumber: n, BlockHash: randHash(), Permanent: n == 2 || n == 4, RecordedAt: now()})
	}
	require.NoError(t, st.SaveCheckpoints(ctx, all))

	cps, err = st.ListCheckpoints(ctx, 6, 3)
	require.NoError(t, err)
	require.Len(t, cps, 3)
	for i, want := range []uint64{6, 5, 4} {
		require.Equal(t, want, cps[i].BlockNumber)
		require.Equal(t, all[want-1].BlockHash, cps[i].BlockHash)
	}
	require.True(t, cps[2].Permanent)
	requireTime(t, now(), cps[0].RecordedAt)

	// Saving at a height already recorded overwrites it.
	replaced := store.Checkpoint{BlockNumber: 6, BlockHash: randHash(), RecordedAt: now()}
	require.NoError(t, st.SaveCheckpoints(ctx, []store.Checkpoint{replaced}))
	cps, err = st.ListCheckpoints(ctx, 6, 1)
	require.NoError(t, err)
	require.Equal(t, replaced.BlockHash, cps[0].BlockHash)

	// Pruning keeps the permanent ones below the height and everything above.
	n, err := st.PruneCheckpoints(ctx, 7)
	require.NoError(t, err)
	require.EqualValues(t, 4, n) // 1, 3, 5, 6
	cps, err = st.ListCheckpoints(ctx, math.MaxUint64, 100)
	require.NoError(t, err)
	require.Equal(t, []uint64{10, 9, 8, 7, 4, 2}, numbers(cps))

	// A followed reorg removes every checkpoint from the fork up.
	n, err = st.DeleteCheckpointsFrom(ctx, 4)
	require.NoError(t, err)
	require.EqualValues(t, 5, n)
	cps, err = st.ListCheckpoints(ctx, math.MaxUint64, 100)
	require.NoError(t, err)
	require.Equal(t, []uint64{2}, numbers(cps))
}

func testCheckpointsInTx(t *testing.T, st store.Store) {
	boom := errors.New("boom")
	err := st.InTx(ctx, func(tx store.Tx) error {
		if _, err := tx.RecordChainIdentity(ctx, store.ChainIdentity{ChainID: ChainID, GenesisHash: randHash(), RecordedAt: now()}); err != nil {
			return err
		}
		if err := tx.SaveCheckpoints(ctx, []store.Checkpoint{{BlockNumber: 1, BlockHash: randHash(), RecordedAt: now()}}); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	_, err = st.GetChainIdentity(ctx)
	require.ErrorIs(t, err, store.ErrNotFound)
	cps, err := st.ListCheckpoints(ctx, math.MaxUint64, 10)
	require.NoError(t, err)
	require.Empty(t, cps)
}

func numbers(cps []store.Checkpoint) []uint64 {
	out := make([]uint64, 0, len(cps))
	for _, c := range cps {
		out = append(out, c.BlockNumber)
	}
	return out
}

// The finalized block (finality "tag"): none until the indexer records
// one; then it only moves forward, whatever number is written; a write in
// a rolled-back transaction leaves nothing.
func testFinalizedBlock(t *testing.T, st store.Store) {
	requireFinalized := func(want uint64, wantOK bool) {
		t.Helper()
		got, ok, err := st.FinalizedBlock(ctx)
		require.NoError(t, err)
		require.Equal(t, wantOK, ok, "recorded")
		require.Equal(t, want, got, "finalized block")
	}
	requireFinalized(0, false)

	boom := errors.New("boom")
	err := st.InTx(ctx, func(tx store.Tx) error {
		if err := tx.SetFinalizedBlock(ctx, 32); err != nil {
			return err
		}
		n, ok, err := tx.FinalizedBlock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.EqualValues(t, 32, n, "read back in the transaction")
		return boom
	})
	require.ErrorIs(t, err, boom)
	requireFinalized(0, false)

	// Block 0 is a block: recorded, ok.
	require.NoError(t, st.SetFinalizedBlock(ctx, 0))
	requireFinalized(0, true)
	require.NoError(t, st.SetFinalizedBlock(ctx, 64))
	requireFinalized(64, true)
	// Lower and equal numbers change nothing.
	require.NoError(t, st.SetFinalizedBlock(ctx, 32))
	requireFinalized(64, true)
	require.NoError(t, st.SetFinalizedBlock(ctx, 64))
	requireFinalized(64, true)
	require.NoError(t, st.InTx(ctx, func(tx store.Tx) error { return tx.SetFinalizedBlock(ctx, 0) }))
	requireFinalized(64, true)
	require.NoError(t, st.SetFinalizedBlock(ctx, math.MaxInt64))
	requireFinalized(math.MaxInt64, true)
	require.Error(t, st.SetFinalizedBlock(ctx, math.MaxUint64), "beyond BIGINT")
	requireFinalized(math.MaxInt64, true)
}

// A chain's stop: none until recorded; per chain; a later record replaces
// it; "" clears it; a write in a rolled-back transaction leaves nothing.
func testChainStop(t *testing.T, st store.Store) {
	other := st.Chain(9000)
	requireStop := func(st store.Store, want string, wantAt time.Time) {
		t.Helper()
		problem, at, ok, err := st.ChainStop(ctx)
		require.NoError(t, err)
		require.Equal(t, want != "", ok, "recorded")
		require.Equal(t, want, problem)
		if ok {
			require.True(t, wantAt.Equal(at), "at %v, want %v", at, wantAt)
		}
	}
	requireStop(st, "", time.Time{})

	t1 := now()
	require.NoError(t, st.SetChainStop(ctx, "another_chain", t1))
	requireStop(st, "another_chain", t1)
	requireStop(other, "", time.Time{})

	t2 := t1.Add(time.Minute)
	require.NoError(t, st.SetChainStop(ctx, "reorg_too_deep", t2))
	requireStop(st, "reorg_too_deep", t2)

	boom := errors.New("boom")
	err := st.InTx(ctx, func(tx store.Tx) error {
		require.NoError(t, tx.SetChainStop(ctx, "", time.Time{}))
		return boom
	})
	require.ErrorIs(t, err, boom)
	requireStop(st, "reorg_too_deep", t2)

	require.NoError(t, st.SetChainStop(ctx, "", time.Time{}))
	requireStop(st, "", time.Time{})
	require.NoError(t, st.SetChainStop(ctx, "", time.Time{}), "clearing nothing is no error")
	_, _, _, err = st.Chain(0).ChainStop(ctx)
	require.ErrorIs(t, err, store.ErrNoChain)
}
