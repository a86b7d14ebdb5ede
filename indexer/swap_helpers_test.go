package indexer_test

import (
	"context"
	"math/big"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/simchain"
	"github.com/evmpay/evmpay/indexer"
)

// swapKey funds both chains of a swap test identically, so that their
// genesis blocks are the same (as a restarted dev chain's is).
var swapKey, _ = crypto.HexToECDSA("8f2a55949038a9610f50fb23b5883af3b4ecb3c3bb792cbcefbd1542c692be63")

// httpChain is a simulated chain (chain id 1337) serving JSON-RPC over
// HTTP on loopback.
type httpChain struct {
	t     *testing.T
	b     *simchain.Backend
	url   string
	nonce uint64
}

func newHTTPChain(t *testing.T) *httpChain {
	return newHTTPChainAlloc(t, nil)
}

// newHTTPChainAlloc is newHTTPChain whose genesis also funds extra: a
// chain with another genesis block than newHTTPChain's.
func newHTTPChainAlloc(t *testing.T, extra types.GenesisAlloc) *httpChain {
	t.Helper()
	balance, _ := new(big.Int).SetString("1000000000000000000000000", 10)
	alloc := types.GenesisAlloc{crypto.PubkeyToAddress(swapKey.PublicKey): {Balance: balance}}
	for a, acc := range extra {
		alloc[a] = acc
	}
	b := simchain.New(t, alloc, simchain.HTTP("eth", "net"))
	return &httpChain{t: t, b: b, url: b.HTTPURL()}
}

// mine commits n blocks, each with one transfer to `to` (so that two
// chains built from the same genesis differ from block 1 on when their
// recipients differ).
func (c *httpChain) mine(n int, to common.Address) {
	c.t.Helper()
	signer := types.LatestSignerForChainID(big.NewInt(1337))
	for range n {
		tx, err := types.SignNewTx(swapKey, signer, &types.DynamicFeeTx{ChainID: big.NewInt(1337), Nonce: c.nonce,
			To: &to, Value: big.NewInt(1), Gas: 21000, GasTipCap: big.NewInt(params.GWei), GasFeeCap: big.NewInt(10 * params.GWei)})
		require.NoError(c.t, err)
		require.NoError(c.t, c.b.Client().SendTransaction(context.Background(), tx))
		c.nonce++
		c.b.Commit()
	}
}

func (c *httpChain) head() uint64 {
	c.t.Helper()
	n, err := c.b.Client().BlockNumber(context.Background())
	require.NoError(c.t, err)
	return n
}

func (c *httpChain) hash(n uint64) common.Hash {
	c.t.Helper()
	h, err := c.b.Client().HeaderByNumber(context.Background(), new(big.Int).SetUint64(n))
	require.NoError(c.t, err)
	return h.Hash()
}

// switchProxy is one loopback URL in front of whichever chain it points
// at: what a node replaced behind a load balancer or a restarted dev chain
// looks like to its clients.
type switchProxy struct {
	url    string
	target atomic.Pointer[url.URL]
}

func newSwitchProxy(t *testing.T, to *httpChain) *switchProxy {
	t.Helper()
	p := &switchProxy{}
	p.point(t, to)
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(p.target.Load())
	}}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

// point sends every later request to c.
func (p *switchProxy) point(t *testing.T, c *httpChain) {
	u, err := url.Parse(c.url)
	require.NoError(t, err)
	p.target.Store(u)
}

// source dials the proxy: the indexer and the checker see one URL.
func (p *switchProxy) source(t *testing.T) *indexer.RPCSource {
	t.Helper()
	c, err := rpc.Dial(p.url)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return indexer.NewRPCSource(c)
}
