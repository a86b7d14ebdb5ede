package nodes_test

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/stretchr/testify/require"
)

var merchant = common.HexToAddress("0x00000000000000000000000000000000000000aa")

func rawTx(t *testing.T, tx *types.Transaction) string {
	t.Helper()
	b, err := tx.MarshalBinary()
	require.NoError(t, err)
	return hexutil.Encode(b)
}

// requireMinedOnce checks that tx is in exactly one block, once, and that
// the payer's nonce moved past it.
func requireMinedOnce(t *testing.T, c *chain, tx *types.Transaction) {
	t.Helper()
	ctx := context.Background()
	r, err := c.b.Client().TransactionReceipt(ctx, tx.Hash())
	require.NoError(t, err)
	require.Equal(t, types.ReceiptStatusSuccessful, r.Status)
	found := 0
	for n := uint64(0); n <= c.head(); n++ {
		b, err := c.b.Client().BlockByNumber(ctx, new(big.Int).SetUint64(n))
		require.NoError(t, err)
		for _, x := range b.Transactions() {
			if x.Hash() == tx.Hash() {
				found++
			}
		}
	}
	require.Equal(t, 1, found, "the transaction is mined once")
	nonce, err := c.b.Client().NonceAt(ctx, payer, nil)
	require.NoError(t, err)
	require.Equal(t, tx.Nonce()+1, nonce)
}

// A signed transaction goes to every usable node; the chain mines it once.
// The nodes are one chain, so all but the first to take it answer
// "already known", and the pool answers success with the hash.
func TestPool_SendRawTransaction_ToEveryNode_MinedOnce(t *testing.T) {
	t.Parallel()
	c := newChain(t, 1337)
	fs := []*front{newFront(t, c.url), newFront(t, c.url), newFront(t, c.url)}
	p := newPool(t, []string{fs[0].URL(), fs[1].URL(), fs[2].URL()}, testConfig(t))
	require.NoError(t, p.Check(context.Background()))
	client, err := p.Client(context.Background())
	require.NoError(t, err)
	defer client.Close()
	ctx := context.Background()

	tx := c.signedTransfer(merchant, 1000)
	require.NoError(t, ethclient.NewClient(client).SendTransaction(ctx, tx))
	// The answer comes back once a node accepted it; the other sends finish
	// on their own.
	sends := func(outcome string) float64 {
		return metric(t, p, "evmpay_nodes_broadcast_sends_total", map[string]string{"outcome": outcome})
	}
	require.Eventually(t, func() bool { return sends("accepted")+sends("known") == 3 }, 20*time.Second, 5*time.Millisecond)
	for i, f := range fs {
		require.Equal(t, 1, f.count("eth_sendRawTransaction"), "node %d", i)
	}
	require.EqualValues(t, 1, sends("accepted"))
	require.EqualValues(t, 2, sends("known"))

	// Sent again before it is mined: every node already has it.
	var hash common.Hash
	require.NoError(t, client.CallContext(ctx, &hash, "eth_sendRawTransaction", rawTx(t, tx)))
	require.Equal(t, tx.Hash(), hash)

	c.b.Commit()
	requireMinedOnce(t, c, tx)

	// Sent again after it is mined: the nodes say "nonce too low", and the
	// transaction that used the nonce is this one.
	refused := sends("refused")
	require.NoError(t, client.CallContext(ctx, &hash, "eth_sendRawTransaction", rawTx(t, tx)))
	require.Equal(t, tx.Hash(), hash)
	require.Equal(t, refused+3, sends("refused"), "every node refused it (nonce too low)")
	c.b.Commit()
	requireMinedOnce(t, c, tx)

	// Another transaction with the used nonce is refused with the node's words.
	c.nonce--
	other := c.signedTransfer(common.HexToAddress("0xbb"), 1000)
	err = ethclient.NewClient(client).SendTransaction(ctx, other)
	var rpcErr rpc.Error
	require.ErrorAs(t, err, &rpcErr)
	require.Contains(t, err.Error(), "nonce too low")

	// A refusal: a sender without funds.
	poor, _ := crypto.GenerateKey()
	broke, err := types.SignNewTx(poor, types.LatestSignerForChainID(c.chainID), &types.DynamicFeeTx{
		ChainID: c.chainID, Nonce: 0, To: &merchant, Value: big.NewInt(1), Gas: 21000,
		GasTipCap: big.NewInt(params.GWei), GasFeeCap: big.NewInt(100 * params.GWei)})
	require.NoError(t, err)
	err = ethclient.NewClient(client).SendTransaction(ctx, broke)
	require.ErrorAs(t, err, &rpcErr)
	require.Contains(t, err.Error(), "insufficient funds")
}

// A node killed before a send, and one killed while the send is under way
// (it hangs up on the request): the transaction still reaches the chain
// through the others, and is mined once.
func TestPool_SendRawTransaction_NodeKilled_SentOnceThroughTheOthers(t *testing.T) {
	t.Parallel()
	c := newChain(t, 1337)
	dead, hangsUp, alive := newFront(t, c.url), newFront(t, c.url), newFront(t, c.url)
	p := newPool(t, []string{dead.URL(), hangsUp.URL(), alive.URL()}, testConfig(t))
	require.NoError(t, p.Check(context.Background()))
	client, err := p.Client(context.Background())
	require.NoError(t, err)
	defer client.Close()

	dead.kill()
	hangsUp.mode.Store("hang")
	hangsUp.mu.Lock()
	hangsUp.onCall = func(method string) {
		if method == "eth_sendRawTransaction" {
			go hangsUp.kill() // while the pool waits for its answer
		}
	}
	hangsUp.mu.Unlock()
	tx := c.signedTransfer(merchant, 1000)
	require.NoError(t, ethclient.NewClient(client).SendTransaction(context.Background(), tx))
	require.Equal(t, 1, alive.count("eth_sendRawTransaction"))
	require.Eventually(t, func() bool { return hangsUp.count("eth_sendRawTransaction") == 1 }, 20*time.Second, 5*time.Millisecond)
	c.b.Commit()
	requireMinedOnce(t, c, tx)
}

// A batch mixing reads and transactions: the reads go to one node, the
// transactions to every node, and the answers come back in the caller's
// order with the caller's ids.
func TestPool_BatchWithSendRawTransaction(t *testing.T) {
	t.Parallel()
	c := newChain(t, 1337)
	fs := []*front{newFront(t, c.url), newFront(t, c.url)}
	p := newPool(t, []string{fs[0].URL(), fs[1].URL()}, testConfig(t))
	client, err := p.Client(context.Background())
	require.NoError(t, err)
	defer client.Close()

	tx1, tx2 := c.signedTransfer(merchant, 1), c.signedTransfer(merchant, 2)
	var id hexutil.Uint64
	var h1, h2 common.Hash
	var bal hexutil.Big
	batch := []rpc.BatchElem{
		{Method: "eth_chainId", Result: &id},
		{Method: "eth_sendRawTransaction", Args: []any{rawTx(t, tx1)}, Result: &h1},
		{Method: "eth_getBalance", Args: []any{payer, "latest"}, Result: &bal},
		{Method: "eth_sendRawTransaction", Args: []any{rawTx(t, tx2)}, Result: &h2},
	}
	require.NoError(t, client.BatchCallContext(context.Background(), batch))
	for _, e := range batch {
		require.NoError(t, e.Error, e.Method)
	}
	require.EqualValues(t, 1337, id)
	require.Equal(t, tx1.Hash(), h1)
	require.Equal(t, tx2.Hash(), h2)
	require.Positive(t, bal.ToInt().Sign())
	for _, f := range fs {
		require.Eventually(t, func() bool { return f.count("eth_sendRawTransaction") == 2 }, 20*time.Second, 5*time.Millisecond)
	}
	require.Equal(t, 1, fs[0].count("eth_getBalance")+fs[1].count("eth_getBalance"), "the reads went to one node")
	c.b.Commit()
	requireMinedOnce(t, c, tx2)
}
