package nodes_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/rpcproxy/nodes"
)

// header is what the follower keeps of a block.
type header struct {
	Number     hexutil.Uint64 `json:"number"`
	Hash       common.Hash    `json:"hash"`
	ParentHash common.Hash    `json:"parentHash"`
}

// A follower reads the chain as the indexer does (eth_blockNumber, then a
// batch of eth_getBlockByNumber) through the pool while the chain grows
// and nodes die: the node it reads from is killed, then the second one,
// leaving only a node three blocks behind; the first comes back and the
// lagging one is killed. It sees every block from 0 to 100 exactly once,
// linked by parent hashes and equal to the chain's, never a head lower
// than one it saw, never a block missing at or below a head it saw; the
// node that came back serves it again.
func TestPool_NodesKilledMidRun_FollowerSeesEveryBlockOnce(t *testing.T) {
	t.Parallel()
	c := newChain(t, 1337)
	a, b, lagging := newFront(t, c.url), newFront(t, c.url), newFront(t, c.url)
	lagging.lag.Store(3) // within MaxLag (3), but below what was served
	p := newPool(t, []string{a.URL(), b.URL(), lagging.URL()}, testConfig(t))
	client, err := p.Client(context.Background())
	require.NoError(t, err)
	defer client.Close()

	// The chain grows on its own, a block every 30 ms, until the test ends.
	stop := make(chan struct{})
	mined := make(chan struct{})
	go func() {
		defer close(mined)
		for {
			select {
			case <-stop:
				return
			case <-time.After(30 * time.Millisecond):
				c.b.Commit()
			}
		}
	}()
	defer func() { close(stop); <-mined }()

	const last = 100
	var (
		blocks   []header
		seenHead uint64
		failures int
		aBack    int // a's block batches when it came back
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	killed := map[int]bool{}
	for uint64(len(blocks)) <= last {
		require.NoError(t, ctx.Err(), "the follower is stuck at block %d (head %d): %+v", len(blocks), seenHead, p.Status())
		next := uint64(len(blocks))
		switch {
		case next >= 15 && !killed[15]:
			killed[15] = true
			require.Equal(t, nodes.RedactURL(a.URL()), current(p), "reads go to the first node listed")
			a.kill()
		case next >= 30 && !killed[30]:
			killed[30] = true
			require.Equal(t, nodes.RedactURL(b.URL()), current(p), "reads went to the second node")
			b.kill() // only the lagging node is left
		case next >= 45 && !killed[45]:
			killed[45] = true
			require.Equal(t, nodes.RedactURL(lagging.URL()), current(p), "reads went to the lagging node once it passed the served head")
			a.restart()
			aBack = a.count("batch:eth_getBlockByNumber")
		case next >= 60 && !killed[60]:
			killed[60] = true
			lagging.kill()
		}
		var head hexutil.Uint64
		if err := client.CallContext(ctx, &head, "eth_blockNumber"); err != nil {
			failures++ // an indexer retries at its next poll
			t.Logf("eth_blockNumber: %v", err)
			continue
		}
		require.GreaterOrEqual(t, uint64(head), seenHead, "the head went back")
		seenHead = uint64(head)
		to := min(seenHead, next+9, last)
		if to < next {
			continue
		}
		batch := make([]rpc.BatchElem, 0, to-next+1)
		hs := make([]*header, to-next+1)
		for n := next; n <= to; n++ {
			batch = append(batch, rpc.BatchElem{Method: "eth_getBlockByNumber",
				Args: []any{hexutil.Uint64(n), false}, Result: &hs[n-next]})
		}
		if err := client.BatchCallContext(ctx, batch); err != nil {
			failures++
			t.Logf("blocks %d..%d: %v", next, to, err)
			continue
		}
		for i, e := range batch {
			n := next + uint64(i)
			require.NoError(t, e.Error, "block %d", n)
			require.NotNil(t, hs[i], "block %d is missing though head %d was served", n, seenHead)
			require.Equal(t, n, uint64(hs[i].Number))
			if n > 0 {
				require.Equal(t, blocks[n-1].Hash, hs[i].ParentHash, "block %d does not build on the block before", n)
			}
			blocks = append(blocks, *hs[i])
		}
	}
	require.Len(t, blocks, last+1)
	for n, h := range blocks {
		require.Equal(t, c.hash(uint64(n)), h.Hash, "block %d", n)
	}
	require.Greater(t, a.count("batch:eth_getBlockByNumber"), aBack, "the node that came back serves reads again")
	require.Equal(t, nodes.RedactURL(a.URL()), current(p))
	t.Logf("%d failed polls while nodes died; served head %d", failures, p.ServedHead())
}

// A node more than MaxLag behind the others is skipped, even when it is
// listed first; it still counts as up (it is not broken, only behind).
func TestPool_LaggingNode_Skipped(t *testing.T) {
	t.Parallel()
	c := newChain(t, 1337)
	for range 10 {
		c.b.Commit()
	}
	behind, good := newFront(t, c.url), newFront(t, c.url)
	behind.hold.Store(4) // 6 blocks behind
	p := newPool(t, []string{behind.URL(), good.URL()}, testConfig(t))
	require.NoError(t, p.Check(context.Background()))
	client, err := p.Client(context.Background())
	require.NoError(t, err)
	defer client.Close()

	for range 5 {
		var head hexutil.Uint64
		require.NoError(t, client.CallContext(context.Background(), &head, "eth_blockNumber"))
		require.EqualValues(t, 10, head)
		var bal hexutil.Big
		require.NoError(t, client.CallContext(context.Background(), &bal, "eth_getBalance", payer, "latest"))
	}
	require.Zero(t, behind.count("eth_getBalance"), "no read went to the lagging node")
	require.Equal(t, 5, good.count("eth_getBalance"))
	s := statusOf(t, p, behind.URL())
	require.True(t, s.Up)
	require.EqualValues(t, 4, s.Head)
	require.EqualValues(t, 6, s.Lag)
	require.False(t, s.Current)
	require.True(t, statusOf(t, p, good.URL()).Current)
}

// A node of another chain id is excluded and logged at error level: with
// Config.ChainID set, and without it (the chain id most nodes answer).
func TestPool_NodeOnAnotherChainID_Excluded(t *testing.T) {
	t.Parallel()
	ours, other := newChain(t, 1337), newChain(t, 7)
	for _, tc := range []struct {
		name    string
		chainID uint64
		urls    []string
	}{
		{"configured", 1337, []string{other.url, ours.url}},
		{"majority", 0, []string{other.url, ours.url, newFront(t, ours.url).URL()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs logBuffer
			cfg := testConfig(t)
			cfg.ChainID = tc.chainID
			cfg.Logger = slogTo(&logs)
			p := newPool(t, tc.urls, cfg)
			require.NoError(t, p.Check(context.Background()))
			client, err := p.Client(context.Background())
			require.NoError(t, err)
			defer client.Close()
			for range 3 {
				var id hexutil.Uint64
				require.NoError(t, client.CallContext(context.Background(), &id, "eth_chainId"))
				require.EqualValues(t, 1337, id)
			}
			s := statusOf(t, p, other.url)
			require.False(t, s.Up)
			require.Equal(t, nodes.ProblemWrongChain, s.Problem)
			require.EqualValues(t, 7, s.ChainID)
			require.Contains(t, logs.String(), "level=ERROR msg=\"nodes: node serves another chain")
			require.Contains(t, logs.String(), "chain_id=7 want_chain_id=1337")
		})
	}
}

// Config.Guard applies a check of the host's own per node: here the
// genesis hash, which tells apart two chains with the same chain id.
func TestPool_Guard_ExcludesANodeOfAnotherChainWithTheSameChainID(t *testing.T) {
	t.Parallel()
	ours, fresh := newChain(t, 1337), newChain(t, 1337, common.HexToAddress("0x1"))
	genesis := ours.hash(0)
	require.NotEqual(t, genesis, fresh.hash(0))
	var guarded atomic.Int64
	cfg := testConfig(t)
	cfg.Guard = func(ctx context.Context, url string, c *rpc.Client) error {
		guarded.Add(1)
		var h header
		if err := c.CallContext(ctx, &h, "eth_getBlockByNumber", "0x0", false); err != nil {
			return err
		}
		if h.Hash != genesis {
			return fmt.Errorf("genesis %s, want %s", h.Hash, genesis)
		}
		return nil
	}
	p := newPool(t, []string{fresh.url, ours.url}, cfg)
	require.NoError(t, p.Check(context.Background()))
	s := statusOf(t, p, fresh.url)
	require.False(t, s.Up)
	require.Equal(t, nodes.ProblemGuard, s.Problem)
	require.Contains(t, s.Error, "genesis")
	require.True(t, statusOf(t, p, ours.url).Up)
	require.Positive(t, guarded.Load())

	client, err := p.Client(context.Background())
	require.NoError(t, err)
	defer client.Close()
	var h header
	require.NoError(t, client.CallContext(context.Background(), &h, "eth_getBlockByNumber", "0x0", false))
	require.Equal(t, genesis, h.Hash)
}

// A node that reports a height a moment before it serves the block (evmd's
// JSON-RPC, found by the two-node evmd run: "reports head 14 but does not
// serve block 14") stays usable, at the head it serves; one whose head is
// far beyond its blocks is still excluded.
func TestPool_NodeOneAheadOfItsBlocks_StaysUsableAtTheHeadItServes(t *testing.T) {
	t.Parallel()
	c := newChain(t, 1337)
	for range 10 {
		c.b.Commit()
	}
	ahead, future := newFront(t, c.url), newFront(t, c.url)
	ahead.mode.Store("ahead1")
	future.mode.Store("future")
	p := newPool(t, []string{ahead.URL(), future.URL()}, testConfig(t))
	require.NoError(t, p.Check(context.Background()))
	s := statusOf(t, p, ahead.URL())
	require.True(t, s.Up, "%+v", s)
	require.EqualValues(t, 10, s.Head, "the head it serves")
	f := statusOf(t, p, future.URL())
	require.False(t, f.Up)
	require.Equal(t, nodes.ProblemBadHead, f.Problem)

	client, err := p.Client(context.Background())
	require.NoError(t, err)
	defer client.Close()
	var bal hexutil.Big
	require.NoError(t, client.CallContext(context.Background(), &bal, "eth_getBalance", payer, "latest"))
	require.Equal(t, 1, ahead.count("eth_getBalance"), "reads go to it")
}
