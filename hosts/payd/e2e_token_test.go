package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
)

var devTokenRe = regexp.MustCompile(`test token\s+(\S+) (0x[0-9a-fA-F]{40})\s+\((\d+) decimals`)

// tokenPayFlow creates an invoice for 12.345678 of the dev chain's test
// stablecoin, pays its EIP-681 transfer URI with `payd pay`, and follows it
// through PAID and CONFIRMED to SETTLED, checking the exact token balance
// at the settlement address and the asset in every invoice.* webhook.
func tokenPayFlow(t *testing.T, ctx context.Context, api apiClient, chainAddr, banner string, recv *receiver) {
	t.Helper()
	m := devTokenRe.FindStringSubmatch(banner)
	require.NotNil(t, m, "the banner prints the test token:\n%s", banner)
	symbol, token := m[1], common.HexToAddress(m[2])
	require.Equal(t, m[2], token.Hex(), "EIP-55")
	require.Equal(t, "6", m[3])

	status, inv := api.do("POST", "/v1/invoices", map[string]any{"asset": symbol, "amount_formatted": "12.345678", "order_id": "e2e-token"},
		map[string]string{"Idempotency-Key": "e2e-token-" + fmt.Sprint(time.Now().UnixNano())})
	require.Equal(t, http.StatusCreated, status, "%v", inv)
	id := int64(inv["id"].(float64))
	require.Equal(t, "12345678", inv["amount"])
	require.Equal(t, map[string]any{"symbol": symbol, "address": token.Hex(), "decimals": float64(6)}, inv["asset"])
	uri := inv["payment_uri"].(string)
	require.Regexp(t, `^ethereum:`+token.Hex()+`@1337/transfer\?address=0x[0-9a-fA-F]{40}&uint256=12345678$`, uri)

	_, merchant := api.do("GET", "/v1/merchant", nil, nil)
	settlementAddr := common.HexToAddress(merchant["settlement_address"].(string))
	eth, err := ethclient.DialContext(ctx, "http://"+chainAddr)
	require.NoError(t, err)
	defer eth.Close()
	tok := testtoken.Bind(testtoken.Stable, token, eth, "", symbol, 6)
	before, err := tok.BalanceOf(ctx, settlementAddr)
	require.NoError(t, err)

	var payOut bytes.Buffer
	require.NoError(t, run(ctx, []string{"pay", "--rpc", chainAddr, uri}, &payOut))
	require.Regexp(t, `^0x[0-9a-f]{64}\n$`, payOut.String())

	seen := map[string]bool{}
	waitUntil(t, 150*time.Second, 250*time.Millisecond, func() bool {
		_, got := api.do("GET", fmt.Sprintf("/v1/invoices/%d", id), nil, nil)
		s, _ := got["status"].(string)
		if !seen[s] {
			seen[s] = true
			t.Logf("token invoice %d is %s (sweep %v, paid %v)", id, s, got["sweep_status"], got["paid"])
		}
		return s == "SETTLED"
	}, func() string { return fmt.Sprintf("token invoice never settled; statuses seen: %v", seen) })
	require.True(t, seen["CONFIRMED"], "went through CONFIRMED")

	_, got := api.do("GET", fmt.Sprintf("/v1/invoices/%d", id), nil, nil)
	require.Equal(t, "SWEPT", got["sweep_status"])
	require.Equal(t, "12345678", got["paid"])
	require.Equal(t, "12.345678", got["paid_formatted"])
	after, err := tok.BalanceOf(ctx, settlementAddr)
	require.NoError(t, err)
	require.Equal(t, "12345678", new(big.Int).Sub(after, before).String(), "the settlement address received exactly the invoice amount")

	require.Eventually(t, func() bool { return len(recv.types(id)) >= 3 }, 30*time.Second, 100*time.Millisecond,
		"webhooks: got %v", recv.types(id))
	require.Equal(t, []string{"invoice.paid", "invoice.confirmed", "invoice.settled"}, recv.types(id))
	recv.mu.Lock()
	defer recv.mu.Unlock()
	require.Empty(t, recv.bad)
	for _, e := range recv.events {
		var data struct {
			ID    int64 `json:"id"`
			Asset struct {
				Address string `json:"address"`
			} `json:"asset"`
			Amount string `json:"amount"`
		}
		require.NoError(t, json.Unmarshal(e.Data, &data))
		if data.ID == id {
			require.Equal(t, token.Hex(), data.Asset.Address, "%s carries the asset", e.Type)
			require.Equal(t, "12345678", data.Amount)
		}
	}
}
