package api_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares v's JSON (indented) with testdata/<name>.json: the API's
// JSON is a contract, and any change to it is a visible diff of these
// files. go test ./store/api -update rewrites them after a deliberate
// change (within /v1, members are only added: docs/versioning.md).
func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	got = append(got, '\n')
	path := filepath.Join("testdata", name+".json")
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./store/api -update to write %s", path)
	require.Equal(t, string(want), string(got), "%s: the API's JSON changed", path)
}

var (
	at      = time.Date(2026, 11, 23, 12, 0, 0, 123456000, time.UTC)
	deposit = common.HexToAddress("0x70997970c51812dc3a010c7d01b50e0d17dc79c8")
	usdc    = common.HexToAddress("0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48")
)

func invoiceRow() store.Invoice {
	return store.Invoice{ID: 7, MerchantID: 3, Status: store.StatusPending,
		AmountWei: store.MustParseAmount("750000000000000001"), PaidWei: store.MustParseAmount("250000000000000000"),
		ChainID: 262144, DepositAddress: deposit, DerivationIndex: 41,
		PaymentURI:      "ethereum:0x70997970C51812dc3A010C7d01b50e0d17dc79C8@262144?value=750000000000000001",
		LookupTokenHash: []byte{1, 2, 3}, Underpaid: true, ExpiresAt: at.Add(15 * time.Minute),
		CreatedAt: at, UpdatedAt: at.Add(time.Minute), SweepStatus: store.SweepNone, Version: 3}
}

func TestInvoice_NativeJSON_Golden(t *testing.T) {
	inv := invoiceRow()
	inv.SetAsset(store.NativeAsset("ETH"))
	golden(t, "invoice_native_pending", api.NewInvoice(inv))

	// Every member set: metadata, order, times, the sweep's result.
	paid, confirmed, settled := at.Add(2*time.Minute), at.Add(3*time.Minute), at.Add(4*time.Minute)
	sweep := common.HexToHash("0x5d1f0b4d7f5ae4c1c3d33ecbd3a9ee64f10b7fd2d6c56f6e8c1a4e0f7a6a9b1c")
	swept, dust := inv.AmountWei, store.NewAmount(81_312_000)
	inv.Status, inv.PaidWei, inv.Underpaid, inv.Overpaid = store.StatusSettled, store.MustParseAmount("750000000000000002"), false, true
	inv.OrderID, inv.Description, inv.Metadata = "A-42", "2 × Tee", store.RawJSON(`{"cart":[1,2]}`)
	inv.RedirectURL, inv.NeedsAttention = "https://shop.example/orders/42", true
	inv.PaidAt, inv.ConfirmedAt, inv.SettledAt = &paid, &confirmed, &settled
	inv.SweepStatus, inv.SweepTxHash, inv.SweptWei, inv.DustWei = store.SweepSwept, &sweep, &swept, &dust
	golden(t, "invoice_native_settled", api.NewInvoice(inv))
}

func TestInvoice_TokenJSON_Golden(t *testing.T) {
	inv := invoiceRow()
	inv.AmountWei, inv.PaidWei = store.NewAmount(12_500_000), store.NewAmount(2_000_001)
	inv.PaymentURI = "ethereum:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48@262144/transfer?address=0x70997970C51812dc3A010C7d01b50e0d17dc79C8&uint256=12500000"
	inv.SetAsset(store.Asset{Symbol: "USDC", Address: &usdc, Decimals: 6})
	v := api.NewInvoice(inv)
	require.Nil(t, v.AmountWei, "a token amount is not wei")
	golden(t, "invoice_token_pending", v)
}

func TestMerchant_JSON_Golden(t *testing.T) {
	m := store.Merchant{ID: 3, Name: "shop", APIKeyDigest: []byte{9}, APIKeyHash: "$argon2id$…", APIKeyPrefix: "evmpay_sk_abcd",
		WebhookURL: "https://shop.example/hooks", WebhookSecretCiphertext: []byte{8},
		SettlementAddress: common.HexToAddress("0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"), CreatedAt: at, UpdatedAt: at}
	golden(t, "merchant", api.NewMerchant(m))
	m.Tolerance = store.MerchantTolerance{Percent: store.MustParseDecimal("0.5"), Amounts: []store.Fiat{store.MustParseFiat("0.50", "EUR")}}
	golden(t, "merchant_tolerance", api.NewMerchant(m))
}

func TestPayment_JSON_Golden(t *testing.T) {
	tx := common.HexToHash("0xffa42247a0a6131600f02a4ed9f719e102ef42f057db02dd5f86bca0660ab335")
	from := common.HexToAddress("0xc6fe5d33615a1c52c08018c47e8bc53646a0e101")
	native := store.Payment{InvoiceID: 7, TxHash: tx, LogIndex: store.NativeLogIndex, BlockNumber: 81,
		From: from, AmountWei: store.MustParseAmount("500000000000000000"), CreatedAt: at}
	token := native
	token.LogIndex, token.Token, token.AmountWei, token.WrongAsset = 2, &usdc, store.NewAmount(777), true
	unknown := token
	other := common.HexToAddress("0x0000000000000000000000000000000000000bad")
	unknown.Token = &other
	assets := []store.Asset{store.NativeAsset("ETH"), {Symbol: "USDC", Address: &usdc, Decimals: 6}}
	golden(t, "payments", []api.Payment{api.NewPayment(native, assets...), api.NewPayment(token, assets...),
		api.NewPayment(unknown, assets...)})
}

// A payment on the invoice's chain shows no chain (its JSON is what it
// was); a wrong-network payment shows wrong_network and the chain it
// arrived on, its asset named by its token address alone — the service's
// assets are the invoice's chain's (the native coin: 18 decimals, no
// symbol).
func TestPayment_WrongNetwork_JSON_Golden(t *testing.T) {
	tx := common.HexToHash("0xffa42247a0a6131600f02a4ed9f719e102ef42f057db02dd5f86bca0660ab335")
	from := common.HexToAddress("0xc6fe5d33615a1c52c08018c47e8bc53646a0e101")
	own := store.Payment{InvoiceID: 7, TxHash: tx, LogIndex: store.NativeLogIndex, BlockNumber: 81, ChainID: 1337,
		From: from, AmountWei: store.MustParseAmount("500000000000000000"), CreatedAt: at}
	wrong := own
	wrong.ChainID, wrong.WrongNetwork = 1338, true
	wrongToken := wrong
	wrongToken.LogIndex, wrongToken.Token, wrongToken.AmountWei = 2, &usdc, store.NewAmount(777)
	assets := []store.Asset{store.NativeAsset("ETH"), {Symbol: "USDC", Address: &usdc, Decimals: 6}}
	got := []api.Payment{api.NewPayment(own, assets...), api.NewPayment(wrong, assets...), api.NewPayment(wrongToken, assets...)}
	require.Equal(t, "ETH", got[0].Asset.Symbol)
	require.Empty(t, got[1].Asset.Symbol)
	require.Empty(t, got[2].AmountFormatted, "another chain's token: no decimals known")
	golden(t, "payments_wrong_network", got)
}

// An event's data is the invoice's JSON, with the members an event adds.
func TestInvoiceEvent_DataIsTheInvoiceJSON(t *testing.T) {
	inv := invoiceRow()
	inv.SetAsset(store.NativeAsset("ETH"))
	ev, err := api.InvoiceEvent(store.EventInvoiceWrongAsset, inv, at, map[string]any{"wrong_asset_payments": []int{}})
	require.NoError(t, err)
	require.Equal(t, store.EventInvoiceWrongAsset, ev.Type)
	require.EqualValues(t, 3, ev.MerchantID)
	require.EqualValues(t, 7, ev.InvoiceID)
	var data map[string]any
	require.NoError(t, json.Unmarshal(ev.Data, &data))
	want, err := json.Marshal(api.NewInvoice(inv))
	require.NoError(t, err)
	var wantMap map[string]any
	require.NoError(t, json.Unmarshal(want, &wantMap))
	wantMap["wrong_asset_payments"] = []any{}
	require.Equal(t, wantMap, data)
	require.Equal(t, "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", data["deposit_address"], "EIP-55")
}

// fiatRow is invoiceRow priced at 49.90 EUR, quoted in USDC and ETH,
// part paid in each.
func fiatRow() store.Invoice {
	inv := invoiceRow()
	price := store.MustParseFiat("49.90", "EUR")
	u := usdc
	usdcAsset := store.Asset{Symbol: "USDC", Address: &u, Decimals: 6}
	seen := at.Add(-4 * time.Second)
	inv.Pricing = &store.Pricing{
		Price:     price,
		Tolerance: store.Tolerance{Amount: store.MustParseFiat("0.50", "EUR"), Percent: store.MustParseDecimal("1")},
		Quotes: []store.Quote{
			{Asset: usdcAsset, Amount: store.NewAmount(62_375_000), Price: price, Rate: store.MustParseDecimal("0.8"), Pegged: true,
				Sources: []store.QuoteSource{
					{Name: "coinbase", Pair: "USDC/USD", Rate: store.MustParseDecimal("1.0002"), At: seen},
					{Name: "kraken", Pair: "USDC/USD", Rate: store.MustParseDecimal("0.9999"), At: seen},
					{Name: "ecb", Pair: "EUR/USD", Rate: store.MustParseDecimal("1.25"), At: at.Add(-20 * time.Hour)}},
				CreatedAt: at, ExpiresAt: at.Add(15 * time.Minute),
				PaymentURI: "ethereum:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48@262144/transfer?address=0x70997970C51812dc3A010C7d01b50e0d17dc79C8&uint256=62375000"},
			{Asset: store.NativeAsset("ETH"), Amount: store.MustParseAmount("24950000000000000"), Price: price, Rate: store.MustParseDecimal("2000"),
				Sources: []store.QuoteSource{
					{Name: "coinbase", Pair: "ETH/EUR", Rate: store.MustParseDecimal("2000.10"), At: seen},
					{Name: "kraken", Pair: "ETH/EUR", Rate: store.MustParseDecimal("1999.90"), At: seen}},
				CreatedAt: at, ExpiresAt: at.Add(15 * time.Minute),
				PaymentURI: "ethereum:0x70997970C51812dc3A010C7d01b50e0d17dc79C8@262144?value=24950000000000000"},
		},
	}
	inv.SetAsset(usdcAsset)
	inv.AmountWei, inv.PaidWei = store.NewAmount(62_375_000), store.NewAmount(30_000_000)
	inv.PaymentURI = inv.Pricing.Quotes[0].PaymentURI
	v := store.NewAmount(3900) // 24.00 EUR in USDC + 15.00 EUR in ETH
	inv.PaidValue = &v
	return inv
}

func TestInvoice_FiatJSON_Golden(t *testing.T) {
	inv := fiatRow()
	v := api.NewInvoice(inv)
	require.Nil(t, v.AmountWei)
	tx := common.HexToHash("0xffa42247a0a6131600f02a4ed9f719e102ef42f057db02dd5f86bca0660ab335")
	from := common.HexToAddress("0xc6fe5d33615a1c52c08018c47e8bc53646a0e101")
	u := usdc
	other := common.HexToAddress("0x0000000000000000000000000000000000000bad")
	v.Payments = api.NewPayments(inv, []store.Payment{
		{TxHash: tx, LogIndex: 0, From: from, AmountWei: store.NewAmount(30_000_000), Token: &u, BlockNumber: 80, CreatedAt: at},
		{TxHash: tx, LogIndex: store.NativeLogIndex, From: from, AmountWei: store.MustParseAmount("7500000000000001"), BlockNumber: 81, CreatedAt: at},
		{TxHash: tx, LogIndex: 3, From: from, AmountWei: store.NewAmount(5), Token: &other, WrongAsset: true, BlockNumber: 81, CreatedAt: at},
	})
	require.Equal(t, "24.00 EUR", v.Payments[0].Value.String())
	require.Equal(t, "15.00 EUR", v.Payments[1].Value.String(), "rounded down")
	require.Nil(t, v.Payments[2].Value, "a wrong asset has no value")
	golden(t, "invoice_fiat_pending", v)

	// Flagged late beyond the window, swept lead first.
	cur := store.MustParseFiat("41.10", "EUR")
	inv.Status, inv.NeedsAttention = store.StatusExpired, true
	inv.LateValuation = &store.LateValuation{Locked: store.MustParseFiat("39.00", "EUR"), Current: &cur, At: at.Add(48 * time.Hour)}
	eth := store.NativeAsset("ETH")
	inv.SweepAsset = &eth
	golden(t, "invoice_fiat_late", api.NewInvoice(inv))
}

// An invoice priced in its asset has none of the fiat members.
func TestInvoice_AssetPriced_HasNoFiatMembers(t *testing.T) {
	inv := invoiceRow()
	b, err := json.Marshal(api.NewInvoice(inv))
	require.NoError(t, err)
	for _, m := range []string{"price", "quotes", "paid_value", "underpayment_tolerance", "late_valuation", "sweep_asset", "payments"} {
		require.NotContains(t, string(b), `"`+m+`"`)
	}
}
