package nodes_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/rpcproxy/nodes"
)

// reads makes the kinds of reads the services make (a head, a balance, a
// batch of blocks) and checks their answers against the chain.
func reads(t *testing.T, c *chain, client *rpc.Client) {
	t.Helper()
	ctx := context.Background()
	var head hexutil.Uint64
	require.NoError(t, client.CallContext(ctx, &head, "eth_blockNumber"))
	require.Equal(t, c.head(), uint64(head))
	var bal hexutil.Big
	require.NoError(t, client.CallContext(ctx, &bal, "eth_getBalance", payer, "latest"))
	want, err := c.b.Client().BalanceAt(ctx, payer, nil)
	require.NoError(t, err)
	require.Equal(t, want, bal.ToInt())
	n := min(uint64(head)+1, 3)
	hs := make([]*header, n)
	batch := make([]rpc.BatchElem, n)
	for i := range batch {
		batch[i] = rpc.BatchElem{Method: "eth_getBlockByNumber", Args: []any{hexutil.Uint64(i), false}, Result: &hs[i]}
	}
	require.NoError(t, client.BatchCallContext(ctx, batch))
	for i, e := range batch {
		require.NoError(t, e.Error)
		require.NotNil(t, hs[i])
		require.Equal(t, c.hash(uint64(i)), hs[i].Hash)
	}
}

// The node reads go to turns bad mid-run — garbage JSON, HTTP 500, no
// answer at all, a head far in the future — and the reads go on,
// answered by the other node; the bad node is excluded, and used again
// once it behaves.
func TestPool_NodeTurnsBad_ReadsGoOnThroughTheOther(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode    string
		problem []string
	}{
		{"garbage", []string{nodes.ProblemFailed, nodes.ProblemDown}},
		{"500", []string{nodes.ProblemFailed, nodes.ProblemDown}},
		{"hang", []string{nodes.ProblemFailed, nodes.ProblemDown}},
		{"future", []string{nodes.ProblemBadHead}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			c := newChain(t, 1337)
			for range 3 {
				c.b.Commit()
			}
			bad, good := newFront(t, c.url), newFront(t, c.url)
			cfg := testConfig(t)
			cfg.RequestTimeout = 2 * time.Second // how long a hung node is waited for
			cfg.CheckTimeout = 2 * time.Second
			p := newPool(t, []string{bad.URL(), good.URL()}, cfg)
			client, err := p.Client(context.Background())
			require.NoError(t, err)
			defer client.Close()

			reads(t, c, client)
			require.Equal(t, nodes.RedactURL(bad.URL()), current(p), "reads go to the first node")

			bad.mode.Store(tc.mode)
			c.b.Commit()
			for range 3 {
				reads(t, c, client)
			}
			s := statusOf(t, p, bad.URL())
			require.False(t, s.Up)
			require.Contains(t, tc.problem, s.Problem, s.Error)
			require.Equal(t, nodes.RedactURL(good.URL()), current(p))
			require.LessOrEqual(t, p.ServedHead(), c.head(), "no head from the future was served")

			bad.mode.Store("")
			require.Eventually(t, func() bool { return statusOf(t, p, bad.URL()).Up }, 20*time.Second, 10*time.Millisecond)
			good.kill()
			reads(t, c, client)
			require.Equal(t, nodes.RedactURL(bad.URL()), current(p), "the node that behaves again takes the reads")
		})
	}
}

// A node that is bad from the start is excluded by the first check.
func TestPool_BadNodeAtStart_ExcludedByTheCheck(t *testing.T) {
	t.Parallel()
	c := newChain(t, 1337)
	c.b.Commit()
	for mode, problem := range map[string]string{
		"garbage": nodes.ProblemDown,
		"500":     nodes.ProblemDown,
		"hang":    nodes.ProblemDown,
		"future":  nodes.ProblemBadHead,
	} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			bad, good := newFront(t, c.url), newFront(t, c.url)
			bad.mode.Store(mode)
			cfg := testConfig(t)
			cfg.CheckTimeout = 2 * time.Second
			p, err := nodes.New([]string{bad.URL(), good.URL()}, cfg)
			require.NoError(t, err)
			require.NoError(t, p.Check(context.Background()))
			s := statusOf(t, p, bad.URL())
			require.False(t, s.Up)
			require.Equal(t, problem, s.Problem, s.Error)
			client, err := p.Client(context.Background())
			require.NoError(t, err)
			defer client.Close()
			reads(t, c, client)
			require.Zero(t, bad.count("eth_getBalance"))
		})
	}
}

// With every node down a request fails after MaxWait with ErrNoNode, saying
// why for each node; a node that comes back is used at once.
func TestPool_EveryNodeDown_ErrNoNode_ThenBack(t *testing.T) {
	t.Parallel()
	c := newChain(t, 1337)
	a, b := newFront(t, c.url), newFront(t, c.url)
	cfg := testConfig(t)
	cfg.MaxWait = 200 * time.Millisecond
	p, err := nodes.New([]string{a.URL(), b.URL()}, cfg) // no Run: requests check by themselves
	require.NoError(t, err)
	client, err := p.Client(context.Background())
	require.NoError(t, err)
	defer client.Close()
	reads(t, c, client)

	a.kill()
	b.kill()
	var head hexutil.Uint64
	err = client.CallContext(context.Background(), &head, "eth_blockNumber")
	require.ErrorIs(t, err, nodes.ErrNoNode)
	require.Contains(t, err.Error(), nodes.RedactURL(a.URL()))
	require.Contains(t, err.Error(), "connection refused")
	require.ErrorIs(t, p.Check(context.Background()), nodes.ErrNoNode)

	b.restart()
	reads(t, c, client)
	require.NoError(t, p.Check(context.Background()))
	require.True(t, statusOf(t, p, b.URL()).Up)
	require.False(t, statusOf(t, p, a.URL()).Up)
}

// A request whose caller gives up is not retried on other nodes and does
// not mark the node down.
func TestPool_CallerCancels_NodeNotBlamed(t *testing.T) {
	t.Parallel()
	c := newChain(t, 1337)
	slow := newFront(t, c.url)
	p := newPool(t, []string{slow.URL()}, testConfig(t))
	require.NoError(t, p.Check(context.Background()))
	client, err := p.Client(context.Background())
	require.NoError(t, err)
	defer client.Close()
	slow.mode.Store("hang")
	ctx, cancel := context.WithCancel(context.Background())
	slow.mu.Lock()
	slow.onCall = func(method string) {
		if method == "eth_getBalance" {
			cancel()
		}
	}
	slow.mu.Unlock()
	var bal hexutil.Big
	err = client.CallContext(ctx, &bal, "eth_getBalance", payer, "latest")
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
	require.Equal(t, 1, slow.count("eth_getBalance"))
}

// Answers larger than the part the pool checks whole are streamed through
// (the pool holds at most that part of any answer): a batch of 300 blocks
// arrives whole and right; a large answer that does not start as
// JSON-RPC (an HTML page) is failed over; one over MaxResponseBytes fails
// the read.
func TestPool_LargeAnswers_Streamed(t *testing.T) {
	t.Parallel()
	c := newChain(t, 1337)
	for range 300 {
		c.b.Commit()
	}
	bad, good := newFront(t, c.url), newFront(t, c.url)
	cfg := testConfig(t)
	p := newPool(t, []string{bad.URL(), good.URL()}, cfg)
	client, err := p.Client(context.Background())
	require.NoError(t, err)
	defer client.Close()
	blocks := func(client *rpc.Client) error {
		hs := make([]*header, 300)
		batch := make([]rpc.BatchElem, len(hs))
		for i := range batch {
			batch[i] = rpc.BatchElem{Method: "eth_getBlockByNumber", Args: []any{hexutil.Uint64(i), false}, Result: &hs[i]}
		}
		if err := client.BatchCallContext(context.Background(), batch); err != nil {
			return err
		}
		for i, e := range batch {
			require.NoError(t, e.Error)
			require.Equal(t, c.hash(uint64(i)), hs[i].Hash)
		}
		return nil
	}
	require.NoError(t, blocks(client))
	require.Equal(t, 300, bad.count("batch:eth_getBlockByNumber"), "the first node answered")

	bad.mode.Store("html")
	require.NoError(t, blocks(client))
	require.GreaterOrEqual(t, good.count("batch:eth_getBlockByNumber"), 300, "the HTML page was failed over")
	require.False(t, statusOf(t, p, bad.URL()).Up)

	cfg.MaxResponseBytes = 300 << 10
	small := newPool(t, []string{good.URL()}, cfg)
	sc, err := small.Client(context.Background())
	require.NoError(t, err)
	defer sc.Close()
	require.Error(t, blocks(sc), "an answer over MaxResponseBytes")
}
