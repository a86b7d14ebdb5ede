package main

import (
	"context"
	"fmt"
	"math/big"
	"net/http"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"
)

// fiatPayFlow prices an invoice at 10.00 USD in `payd dev` (the dev rates:
// 1 ETH = 2,500 USD, offline), sets the merchant's underpayment tolerance
// to 1 %, pays 9.90 USD worth of ETH (what an exchange's withdrawal fee
// leaves), and follows it to SETTLED: paid within the tolerance (flagged
// underpaid), the merchant receives exactly what was sent, and every
// webhook carries the price, the paid value and the payment's value.
func fiatPayFlow(t *testing.T, ctx context.Context, api apiClient, chainAddr string, recv *receiver) {
	t.Helper()
	code, m := api.do("PATCH", "/v1/merchant", map[string]any{"underpayment_tolerance": map[string]any{"percent": "1"}}, nil)
	require.Equal(t, http.StatusOK, code, "%v", m)
	status, inv := api.do("POST", "/v1/invoices", map[string]any{"price": map[string]any{"amount": "10.00", "currency": "USD"},
		"accept": []string{"ETH", "USDC"}, "order_id": "e2e-fiat"}, map[string]string{"Idempotency-Key": "e2e-fiat-" + fmt.Sprint(time.Now().UnixNano())})
	require.Equal(t, http.StatusCreated, status, "%v", inv)
	id := int64(inv["id"].(float64))
	quotes := inv["quotes"].([]any)
	require.Len(t, quotes, 2)
	require.Equal(t, "4000000000000000", quotes[0].(map[string]any)["amount"], "10.00 USD at 2,500 USD per ETH")
	require.Equal(t, "10000000", quotes[1].(map[string]any)["amount"], "USDC at its peg")
	require.Equal(t, map[string]any{"amount": map[string]any{"amount": "0.00", "currency": "USD"}, "percent": "1"}, inv["underpayment_tolerance"])

	_, merchant := api.do("GET", "/v1/merchant", nil, nil)
	settlementAddr := common.HexToAddress(merchant["settlement_address"].(string))
	eth, err := ethclient.DialContext(ctx, "http://"+chainAddr)
	require.NoError(t, err)
	defer eth.Close()
	before, err := eth.BalanceAt(ctx, settlementAddr, nil)
	require.NoError(t, err)
	// 0.00396 ETH is 9.90 USD: 1 % short.
	short := fmt.Sprintf("ethereum:%s@1337?value=3960000000000000", inv["deposit_address"])
	require.NoError(t, run(ctx, []string{"pay", "--rpc", chainAddr, short}, &syncBuffer{}))
	waitUntil(t, 150*time.Second, 250*time.Millisecond, func() bool {
		_, got := api.do("GET", fmt.Sprintf("/v1/invoices/%d", id), nil, nil)
		return got["status"] == "SETTLED"
	}, func() string { return "the fiat invoice never settled" })
	_, got := api.do("GET", fmt.Sprintf("/v1/invoices/%d", id), nil, nil)
	require.Equal(t, map[string]any{"amount": "9.90", "currency": "USD"}, got["paid_value"])
	require.Equal(t, true, got["underpaid"], "paid within the tolerance, and flagged")
	after, err := eth.BalanceAt(ctx, settlementAddr, nil)
	require.NoError(t, err)
	require.Equal(t, "3960000000000000", new(big.Int).Sub(after, before).String(), "exactly what was sent")

	require.Eventually(t, func() bool { return len(recv.types(id)) >= 3 }, 30*time.Second, 100*time.Millisecond)
	require.Equal(t, []string{"invoice.paid", "invoice.confirmed", "invoice.settled"}, recv.types(id))
	for _, typ := range recv.types(id) {
		d := recv.data(id, typ)
		require.Equal(t, map[string]any{"amount": "10.00", "currency": "USD"}, d["price"], typ)
		require.Equal(t, map[string]any{"amount": "9.90", "currency": "USD"}, d["paid_value"], typ)
		ps := d["payments"].([]any)
		require.Len(t, ps, 1, typ)
		require.Equal(t, map[string]any{"amount": "9.90", "currency": "USD"}, ps[0].(map[string]any)["value"], typ)
	}
	code, _ = api.do("PATCH", "/v1/merchant", map[string]any{"underpayment_tolerance": map[string]any{}}, nil)
	require.Equal(t, http.StatusOK, code)
}
