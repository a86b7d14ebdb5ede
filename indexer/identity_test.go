package indexer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

var (
	toA = common.HexToAddress("0x00000000000000000000000000000000000000aa")
	toB = common.HexToAddress("0x00000000000000000000000000000000000000bb")
)

// logBuffer keeps log lines for assertions.
type logBuffer struct {
	mu sync.Mutex
	sb strings.Builder
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb.String()
}

// A chain replaced at height 16 by a fresh one with the same chain id and
// genesis is not a reorg of depth 16: the indexer stops with
// ErrChainChanged, reverts nothing and records no reorg, whether the new
// chain is ahead of the index or behind it.
func TestSwap_Shallow_StopsAsAnotherChainAndRevertsNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		newBlocks int
		backfill  bool
	}{
		{"new chain ahead, backfilled index", 20, true},
		{"new chain behind, backfilled index", 5, true},
		{"new chain ahead, index started at the head", 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, b := newHTTPChain(t), newHTTPChain(t)
			p := newSwitchProxy(t, a)
			st := pgtest.New(t)
			if !tc.backfill {
				a.mine(6, toA)
			}
			var logs logBuffer
			ix := start(t, p.source(t), st, indexer.Config{Backfill: tc.backfill, Logger: newTestLogger(t, &logs)})
			for a.head() < 16 {
				a.mine(1, toA)
			}
			waitCursor(t, st, 16, a.hash(16))
			before, err := st.ListBlockHashes(context.Background(), 0, 100)
			require.NoError(t, err)

			b.mine(tc.newBlocks, toB)
			require.Equal(t, a.hash(0), b.hash(0), "the same genesis, like a restarted dev chain")
			p.point(t, b)

			err = ix.wait(t)
			require.ErrorIs(t, err, indexer.ErrChainChanged)
			require.Contains(t, err.Error(), "start with a fresh database")
			require.Contains(t, logs.String(), "indexer: stopped")

			after, err := st.ListBlockHashes(context.Background(), 0, 100)
			require.NoError(t, err)
			require.Equal(t, before, after, "nothing reverted, nothing of the new chain written")
			reorgs, err := st.ListReorgs(context.Background(), 0, 10)
			require.NoError(t, err)
			require.Empty(t, reorgs, "not taken for a reorg")
			cur, err := st.GetCursor(context.Background(), store.CursorIndexer)
			require.NoError(t, err)
			require.EqualValues(t, 16, cur.BlockNumber)

			// Every other role's check says the same (sweep's guard).
			id, err := indexer.NewIdentity(p.source(t), st, indexer.IdentityConfig{})
			require.NoError(t, err)
			require.ErrorIs(t, id.CheckChain(context.Background()), indexer.ErrChainChanged)

			// A restarted indexer refuses at once.
			again := start(t, p.source(t), st, indexer.Config{Backfill: tc.backfill})
			require.ErrorIs(t, again.wait(t), indexer.ErrChainChanged)
		})
	}
}

// A node swapped for another chain (another genesis) while only the
// first blocks are indexed: none of them is on the new chain, and the
// indexer says it serves another chain (ErrChainChanged, which stops
// only that chain in a several-chain host), not that a reorg was too
// deep (store.ErrReorgTooDeep, which an operator reads as this chain's
// own history rewritten).
func TestSwap_AnotherGenesisAtTheFirstBlocks_StopsAsAnotherChain(t *testing.T) {
	t.Parallel()
	for _, mined := range []int{0, 2} {
		t.Run(fmt.Sprintf("indexed to block %d", mined), func(t *testing.T) {
			t.Parallel()
			a := newHTTPChain(t)
			b := newHTTPChainAlloc(t, types.GenesisAlloc{toB: {Balance: big.NewInt(1)}})
			require.NotEqual(t, a.hash(0), b.hash(0))
			p := newSwitchProxy(t, a)
			st := pgtest.New(t)
			a.mine(mined, toA)
			ix := start(t, p.source(t), st, indexer.Config{Backfill: true})
			waitCursor(t, st, uint64(mined), a.hash(uint64(mined)))

			b.mine(mined+3, toB)
			p.point(t, b)
			err := ix.wait(t)
			require.ErrorIs(t, err, indexer.ErrChainChanged)
			require.NotErrorIs(t, err, store.ErrReorgTooDeep)
			reorgs, err := st.ListReorgs(context.Background(), 0, 10)
			require.NoError(t, err)
			require.Empty(t, reorgs)
		})
	}
}

// Indexed past block 81, then a fresh chain that has not made a block
// yet: the node is 80+ blocks behind (beyond MaxReorgDepth), which the
// metric, the log and the checker say at once while the indexer waits;
// as soon as the new chain makes a block that differs, it is refused.
func TestSwap_Deep_NodeBehindIsLoudThenRefused(t *testing.T) {
	t.Parallel()
	a, b := newHTTPChain(t), newHTTPChain(t)
	p := newSwitchProxy(t, a)
	st := pgtest.New(t)
	a.mine(90, toA)
	var logs logBuffer
	ix := start(t, p.source(t), st, indexer.Config{Logger: newTestLogger(t, &logs)})
	waitCursor(t, st, 90, a.hash(90))
	a.mine(1, toA)
	waitCursor(t, st, 91, a.hash(91))

	p.point(t, b) // b is at genesis
	require.Eventually(t, func() bool {
		return metricValue(t, ix.ix, "indexer_node_behind_blocks") == 91
	}, waitFor, 5*time.Millisecond)
	require.Equal(t, 0.0, metricValue(t, ix.ix, "indexer_lag_blocks"), "lag is head minus indexed: it cannot show this")
	require.Contains(t, logs.String(), "the node's head is below the indexed head")

	id, err := indexer.NewIdentity(p.source(t), st, indexer.IdentityConfig{})
	require.NoError(t, err)
	s, err := id.Check(context.Background())
	require.ErrorIs(t, err, store.ErrNodeBehind)
	require.EqualValues(t, 91, s.BehindBlocks)
	require.Equal(t, s, id.Status())

	b.mine(1, toB)
	require.ErrorIs(t, ix.wait(t), indexer.ErrChainChanged)
	require.ErrorIs(t, id.CheckChain(context.Background()), indexer.ErrChainChanged)
	reorgs, err := st.ListReorgs(context.Background(), 0, 10)
	require.NoError(t, err)
	require.Empty(t, reorgs)
	latest, err := st.LatestBlock(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 91, latest.Number, "nothing reverted")
}

// The node a database was recorded with passes; another genesis, or
// another chain id than the recorded one, does not.
func TestIdentity_RecordsAtFirstStart_RefusesAnotherGenesisOrChainID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := newHTTPChain(t)
	a.mine(3, toA)
	p := newSwitchProxy(t, a)
	st := pgtest.New(t)
	id, err := indexer.NewIdentity(p.source(t), st, indexer.IdentityConfig{})
	require.NoError(t, err)
	require.NoError(t, id.CheckChain(ctx))
	rec, err := st.GetChainIdentity(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1337, rec.ChainID)
	require.Equal(t, a.hash(0), rec.GenesisHash, "the node's genesis hash, as reported")
	cps, err := st.ListCheckpoints(ctx, math.MaxUint64, 10)
	require.NoError(t, err)
	require.Len(t, cps, 1)
	require.Equal(t, a.hash(1), cps[0].BlockHash, "block 1 tells a restarted chain with the same genesis apart")

	// Another genesis (a chain funded differently) is another chain.
	other := newChain(t)
	id2, err := indexer.NewIdentity(other.source(), st, indexer.IdentityConfig{})
	require.NoError(t, err)
	err = id2.CheckChain(ctx)
	require.ErrorIs(t, err, indexer.ErrChainChanged)
	require.Contains(t, err.Error(), "genesis")

	// A database recorded for chain id 5 refuses a 1337 node.
	st5 := pgtest.New(t).Chain(5)
	_, err = st5.RecordChainIdentity(ctx, store.ChainIdentity{ChainID: 5, GenesisHash: a.hash(0), RecordedAt: time.Now()})
	require.NoError(t, err)
	id5, err := indexer.NewIdentity(p.source(t), st5, indexer.IdentityConfig{})
	require.NoError(t, err)
	err = id5.CheckChain(ctx)
	require.ErrorIs(t, err, indexer.ErrChainChanged)
	require.Contains(t, err.Error(), "chain id 5")
}

// A normal reorg (depth 3) behind the same URL is still followed, and the
// checker does not take it for another chain.
func TestReorg_Depth3_StillFollowedAndTheChainStillPasses(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	c.mine(30, 1)
	start(t, c.source(), st, indexer.Config{Backfill: true})
	waitIndexed(t, st, c)
	c.fork(3)
	c.commit(3)
	id, err := indexer.NewIdentity(c.source(), st, indexer.IdentityConfig{})
	require.NoError(t, err)
	require.NoError(t, id.CheckChain(context.Background()), "a reorg within MaxReorgDepth is not another chain")
	c.commit(1)
	waitIndexed(t, st, c)
	requireCanonical(t, st, c, 0)
	reorgs, err := st.ListReorgs(context.Background(), 0, 10)
	require.NoError(t, err)
	require.Len(t, reorgs, 1)
	require.Equal(t, 3, reorgs[0].Depth)
	require.NoError(t, id.CheckChain(context.Background()))
}

// Run stops with the error when the chain changes, and keeps checking
// through node failures.
func TestIdentityRun_ChainSwapped_ReturnsErrChainChanged(t *testing.T) {
	t.Parallel()
	a, b := newHTTPChain(t), newHTTPChain(t)
	p := newSwitchProxy(t, a)
	st := pgtest.New(t)
	a.mine(10, toA)
	start(t, p.source(t), st, indexer.Config{Backfill: true})
	waitCursor(t, st, 10, a.hash(10))
	id, err := indexer.NewIdentity(p.source(t), st, indexer.IdentityConfig{CheckInterval: 5 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- id.Run(ctx) }()
	b.mine(12, toB)
	p.point(t, b)
	select {
	case err := <-done:
		require.True(t, errors.Is(err, indexer.ErrChainChanged), "%v", err)
	case <-time.After(waitFor):
		t.Fatal("Run did not notice the swap")
	}
}

// newTestLogger logs to the test log and to buf.
func newTestLogger(t *testing.T, buf *logBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(io.MultiWriter(testWriter{t}, buf), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// waitCursor waits until the indexer's cursor is at block n with hash h.
func waitCursor(t *testing.T, st store.Store, n uint64, h common.Hash) {
	t.Helper()
	require.Eventually(t, func() bool {
		cur, err := st.GetCursor(context.Background(), store.CursorIndexer)
		return err == nil && cur.BlockNumber == n && cur.BlockHash == h
	}, waitFor, 5*time.Millisecond, "indexer did not reach block %d", n)
}

// A node of the recorded chain that is behind (a lagging replica, a
// resync) is not another chain: within MaxReorgDepth it passes; beyond,
// it is store.ErrNodeBehind (not ready), never ErrChainChanged.
func TestIdentity_SameChainNodeBehind_WithinLimitPassesBeyondIsNotReady(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newChain(t)
	st := pgtest.New(t)
	c.mine(100, 0)
	ix := start(t, c.source(), st, indexer.Config{Backfill: true})
	waitIndexed(t, st, c)
	require.NoError(t, ix.stop(t))
	id, err := indexer.NewIdentity(c.source(), st, indexer.IdentityConfig{})
	require.NoError(t, err)

	c.fork(5) // the node's head goes back to block 95 of the same chain
	s, err := id.Check(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 5, s.BehindBlocks)
	require.EqualValues(t, 64, s.VerifiedAt, "the highest checkpoint at or below the node's head (one backfill batch: its last block and the powers of two)")

	c.fork(85) // block 10
	s, err = id.Check(ctx)
	require.ErrorIs(t, err, store.ErrNodeBehind)
	require.NotErrorIs(t, err, indexer.ErrChainChanged)
	require.EqualValues(t, 90, s.BehindBlocks)
	require.EqualValues(t, 8, s.VerifiedAt, "compared at a permanent checkpoint below the node's head")
}
