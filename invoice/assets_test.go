package invoice_test

import (
	"net/http"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
)

var (
	usdcAddr = common.HexToAddress("0x5FbDB2315678afecb367f032d93F642f64180aa3")
	daiAddr  = common.HexToAddress("0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512")
)

func withTokens(c *invoice.Config) {
	c.Assets = []store.Asset{
		{Symbol: "USDC", Address: &usdcAddr, Decimals: 6},
		{Symbol: "DAI", Address: &daiAddr, Decimals: 18},
	}
}

func TestCreateInvoice_TokenByFormattedAmount_ExactBaseUnitsTransferURIAndAsset(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, e *env) {
		e = newEnvOn(t, e.st, withTokens)
		m := e.newMerchant()
		res := e.createInvoice(m.APIKey, "t-1", `{"asset":"usdc","amount_formatted":"12.345678"}`)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		body := res.json(t)
		require.Equal(t, map[string]any{"symbol": "USDC", "address": usdcAddr.Hex(), "decimals": float64(6)}, body["asset"])
		require.Equal(t, "12345678", body["amount"], "base units, exactly")
		require.Equal(t, "12.345678", body["amount_formatted"])
		require.Equal(t, "0", body["paid"])
		require.Equal(t, "0", body["paid_formatted"])
		require.NotContains(t, body, "amount_wei", "token invoices have no wei amounts")
		require.NotContains(t, body, "paid_wei")
		require.Contains(t, body, "qr_png_url")
		require.Contains(t, body, "lookup_token")

		deposit := common.HexToAddress(body["deposit_address"].(string))
		require.Equal(t, "ethereum:"+usdcAddr.Hex()+"@1337/transfer?address="+deposit.Hex()+"&uint256=12345678", body["payment_uri"])
		uri, err := invoice.ParseTransferURI(body["payment_uri"].(string))
		require.NoError(t, err)
		require.Equal(t, uint64(12_345_678), uri.Amount.Uint64())

		invs := invoicesOf(t, e.st, m.ID)
		require.Len(t, invs, 1)
		require.Equal(t, usdcAddr, *invs[0].TokenAddress)
		require.Equal(t, store.MustParseAmount("12345678"), invs[0].AmountWei)

		// The payer's view shows the asset too.
		pub := e.do("GET", "/v1/public/invoice", body["lookup_token"].(string), "")
		require.Equal(t, http.StatusOK, pub.Status, "%s", pub.Body)
		pb := pub.json(t)
		require.Equal(t, "12345678", pb["amount"])
		require.Equal(t, "12.345678", pb["amount_formatted"])
		require.Equal(t, "0", pb["paid_formatted"])
		require.Equal(t, usdcAddr.Hex(), pb["asset"].(map[string]any)["address"])
		require.NotContains(t, pb, "amount_wei")
	})
}

func TestCreateInvoice_TokenByAddressAndBaseUnits_18Decimals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withTokens)
	m := e.newMerchant()
	res := e.createInvoice(m.APIKey, "t-2", `{"asset":"`+daiAddr.Hex()+`","amount":"1234567890123456789012"}`)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	body := res.json(t)
	require.Equal(t, "DAI", body["asset"].(map[string]any)["symbol"])
	require.Equal(t, "1234567890123456789012", body["amount"])
	require.Equal(t, "1234.567890123456789012", body["amount_formatted"])
}

func TestCreateInvoice_AmountWeiRequestWithTokensConfigured_Unchanged(t *testing.T) {
	t.Parallel()
	plain, tokens := newEnv(t), newEnv(t, withTokens)
	a, b := plain.newMerchant(), tokens.newMerchant()
	ra := plain.createInvoice(a.APIKey, "n-1", oneEther)
	rb := tokens.createInvoice(b.APIKey, "n-1", oneEther)
	require.Equal(t, http.StatusCreated, rb.Status, "%s", rb.Body)
	ja, jb := ra.json(t), rb.json(t)
	// The lookup token, and the checkout URL that carries it, are random.
	for _, k := range []string{"lookup_token", "checkout_url"} {
		delete(ja, k)
		delete(jb, k)
	}
	require.Equal(t, ja, jb, "a native invoice looks the same whether tokens are configured or not")
	// Every invoice carries its asset and amounts; a native one keeps
	// amount_wei and paid_wei as aliases (issue #24).
	require.Equal(t, map[string]any{"symbol": "ETH", "address": nil, "decimals": float64(18)}, jb["asset"])
	require.Equal(t, "1000000000000000000", jb["amount_wei"])
	require.Equal(t, jb["amount_wei"], jb["amount"])
	require.Equal(t, "1", jb["amount_formatted"])
	require.Equal(t, "0", jb["paid"])
	require.Equal(t, jb["paid_wei"], jb["paid"])
}

func TestCreateInvoice_BadTokenRequests_ProblemsAndNothingWritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withTokens)
	m := e.newMerchant()
	for i, c := range []struct {
		body, code, field string
	}{
		{`{"asset":"USDT","amount":"1"}`, "unknown_asset", "asset"},
		{`{"asset":"0x0000000000000000000000000000000000000001","amount":"1"}`, "unknown_asset", "asset"},
		{`{"asset":"0x5fbdb2315678afecb367f032d93F642f64180aa3","amount":"1"}`, "unknown_asset", "asset"},
		{`{"asset":7,"amount":"1"}`, "invalid_field", "asset"},
		// Symbols match in ASCII case only: a long s (U+017F) upper-cases
		// to S under Unicode rules, a Kelvin sign to K; neither is USDC/DAI.
		{`{"asset":"uſdc","amount":"1"}`, "unknown_asset", "asset"},
		{`{"asset":"ＵＳＤＣ","amount":"1"}`, "unknown_asset", "asset"},
		{`{"asset":"\u0064ai","amount":"1"}`, "", ""},
		{`{"asset":"USDC"}`, "missing_field", "amount"},
		{`{"asset":"USDC","amount_wei":"1"}`, "invalid_field", "amount_wei"},
		{`{"asset":"USDC","amount":"1","amount_formatted":"1"}`, "invalid_field", "amount"},
		{`{"asset":"USDC","amount_formatted":"1.0000001"}`, "invalid_amount", "amount_formatted"},
		{`{"asset":"USDC","amount_formatted":"1e6"}`, "invalid_amount", "amount_formatted"},
		{`{"asset":"USDC","amount_formatted":"-1"}`, "invalid_amount", "amount_formatted"},
		{`{"asset":"USDC","amount_formatted":"0.000000"}`, "invalid_amount", "amount_formatted"},
		{`{"asset":"USDC","amount":"1.5"}`, "invalid_amount", "amount"},
		{`{"asset":"USDC","amount":12}`, "invalid_amount", "amount"},
		{`{"asset":"USDC","amount_formatted":12.5}`, "invalid_amount", "amount_formatted"},
	} {
		res := e.createInvoice(m.APIKey, "bad-"+string(rune('a'+i)), c.body)
		if c.code == "" {
			require.Equal(t, http.StatusCreated, res.Status, "%s: ASCII case is folded: %s", c.body, res.Body)
			continue
		}
		requireProblem(t, res, http.StatusBadRequest, c.code, c.field)
	}
	require.Len(t, invoicesOf(t, e.st, m.ID), 1, "only the one request with a good asset made an invoice")
}

func TestNew_DuplicateAssets_Refused(t *testing.T) {
	t.Parallel()
	creds, err := invoice.NewCredentials(testSecretKey)
	require.NoError(t, err)
	for _, assets := range [][]store.Asset{
		{{Symbol: "USDC", Address: &usdcAddr, Decimals: 6}, {Symbol: "usdc", Address: &daiAddr, Decimals: 6}},
		{{Symbol: "USDC", Address: &usdcAddr, Decimals: 6}, {Symbol: "USDC2", Address: &usdcAddr, Decimals: 6}},
		{{Symbol: "", Address: &usdcAddr, Decimals: 6}},
	} {
		_, err := invoice.New(newPostgres(t), creds, testDeriver(t), chainID, invoice.Config{Assets: assets})
		require.Error(t, err)
	}
}

// A token invoice is for at most what exists of the token (payd passes each
// token's totalSupply() read at start), or MaxTokenAmount for a token without
// a known supply: an amount up to 2^256−1 can never be paid.
func TestCreateInvoice_TokenAmountAboveSupply_400(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withTokens, func(c *invoice.Config) {
		c.TokenMaxAmounts = map[common.Address]store.Amount{usdcAddr: store.MustParseAmount("5000000")}
	})
	m := e.newMerchant()
	res := e.createInvoice(m.APIKey, "over-supply", `{"asset":"USDC","amount":"5000001"}`)
	requireProblem(t, res, http.StatusBadRequest, "invalid_amount", "amount")
	require.Contains(t, string(res.Body), "at most 5 USDC")
	res = e.createInvoice(m.APIKey, "over-supply-formatted", `{"asset":"USDC","amount_formatted":"5.000001"}`)
	requireProblem(t, res, http.StatusBadRequest, "invalid_amount", "amount_formatted")
	max := "115792089237316195423570985008687907853269984665640564039457584007913129639935"
	res = e.createInvoice(m.APIKey, "max-dai", `{"asset":"DAI","amount":"`+max+`"}`)
	requireProblem(t, res, http.StatusBadRequest, "invalid_amount", "amount")
	require.Empty(t, invoicesOf(t, e.st, m.ID))

	res = e.createInvoice(m.APIKey, "whole-supply", `{"asset":"USDC","amount":"5000000"}`)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	res = e.createInvoice(m.APIKey, "max-token", `{"asset":"DAI","amount":"`+invoice.MaxTokenAmount.String()+`"}`)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
}
