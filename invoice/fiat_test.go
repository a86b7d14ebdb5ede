package invoice_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/invoice/pricing"
	"github.com/evmpay/evmpay/store"
)

// switchable is the dev rate table as a source that can be taken down.
type switchable struct {
	name string
	down atomic.Bool
	src  *pricing.Fixed
}

func (s *switchable) Name() string { return s.name }

func (s *switchable) Rates(ctx context.Context, pairs []pricing.Pair) ([]pricing.Rate, error) {
	if s.down.Load() {
		return nil, errors.New(s.name + ": connection refused")
	}
	return s.src.Rates(ctx, pairs)
}

// fiatEnv is an invoice API with a Pricer over two switchable copies of
// the dev rates (1 ETH = 2,000 EUR = 2,500 USD; 1 USDC = 0.80 EUR), on the
// env's clock, and USDC configured beside the native coin.
type fiatEnv struct {
	*env
	pricer  *pricing.Pricer
	sources []*switchable
}

func newFiatEnv(t *testing.T, st store.Store) *fiatEnv {
	t.Helper()
	f := &fiatEnv{}
	e := newEnvOn(t, st, func(c *invoice.Config) {
		c.Assets = []store.Asset{{Symbol: "USDC", Address: &usdcAddr, Decimals: 6}}
		for _, name := range []string{"a", "b"} {
			f.sources = append(f.sources, &switchable{name: name, src: pricing.NewFixed(name, pricing.DevRates, c.Now)})
		}
		p, err := pricing.New([]pricing.Source{f.sources[0], f.sources[1]}, pricing.Config{
			Assets: []string{"ETH", "USDC"}, Currencies: []string{"EUR", "USD", "JPY"}, Now: c.Now,
		})
		require.NoError(t, err)
		f.pricer = p
		c.Pricer = p
	})
	f.env = e
	f.refresh()
	return f
}

func (f *fiatEnv) refresh() { _ = f.pricer.Refresh(ctx) }

func quotesOf(t *testing.T, body map[string]any) []map[string]any {
	t.Helper()
	raw, ok := body["quotes"].([]any)
	require.True(t, ok, "quotes: %v", body)
	out := make([]map[string]any, len(raw))
	for i, q := range raw {
		out[i] = q.(map[string]any)
	}
	return out
}

func TestCreateInvoice_FiatPrice_OneLockedQuotePerAcceptedAsset(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, e *env) {
		f := newFiatEnv(t, e.st)
		m := f.newMerchant()
		res := f.createInvoice(m.APIKey, "f-1", `{"price":{"amount":"49.90","currency":"EUR"},"accept":["USDC","eth"],"order_id":"A-1"}`)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		body := res.json(t)
		require.Equal(t, map[string]any{"amount": "49.90", "currency": "EUR"}, body["price"])
		require.Equal(t, map[string]any{"amount": "0.00", "currency": "EUR"}, body["paid_value"])
		require.Equal(t, map[string]any{"amount": map[string]any{"amount": "0.00", "currency": "EUR"}, "percent": "0"}, body["underpayment_tolerance"])
		deposit := common.HexToAddress(body["deposit_address"].(string))
		qs := quotesOf(t, body)
		require.Len(t, qs, 2)
		// 49.90 EUR at 0.80 EUR per USDC (its 1 USD peg crossed into EUR).
		require.Equal(t, "USDC", qs[0]["asset"].(map[string]any)["symbol"])
		require.Equal(t, "62375000", qs[0]["amount"])
		require.Equal(t, "62.375", qs[0]["amount_formatted"])
		require.Equal(t, "0.8", qs[0]["rate"])
		require.Equal(t, true, qs[0]["pegged"])
		require.Equal(t, fmt.Sprintf("ethereum:%s@1337/transfer?address=%s&uint256=62375000", usdcAddr.Hex(), deposit.Hex()), qs[0]["payment_uri"])
		// 49.90 EUR at 2,000 EUR per ETH: 0.02495 ETH, exactly.
		require.Equal(t, "ETH", qs[1]["asset"].(map[string]any)["symbol"])
		require.Equal(t, "24950000000000000", qs[1]["amount"])
		require.Equal(t, "2000", qs[1]["rate"])
		require.Equal(t, fmt.Sprintf("ethereum:%s@1337?value=24950000000000000", deposit.Hex()), qs[1]["payment_uri"])
		require.NotEmpty(t, qs[1]["sources"], "the observations behind the rate")
		require.Equal(t, body["expires_at"], qs[1]["expires_at"], "locked until the invoice expires")
		// The invoice's own asset is its first quote's.
		require.Equal(t, "62375000", body["amount"])
		require.Equal(t, qs[0]["payment_uri"], body["payment_uri"])
		require.NotContains(t, body, "amount_wei")

		stored := invoicesOf(t, f.st, m.ID)[0]
		require.True(t, stored.IsFiat())
		require.Equal(t, usdcAddr, *stored.TokenAddress)
		require.Len(t, stored.Pricing.Quotes, 2)

		// Reads show the same, and the replay is byte for byte.
		again := f.createInvoice(m.APIKey, "f-1", `{"price":{"amount":"49.90","currency":"EUR"},"accept":["USDC","eth"],"order_id":"A-1"}`)
		require.Equal(t, res.Body, again.Body)
		got := f.do("GET", fmt.Sprintf("/v1/invoices/%d", stored.ID), m.APIKey, "").json(t)
		require.Equal(t, body["quotes"], got["quotes"])
	})
}

func TestCreateInvoice_FiatPrice_AcceptDefaultsToEveryPricedAsset(t *testing.T) {
	t.Parallel()
	f := newFiatEnv(t, newSQLite(t))
	m := f.newMerchant()
	body := f.mustCreateJSON(m.APIKey, "d-1", `{"price":{"amount":"1000","currency":"JPY"}}`)
	qs := quotesOf(t, body)
	require.Len(t, qs, 2, "the native coin first, then the tokens")
	require.Equal(t, "ETH", qs[0]["asset"].(map[string]any)["symbol"])
	require.Equal(t, "USDC", qs[1]["asset"].(map[string]any)["symbol"])
	// JPY: no minor unit; USD/JPY = 160 / 1.25 = 128, so 1 ETH = 320,000 JPY.
	require.Equal(t, map[string]any{"amount": "1000", "currency": "JPY"}, body["price"])
	require.Equal(t, "320000", qs[0]["rate"])
	require.Equal(t, "3125000000000000", qs[0]["amount"]) // 1000 / 320000 ETH
	require.Equal(t, "7812500", qs[1]["amount"])          // 1000 / 128 USDC
	require.Equal(t, body["payment_uri"], qs[0]["payment_uri"])
	require.Equal(t, "3125000000000000", body["amount_wei"], "a fiat invoice shown in the native coin keeps the aliases")
}

func (e *env) mustCreateJSON(apiKey, key, body string) map[string]any {
	e.t.Helper()
	res := e.createInvoice(apiKey, key, body)
	require.Equal(e.t, http.StatusCreated, res.Status, "%s", res.Body)
	return res.json(e.t)
}

func TestCreateInvoice_FiatPrice_BadRequestsRefusedBeforeTheKey(t *testing.T) {
	t.Parallel()
	f := newFiatEnv(t, newSQLite(t))
	m := f.newMerchant()
	for _, c := range []struct {
		body, code, field string
	}{
		{`{"price":{"amount":"49.901","currency":"EUR"}}`, "invalid_amount", "price.amount"},
		{`{"price":{"amount":"100.5","currency":"JPY"}}`, "invalid_amount", "price.amount"},
		{`{"price":{"amount":"0","currency":"EUR"}}`, "invalid_amount", "price.amount"},
		{`{"price":{"amount":"-1","currency":"EUR"}}`, "invalid_amount", "price.amount"},
		{`{"price":{"amount":49.9,"currency":"EUR"}}`, "invalid_amount", "price.amount"},
		{`{"price":{"amount":"1e3","currency":"EUR"}}`, "invalid_amount", "price.amount"},
		{`{"price":{"amount":"10","currency":"XYZ"}}`, "unsupported_currency", "price.currency"},
		{`{"price":{"amount":"10","currency":"GBP"}}`, "unsupported_currency", "price.currency"},
		{`{"price":{"amount":"10"}}`, "unsupported_currency", "price.currency"},
		{`{"price":"49.90 EUR"}`, "invalid_field", "price"},
		{`{"price":{"amount":"10","currency":"EUR","x":1}}`, "unknown_field", "price.x"},
		{`{"price":{"amount":"10","currency":"EUR"},"amount_wei":"1"}`, "invalid_field", "amount_wei"},
		{`{"price":{"amount":"10","currency":"EUR"},"asset":"USDC"}`, "invalid_field", "asset"},
		{`{"price":{"amount":"10","currency":"EUR"},"accept":[]}`, "invalid_field", "accept"},
		{`{"price":{"amount":"10","currency":"EUR"},"accept":"USDC"}`, "invalid_field", "accept"},
		{`{"price":{"amount":"10","currency":"EUR"},"accept":["DOGE"]}`, "unknown_asset", "accept[0]"},
		{`{"price":{"amount":"10","currency":"EUR"},"accept":["USDC","usdc"]}`, "invalid_field", "accept[1]"},
		{`{"accept":["USDC"],"amount_wei":"1"}`, "invalid_field", "accept"},
	} {
		res := f.createInvoice(m.APIKey, "bad", c.body)
		requireProblem(t, res, http.StatusBadRequest, c.code, c.field)
	}
	require.Empty(t, invoicesOf(t, f.st, m.ID))
	f.mustCreateJSON(m.APIKey, "bad", `{"price":{"amount":"10","currency":"EUR"}}`) // the key was never used up
}

func TestCreateInvoice_FiatPrice_WithoutAPricer_Refused(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, newSQLite(t))
	m := e.newMerchant()
	requireProblem(t, e.createInvoice(m.APIKey, "k", `{"price":{"amount":"10","currency":"EUR"}}`),
		http.StatusBadRequest, "unsupported_currency", "price")
}

// All sources down and no last good rate young enough: 503
// rate_unavailable with Retry-After, nothing created, and the key works
// once the rates are back.
func TestCreateInvoice_FiatPrice_AllSourcesDown_503NothingWrittenKeyReusable(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, e *env) {
		f := newFiatEnv(t, e.st)
		m := f.newMerchant()
		body := `{"price":{"amount":"49.90","currency":"EUR"}}`
		for _, s := range f.sources {
			s.down.Store(true)
		}
		f.clock.Advance(3 * 60e9) // past MaxAge (2 min): the last good rates are too old
		f.refresh()
		res := f.createInvoice(m.APIKey, "k-503", body)
		requireProblem(t, res, http.StatusServiceUnavailable, "rate_unavailable", "")
		require.Regexp(t, `^[1-9][0-9]*$`, res.Header.Get("Retry-After"))
		require.Empty(t, invoicesOf(t, f.st, m.ID), "nothing created")
		_, err := f.st.GetIdempotencyRecord(ctx, m.ID, "k-503")
		require.ErrorIs(t, err, store.ErrNotFound, "the key was released")

		// One source back: still too few (MinSources 2) for a new rate.
		f.sources[0].down.Store(false)
		f.refresh()
		requireProblem(t, f.createInvoice(m.APIKey, "k-503", body), http.StatusServiceUnavailable, "rate_unavailable", "")

		f.sources[1].down.Store(false)
		f.refresh()
		created := f.mustCreateJSON(m.APIKey, "k-503", body)
		require.Len(t, quotesOf(t, created), 2)
		require.Len(t, invoicesOf(t, f.st, m.ID), 1)
	})
}

// One source down: the last good rate stands in (stale) while younger than
// MaxAge.
func TestCreateInvoice_FiatPrice_OneSourceDown_StaleLastGoodRateWithinMaxAge(t *testing.T) {
	t.Parallel()
	f := newFiatEnv(t, newSQLite(t))
	m := f.newMerchant()
	f.sources[1].down.Store(true)
	f.clock.Advance(60e9) // b's last observation (at t0) still counts: verified now
	f.refresh()
	f.clock.Advance(70e9) // now it is older than MaxAge: one source left
	f.refresh()
	body := f.mustCreateJSON(m.APIKey, "k", `{"price":{"amount":"10","currency":"USD"},"accept":["ETH"]}`)
	q := quotesOf(t, body)[0]
	require.Equal(t, true, q["stale"])
	require.Equal(t, "4000000000000000", q["amount"]) // 10 / 2500
}

func TestCreateInvoice_FiatPrice_TheMerchantsToleranceIsSnapshotted(t *testing.T) {
	t.Parallel()
	f := newFiatEnv(t, newSQLite(t))
	m := f.newMerchant()
	res := f.do("PATCH", "/v1/merchant", m.APIKey, `{"underpayment_tolerance":{"percent":"1.5","amounts":[{"amount":"0.50","currency":"EUR"},{"amount":"1","currency":"JPY"}]}}`)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, map[string]any{"percent": "1.5", "amounts": []any{
		map[string]any{"amount": "0.50", "currency": "EUR"}, map[string]any{"amount": "1", "currency": "JPY"}}},
		res.json(t)["underpayment_tolerance"])
	eur := f.mustCreateJSON(m.APIKey, "e", `{"price":{"amount":"20","currency":"EUR"}}`)
	require.Equal(t, map[string]any{"amount": map[string]any{"amount": "0.50", "currency": "EUR"}, "percent": "1.5"}, eur["underpayment_tolerance"])
	usd := f.mustCreateJSON(m.APIKey, "u", `{"price":{"amount":"20","currency":"USD"}}`)
	require.Equal(t, map[string]any{"amount": map[string]any{"amount": "0.00", "currency": "USD"}, "percent": "1.5"}, usd["underpayment_tolerance"],
		"no amount for USD: the percentage only")

	// A later change moves no open invoice.
	require.Equal(t, http.StatusOK, f.do("PATCH", "/v1/merchant", m.APIKey, `{"underpayment_tolerance":{}}`).Status)
	got := f.do("GET", fmt.Sprintf("/v1/invoices/%v", eur["id"]), m.APIKey, "").json(t)
	require.Equal(t, eur["underpayment_tolerance"], got["underpayment_tolerance"])
	require.Equal(t, map[string]any{"percent": "0", "amounts": []any{}}, f.do("GET", "/v1/merchant", m.APIKey, "").json(t)["underpayment_tolerance"])

	for _, bad := range []string{
		`{"underpayment_tolerance":{"percent":"101"}}`, `{"underpayment_tolerance":{"percent":"-1"}}`,
		`{"underpayment_tolerance":{"percent":0.5}}`, `{"underpayment_tolerance":{"amounts":[{"amount":"0.501","currency":"EUR"}]}}`,
		`{"underpayment_tolerance":{"amounts":[{"amount":"1","currency":"EUR"},{"amount":"2","currency":"eur"}]}}`,
		`{"underpayment_tolerance":{"amounts":[{"amount":"1","currency":"XYZ"}]}}`, `{"underpayment_tolerance":{"x":1}}`,
		`{"underpayment_tolerance":"1%"}`,
	} {
		requireProblem(t, f.do("PATCH", "/v1/merchant", m.APIKey, bad), http.StatusBadRequest, "invalid_field", "underpayment_tolerance")
	}
}

// payFiat records payments to a fiat invoice as settlement would, with the
// value they are worth.
func (f *fiatEnv) payFiat(id int64, ps ...store.Payment) store.Invoice {
	f.t.Helper()
	inv, err := f.st.GetInvoice(ctx, id)
	require.NoError(f.t, err)
	var all []store.AssetAmount
	for i := range ps {
		ps[i].InvoiceID, ps[i].BlockNumber, ps[i].CreatedAt = id, uint64(10+i), t0
		ps[i].TxHash = common.BigToHash(big.NewInt(int64(id*100 + int64(i) + 1)))
		if ps[i].Token == nil {
			ps[i].LogIndex = store.NativeLogIndex
		}
		require.NoError(f.t, f.st.InsertPayment(ctx, &ps[i]))
		all = append(all, store.AssetAmount{Token: ps[i].Token, Amount: ps[i].AmountWei})
	}
	v, err := store.ValuePayments(inv.Pricing.Quotes, all)
	require.NoError(f.t, err)
	inv.PaidValue, inv.Underpaid = &v.Minor, true
	require.NoError(f.t, f.st.UpdateInvoice(ctx, &inv))
	return inv
}

func TestPublicInvoice_Fiat_PriceFirstRemainingValueAndEveryAssetsExactRemainder(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, e *env) {
		f := newFiatEnv(t, e.st)
		m := f.newMerchant()
		inv := f.mustCreate(m.APIKey, "p", `{"price":{"amount":"49.90","currency":"EUR"},"accept":["USDC","ETH"]}`)
		pub := f.do("GET", "/v1/public/invoice", inv.LookupToken, "").json(t)
		require.Equal(t, map[string]any{"amount": "49.90", "currency": "EUR"}, pub["price"])
		require.Equal(t, map[string]any{"amount": "49.90", "currency": "EUR"}, pub["remaining_value"])
		qs := quotesOf(t, pub)
		require.Equal(t, "62375000", qs[0]["remaining"])
		require.Equal(t, "24950000000000000", qs[1]["remaining"])

		// 20 USDC (16.00 EUR) arrived: 33.90 EUR remain, 42.375 USDC or
		// 0.01695 ETH.
		u := usdcAddr
		f.payFiat(inv.ID, store.Payment{Token: &u, AmountWei: store.NewAmount(20_000_000)})
		pub = f.do("GET", "/v1/public/invoice", inv.LookupToken, "").json(t)
		require.Equal(t, map[string]any{"amount": "16.00", "currency": "EUR"}, pub["paid_value"])
		require.Equal(t, map[string]any{"amount": "33.90", "currency": "EUR"}, pub["remaining_value"])
		qs = quotesOf(t, pub)
		require.Equal(t, "20000000", qs[0]["paid"])
		require.Equal(t, "42375000", qs[0]["remaining"])
		require.Equal(t, "0", qs[1]["paid"])
		require.Equal(t, "16950000000000000", qs[1]["remaining"])
		ethURI := fmt.Sprintf("ethereum:%s@1337?value=16950000000000000", inv.DepositAddress.Hex())
		require.Equal(t, ethURI, qs[1]["payment_uri"])
		require.Equal(t, "42375000", pub["remaining"], "the top level is the first quote's")
		payments := pub["payments"].([]any)
		require.Len(t, payments, 1)
		require.Equal(t, map[string]any{"amount": "16.00", "currency": "EUR"}, payments[0].(map[string]any)["value"])

		// The QR code of the asset the payer picks.
		svg := f.do("GET", "/v1/public/invoice/qr.svg?asset=eth", inv.LookupToken, "")
		require.Equal(t, http.StatusOK, svg.Status, "%s", svg.Body)
		want, err := invoice.QRSVG(ethURI)
		require.NoError(t, err)
		require.Equal(t, want, svg.Body)
		requireProblem(t, f.do("GET", "/v1/public/invoice/qr.svg?asset=DAI", inv.LookupToken, ""), 400, "invalid_parameter", "asset")
		requireProblem(t, f.do("GET", "/v1/public/invoice/qr.svg?size=3", inv.LookupToken, ""), 400, "unknown_parameter", "size")

		// The merchant's read lists the payment with its value.
		got := f.do("GET", fmt.Sprintf("/v1/invoices/%d", inv.ID), m.APIKey, "").json(t)
		mp := got["payments"].([]any)[0].(map[string]any)
		require.Equal(t, map[string]any{"amount": "16.00", "currency": "EUR"}, mp["value"])
		require.Equal(t, "USDC", mp["asset"].(map[string]any)["symbol"])
		list := f.do("GET", "/v1/invoices", m.APIKey, "").json(t)
		require.Equal(t, got["payments"], list["data"].([]any)[0].(map[string]any)["payments"])
	})
}

// A stablecoin off its peg (USDC at 0.97 USD on both sources, outside the
// 0.5 % band): quoted at its market rate by default, refused with 503
// rate_unavailable (nothing created) when configured to refuse.
func TestCreateInvoice_FiatPrice_DepeggedStablecoin_MarketRateOrRefused(t *testing.T) {
	t.Parallel()
	for _, policy := range []pricing.PegPolicy{pricing.PegUseMarket, pricing.PegRefuse} {
		e := newEnvOn(t, newSQLite(t), func(c *invoice.Config) {
			c.Assets = []store.Asset{{Symbol: "USDC", Address: &usdcAddr, Decimals: 6}}
			rates := map[pricing.Pair]store.Decimal{
				{Base: "ETH", Quote: "USD"}: store.MustParseDecimal("2500"), {Base: "USDC", Quote: "USD"}: store.MustParseDecimal("0.97"),
			}
			pegs := pricing.DefaultPegs()
			for i := range pegs {
				pegs[i].Outside = policy
			}
			p, err := pricing.New([]pricing.Source{pricing.NewFixed("a", rates, c.Now), pricing.NewFixed("b", rates, c.Now)},
				pricing.Config{Assets: []string{"ETH", "USDC"}, Currencies: []string{"USD"}, Pegs: pegs, Now: c.Now})
			require.NoError(t, err)
			require.NoError(t, p.Refresh(ctx))
			c.Pricer = p
		})
		m := e.newMerchant()
		res := e.createInvoice(m.APIKey, "k", `{"price":{"amount":"97.00","currency":"USD"},"accept":["USDC"]}`)
		if policy == pricing.PegRefuse {
			requireProblem(t, res, http.StatusServiceUnavailable, "rate_unavailable", "")
			require.Contains(t, res.json(t)["detail"], "off its peg")
			require.Empty(t, invoicesOf(t, e.st, m.ID))
			// The native coin is still quoted.
			e.mustCreateJSON(m.APIKey, "k2", `{"price":{"amount":"97.00","currency":"USD"},"accept":["ETH"]}`)
			continue
		}
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		q := quotesOf(t, res.json(t))[0]
		require.Equal(t, "0.97", q["rate"], "the market rate, not the peg")
		require.Equal(t, false, q["pegged"])
		require.Equal(t, "100000000", q["amount"], "97.00 USD is 100 USDC at 0.97")
	}
}
