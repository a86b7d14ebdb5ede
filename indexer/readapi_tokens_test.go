package indexer_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

type apiTransfer struct {
	BlockNumber     uint64      `json:"block_number"`
	BlockHash       common.Hash `json:"block_hash"`
	TransactionHash common.Hash `json:"transaction_hash"`
	LogIndex        int         `json:"log_index"`
	Token           string      `json:"token"`
	From            string      `json:"from"`
	To              string      `json:"to"`
	Value           string      `json:"value"`
}

type apiTransferPage struct {
	TokenTransfers []apiTransfer `json:"token_transfers"`
	NextCursor     *string       `json:"next_cursor"`
}

func TestReadAPI_TokenTransfers_OfATransactionAndOfAnAddressPaged(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	usdc := c.deploy(testtoken.Stable, "USDC", 1_000_000_000)
	to := common.HexToAddress("0x00000000000000000000000000000000c0ffee00")
	var hashes []common.Hash // newest first
	for i := range 5 {
		hashes = append([]common.Hash{c.transfer(usdc, to, int64(1_000_000+i))}, hashes...)
		c.commit(1)
	}
	plain := c.send(&to)
	c.commit(1)
	start(t, c.source(), st, indexer.Config{Backfill: true, Tokens: []common.Address{usdc.Address}})
	waitIndexed(t, st, c)
	api, err := indexer.NewReadAPI(st, indexer.ReadAPIConfig{Logger: testLogger(t)})
	require.NoError(t, err)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)

	var one apiTransferPage
	status, p := get(t, srv.URL, "/v1/transactions/"+hashes[0].Hex()+"/token-transfers", &one)
	require.Equal(t, http.StatusOK, status, p)
	require.Len(t, one.TokenTransfers, 1)
	tr := one.TokenTransfers[0]
	require.Equal(t, usdc.Address.Hex(), tr.Token, "EIP-55")
	require.Equal(t, c.from.Hex(), tr.From)
	require.Equal(t, to.Hex(), tr.To)
	require.Equal(t, "1000004", tr.Value)
	r, err := c.client.TransactionReceipt(context.Background(), hashes[0])
	require.NoError(t, err)
	require.Equal(t, r.BlockHash, tr.BlockHash)

	var none apiTransferPage
	status, _ = get(t, srv.URL, "/v1/transactions/"+plain.Hex()+"/token-transfers", &none)
	require.Equal(t, http.StatusOK, status)
	require.NotNil(t, none.TokenTransfers)
	require.Empty(t, none.TokenTransfers)
	status, p = get(t, srv.URL, "/v1/transactions/0x"+common.Bytes2Hex(make([]byte, 32))+"/token-transfers", &none)
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, "transaction_not_found", p.Code)

	var got []common.Hash
	path := "/v1/addresses/" + to.Hex() + "/token-transfers?limit=2"
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		var page apiTransferPage
		status, p := get(t, srv.URL, path, &page)
		require.Equal(t, http.StatusOK, status, p)
		for _, tr := range page.TokenTransfers {
			got = append(got, tr.TransactionHash)
		}
		if page.NextCursor == nil {
			break
		}
		path = "/v1/addresses/" + to.Hex() + "/token-transfers?limit=2&cursor=" + url.QueryEscape(*page.NextCursor)
	}
	require.Equal(t, hashes, got, "newest first, each once, across pages")

	resp, err := http.Get(srv.URL + "/v1/addresses/0x1234/token-transfers")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var prob apiProblem
	require.NoError(t, json.Unmarshal(body, &prob))
	require.Equal(t, "invalid_address", prob.Code)
}
