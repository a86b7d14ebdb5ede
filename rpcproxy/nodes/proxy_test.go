package nodes_test

import (
	"context"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/evmpay/evmpay/rpcproxy"
	"github.com/evmpay/evmpay/rpcproxy/nodes"
)

// The RPC proxy in front of a pool: the gateway fronts several nodes.
// Reads go on when a node dies, a transaction reaches every node, the
// proxy's policy still applies, and with every node gone the proxy answers
// "upstream unavailable".
func TestProxy_WithPoolUpstream(t *testing.T) {
	t.Parallel()
	c := newChain(t, 1337)
	a, b := newFront(t, c.url), newFront(t, c.url)
	cfg := testConfig(t)
	cfg.MaxWait = 300 * time.Millisecond
	cfg.ChainID = 1337
	pool := newPool(t, []string{a.URL(), b.URL()}, cfg)
	p, err := rpcproxy.New("", rpcproxy.Config{Upstream: pool, Rate: rate.Inf})
	require.NoError(t, err)
	defer p.CloseIdleConnections()
	srv := httptest.NewServer(p)
	defer srv.Close()
	ctx := context.Background()

	ec, err := ethclient.Dial(srv.URL)
	require.NoError(t, err)
	defer ec.Close()
	id, err := ec.ChainID(ctx)
	require.NoError(t, err)
	require.Equal(t, big.NewInt(1337), id)

	a.kill()
	c.b.Commit()
	head, err := ec.BlockNumber(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, head)

	tx := c.signedTransfer(merchant, 1000)
	require.NoError(t, ec.SendTransaction(ctx, tx))
	require.Equal(t, 1, b.count("eth_sendRawTransaction"))
	c.b.Commit()
	requireMinedOnce(t, c, tx)

	// The proxy's policy is applied before the pool sees anything.
	resp := postJSON(t, srv.URL, `{"jsonrpc":"2.0","id":1,"method":"debug_traceTransaction","params":["0x00"]}`)
	require.Equal(t, http.StatusForbidden, resp.status)
	require.Zero(t, b.count("debug_traceTransaction"))

	b.kill()
	resp = postJSON(t, srv.URL, `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`)
	require.Equal(t, http.StatusBadGateway, resp.status, resp.body)
	var e struct {
		Error struct{ Code int } `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(resp.body), &e))
	require.Equal(t, rpcproxy.CodeUpstreamUnavailable, e.Error.Code)
	require.False(t, statusOf(t, pool, b.URL()).Up)
	require.Equal(t, []string{nodes.RedactURL(a.URL()), nodes.RedactURL(b.URL())},
		[]string{pool.Status()[0].URL, pool.Status()[1].URL})
}

type posted struct {
	status int
	body   string
}

func postJSON(t *testing.T, url, body string) posted {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return posted{resp.StatusCode, string(b)}
}
