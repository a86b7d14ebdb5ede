package rpcproxy

import (
	"context"
	"math/big"
	"net/http"
	"testing"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/simchain"
)

// startNode runs go-ethereum's simulated backend serving real JSON-RPC over
// HTTP on a free loopback port and returns its URL.
func startNode(t *testing.T) (*simchain.Backend, string) {
	t.Helper()
	sim := simchain.New(t, types.GenesisAlloc{}, simchain.HTTP("eth", "net", "web3", "debug"))
	return sim, sim.HTTPURL()
}

func TestNode_ChainIDAnsweredThroughProxy(t *testing.T) {
	t.Parallel()
	_, nodeURL := startNode(t)
	_, url := newProxyTo(t, nodeURL, Config{})

	r := post(t, url, `{"jsonrpc":"2.0","id":42,"method":"eth_chainId","params":[]}`)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.JSONEq(t, `{"jsonrpc":"2.0","id":42,"result":"0x539"}`, r.body)

	// go-ethereum's own client works through the proxy unchanged.
	c, err := ethclient.Dial(url)
	require.NoError(t, err)
	defer c.Close()
	id, err := c.ChainID(context.Background())
	require.NoError(t, err)
	require.Equal(t, big.NewInt(1337), id)
}

func TestNode_BatchWithDebugBlocked_IDsAndOrderKept(t *testing.T) {
	t.Parallel()
	sim, nodeURL := startNode(t)
	sim.Commit()
	sim.Commit()
	_, url := newProxyTo(t, nodeURL, Config{})

	// The node serves debug_ (HTTPModules above), so only the proxy stands
	// between the caller and it.
	r := post(t, url, batchOf(
		callJSON(`"first"`, "eth_blockNumber"),
		`{"jsonrpc":"2.0","id":7,"method":"debug_traceTransaction","params":["0x`+zeros(64)+`"]}`,
		callJSON("null", "eth_chainId"),
		callJSON("3", "net_version"),
	))

	require.Equal(t, http.StatusOK, r.status, r.body)
	rs := decodeBatch(t, r.body)
	require.Len(t, rs, 4)
	require.Equal(t, `"first"`, string(rs[0].ID))
	require.JSONEq(t, `"0x2"`, string(rs[0].Result))
	require.Equal(t, "7", string(rs[1].ID))
	requireErrorCode(t, rs[1], CodeMethodNotFound)
	require.Equal(t, "null", string(rs[2].ID))
	require.JSONEq(t, `"0x539"`, string(rs[2].Result))
	require.Equal(t, "3", string(rs[3].ID))
	require.JSONEq(t, `"1337"`, string(rs[3].Result))

	// Single debug call: refused before it reaches the node.
	r = post(t, url, `{"jsonrpc":"2.0","id":8,"method":"debug_traceTransaction","params":["0x`+zeros(64)+`"]}`)
	require.Equal(t, http.StatusForbidden, r.status)
	requireErrorCode(t, decodeOne(t, r.body), CodeMethodNotFound)

	// A whole allowed batch is streamed back as the node wrote it.
	r = post(t, url, batchOf(callJSON("1", "eth_chainId"), callJSON("2", "eth_blockNumber")))
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `[{"jsonrpc":"2.0","id":1,"result":"0x539"},{"jsonrpc":"2.0","id":2,"result":"0x2"}]`, r.body)
}

func zeros(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '0'
	}
	return string(b)
}
