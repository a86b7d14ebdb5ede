package indexer_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// requireFinalized waits until the store's recorded finalized block is
// want.
func requireFinalized(t *testing.T, st store.Store, want uint64) {
	t.Helper()
	var got uint64
	var ok bool
	require.Eventually(t, func() bool {
		var err error
		got, ok, err = st.FinalizedBlock(context.Background())
		return err == nil && ok && got == want
	}, waitFor, 5*time.Millisecond, "recorded finalized block: want %d, have %d (recorded: %v)", want, got, ok)
}

// go-ethereum's simulated beacon finalises per 32-block epoch: after block
// 70 the node's finalized block is 64. Under finality "tag" the indexer
// records it, checked against the indexed block 64, and moves it forward
// with the chain.
func TestFinalityTag_RecordsTheNodesFinalizedBlock(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	c.mine(70, 0)
	n, hash, err := c.source().Finalized(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 64, n, "the simulated beacon's finalized block")
	require.Equal(t, c.block(64).Hash(), hash)

	ix := start(t, c.source(), st, indexer.Config{Backfill: true, Finality: store.FinalityTag})
	waitIndexed(t, st, c)
	requireFinalized(t, st, 64)

	c.mine(30, 1)
	waitIndexed(t, st, c)
	requireFinalized(t, st, 96)
	require.EqualValues(t, 96, metricValue(t, ix.ix, "indexer_finalized_block"))
}

// Under the default finality (depth) the indexer never reads or records a
// finalized block.
func TestFinalityDepth_RecordsNoFinalizedBlock(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	c.mine(40, 0)
	src := &finalizedSource{RPCSource: c.source()}
	start(t, src, st, indexer.Config{Backfill: true})
	waitIndexed(t, st, c)
	c.mine(2, 0)
	waitIndexed(t, st, c)
	_, ok, err := st.FinalizedBlock(context.Background())
	require.NoError(t, err)
	require.False(t, ok)
	require.Zero(t, src.count(), "the node's finalized block is not asked for")
}

// A reorg that would remove a block at or below the recorded finalized
// block stops Run like a reorg deeper than MaxReorgDepth
// (store.ErrReorgTooDeep), and leaves the index as it was.
func TestFinalityTag_ReorgOfAFinalizedBlock_StopsWithError(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	c.mine(70, 1)
	ix := start(t, c.source(), st, indexer.Config{Backfill: true, Finality: store.FinalityTag})
	waitIndexed(t, st, c)
	requireFinalized(t, st, 64)
	head := c.head()
	before, err := st.ListBlockHashes(context.Background(), 0, head)
	require.NoError(t, err)

	// The node's chain leaves the indexed one after block 60: blocks
	// 61..70 (64 among them) are replaced. Within MaxReorgDepth (64).
	c.fork(head - 60)
	c.commit(12)
	err = ix.wait(t)
	require.ErrorIs(t, err, store.ErrReorgTooDeep)
	require.ErrorContains(t, err, "reorganised a finalized block")
	require.ErrorContains(t, err, "block 64 was recorded as finalized")

	after, err := st.ListBlockHashes(context.Background(), 0, head+20)
	require.NoError(t, err)
	require.Equal(t, before, after, "history is left as it was")
	reorgs, err := st.ListReorgs(context.Background(), 0, 10)
	require.NoError(t, err)
	require.Empty(t, reorgs)
	n, _, err := st.FinalizedBlock(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 64, n)
}

// A reorg above the recorded finalized block is followed as always.
func TestFinalityTag_ReorgAboveTheFinalizedBlock_IsFollowed(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	c.mine(70, 1)
	start(t, c.source(), st, indexer.Config{Backfill: true, Finality: store.FinalityTag})
	waitIndexed(t, st, c)
	requireFinalized(t, st, 64)

	c.fork(3) // blocks 68..70 replaced
	c.commit(4)
	waitIndexed(t, st, c)
	reorgs, err := st.ListReorgs(context.Background(), 0, 10)
	require.NoError(t, err)
	require.Len(t, reorgs, 1)
	require.EqualValues(t, 68, reorgs[0].ForkBlock)
	requireFinalized(t, st, 64)
}

// finalizedSource answers the node's finalized block as set (a node that
// lies, or is ahead of the index), or the real one when nothing is set,
// and counts the calls.
type finalizedSource struct {
	*indexer.RPCSource
	mu     sync.Mutex
	calls  int
	set    bool
	number uint64
	hash   common.Hash
	err    error
}

func (s *finalizedSource) Finalized(ctx context.Context) (uint64, common.Hash, error) {
	s.mu.Lock()
	s.calls++
	set, n, h, err := s.set, s.number, s.hash, s.err
	s.mu.Unlock()
	if !set {
		return s.RPCSource.Finalized(ctx)
	}
	return n, h, err
}

func (s *finalizedSource) answer(n uint64, h common.Hash, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set, s.number, s.hash, s.err = true, n, h, err
}

func (s *finalizedSource) truthful() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set = false
}

func (s *finalizedSource) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// waitAnswered waits until the indexer asked for the finalized block twice
// more: the answer to the first of them has been fully handled (the
// indexer handles one before it asks again).
func (s *finalizedSource) waitAnswered(t *testing.T) {
	t.Helper()
	from := s.count()
	require.Eventually(t, func() bool { return s.count() >= from+2 }, waitFor, 5*time.Millisecond)
}

// The indexer records only what it checked against the indexed chain: a
// finalized block whose hash differs from the indexed block's, one above
// the indexed head, or a failure records nothing (and indexing goes on);
// the truth, once told, is recorded.
func TestFinalityTag_FinalizedBlockNotOnTheIndexedChain_RecordsNothing(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	c.mine(40, 0)
	src := &finalizedSource{RPCSource: c.source()}
	src.answer(32, common.HexToHash("0xbad"), nil)
	start(t, src, st, indexer.Config{Backfill: true, Finality: store.FinalityTag})
	waitIndexed(t, st, c)
	requireNone := func(why string) {
		t.Helper()
		src.waitAnswered(t)
		_, ok, err := st.FinalizedBlock(context.Background())
		require.NoError(t, err)
		require.False(t, ok, why)
	}
	requireNone("a finalized block whose hash is not the indexed block's")

	src.answer(c.head()+5, common.Hash{}, nil)
	requireNone("a finalized block above the indexed head")

	src.answer(0, common.Hash{}, context.DeadlineExceeded)
	requireNone("the node failed to answer")
	c.mine(3, 1)
	waitIndexed(t, st, c) // indexing goes on

	src.truthful()
	requireFinalized(t, st, 32)

	// A node that reports a lower finalized block (a lagging node behind a
	// load balancer) never lowers the record.
	c.mine(30, 0) // head 73: finalized 64
	requireFinalized(t, st, 64)
	src.answer(32, c.block(32).Hash(), nil)
	src.waitAnswered(t)
	n, _, err := st.FinalizedBlock(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 64, n)
}

func TestFinalityTag_SourceWithoutFinalized_Refused(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	_, err := indexer.New(&countingSource{Source: c.source()}, st, indexer.Config{Finality: store.FinalityTag})
	require.ErrorContains(t, err, "FinalizedSource")
	_, err = indexer.New(c.source(), st, indexer.Config{Finality: "finalized"})
	require.ErrorContains(t, err, `finality "finalized"`)
	_, err = indexer.New(c.source(), st, indexer.Config{Finality: store.FinalityTag})
	require.NoError(t, err)
}

// noFinalizedNode answers eth_getBlockByNumber("finalized") with null, as
// a node that has no finalized block does.
type noFinalizedNode struct{}

func (noFinalizedNode) GetBlockByNumber(number rpc.BlockNumber, full bool) (json.RawMessage, error) {
	return nil, nil
}

// A node without a finalized block: null (no finalized block yet), or a
// node that does not know the tag (the Cosmos-style test node takes only
// numbers). Either is an error that says what finality "tag" needs.
func TestRPCSource_Finalized_NodeWithoutOne_ErrorSaysSo(t *testing.T) {
	t.Parallel()
	srv := rpc.NewServer()
	require.NoError(t, srv.RegisterName("eth", noFinalizedNode{}))
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(srv.Stop)
	rc, err := rpc.DialHTTP(hs.URL)
	require.NoError(t, err)
	t.Cleanup(rc.Close)

	_, _, err = indexer.NewRPCSource(rc).Finalized(context.Background())
	require.ErrorContains(t, err, "null (no finalized block)")
	require.ErrorContains(t, err, `finality "tag" needs a node that reports its finalized block`)

	_, _, err = indexer.NewRPCSource(dialCosmosNode(t)).Finalized(context.Background())
	require.ErrorContains(t, err, `eth_getBlockByNumber("finalized")`)
	require.ErrorContains(t, err, `finality "tag" needs a node that reports its finalized block`)
}

// ClientSource reads the same finalized block as RPCSource.
func TestClientSource_Finalized_SameAsRPCSource(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	c.mine(33, 0)
	n, h, err := indexer.NewClientSource(c.client).Finalized(context.Background())
	require.NoError(t, err)
	rn, rh, err := c.source().Finalized(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 32, n)
	require.Equal(t, rn, n)
	require.Equal(t, rh, h)
}
