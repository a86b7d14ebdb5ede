package settlement

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice/pricing"
	"github.com/evmpay/evmpay/store"
)

// These tests pay invoices priced in a fiat currency with real native
// transfers and ERC-20 transfers on the simulated chain, indexed by the
// real indexer into PostgreSQL.

// fiatInvoice creates a PENDING invoice priced at price (EUR), quoted in
// USDC at 0.80 EUR and ETH at 2,000 EUR (the dev rates), USDC first, with
// tolerance tol.
func (e *tokenEnv) fiatInvoice(price string, tol store.Tolerance) store.Invoice {
	e.t.Helper()
	p := store.MustParseFiat(price, "EUR")
	if tol.Amount.Currency.Code == "" {
		tol.Amount.Currency = p.Currency
	}
	quote := func(a store.Asset, rate string) store.Quote {
		r := store.MustParseDecimal(rate)
		amount, err := store.QuoteAmount(p, r, a.Decimals)
		require.NoError(e.t, err)
		return store.Quote{Asset: a, Amount: amount, Price: p, Rate: r, CreatedAt: e.clock.Now(),
			ExpiresAt: e.clock.Now().Add(15 * time.Minute)}
	}
	pr := &store.Pricing{Price: p, Tolerance: tol,
		Quotes: []store.Quote{quote(assetOf(e.usdc), "0.8"), quote(store.NativeAsset("ETH"), "2000")}}
	require.NoError(e.t, pr.Validate())
	return e.invoice(pr.Quotes[0].Amount, func(inv *store.Invoice) {
		inv.SetAsset(pr.Quotes[0].Asset)
		inv.Pricing = pr
	})
}

// eventPayments returns the payments (with their values) the invoice's
// newest event of type typ lists, and its paid_value.
func (e *tokenEnv) eventPayments(id int64, typ string) (values []string, paidValue string) {
	e.t.Helper()
	evs, err := e.st.ListEventsByInvoice(ctx, id)
	require.NoError(e.t, err)
	for _, ev := range evs {
		if ev.Type != typ {
			continue
		}
		var data struct {
			PaidValue store.Fiat `json:"paid_value"`
			Price     store.Fiat `json:"price"`
			Payments  []struct {
				Value *store.Fiat `json:"value"`
			} `json:"payments"`
		}
		require.NoError(e.t, json.Unmarshal(ev.Data, &data))
		require.Equal(e.t, "EUR", data.Price.Currency.Code, "events carry the price")
		values = values[:0]
		for _, p := range data.Payments {
			v := "none"
			if p.Value != nil {
				v = p.Value.String()
			}
			values = append(values, v)
		}
		paidValue = data.PaidValue.String()
	}
	return values, paidValue
}

func paidValue(inv store.Invoice) string {
	v, _ := inv.PaidFiat()
	return v.String()
}

func TestFiat_NativeOrTokenPaymentOfItsQuote_PaidConfirmedSweepLedByWhatArrived(t *testing.T) {
	e := newTokenEnv(t)
	native := e.fiatInvoice("49.90", store.Tolerance{})
	token := e.fiatInvoice("49.90", store.Tolerance{})
	require.Equal(t, "62375000", token.Pricing.Quotes[0].Amount.String())
	require.Equal(t, "24950000000000000", token.Pricing.Quotes[1].Amount.String())
	s := e.settler()
	n := e.c.nonce()
	e.c.send(n, &native.DepositAddress, store.MustParseAmount("24950000000000000"), 1)
	e.transferAt(n+1, e.usdc, token.DepositAddress, "62375000")
	e.c.commit(1)
	e.mustSettle(s)

	for _, tc := range []struct {
		inv     store.Invoice
		paidWei string
	}{{native, "0"}, {token, "62375000"}} {
		got := e.get(tc.inv.ID)
		require.Equal(t, store.StatusPaid, got.Status)
		require.Equal(t, "49.90 EUR", paidValue(got))
		require.Equal(t, tc.paidWei, got.PaidWei.String(), "paid_wei counts the invoice's own asset (its first quote) only")
		require.False(t, got.Underpaid || got.Overpaid || got.NeedsAttention)
		ps := e.payments(tc.inv.ID)
		require.Len(t, ps, 1)
		require.False(t, ps[0].WrongAsset, "every quoted asset counts")
		values, pv := e.eventPayments(tc.inv.ID, store.EventInvoicePaid)
		require.Equal(t, []string{"49.90 EUR"}, values)
		require.Equal(t, "49.90 EUR", pv)
	}
	e.c.commit(12)
	e.mustSettle(s)
	got := e.get(native.ID)
	require.Equal(t, store.StatusConfirmed, got.Status)
	require.True(t, got.SweepAsset.IsNative(), "the sweep moves what arrived")
	got = e.get(token.ID)
	require.Equal(t, store.StatusConfirmed, got.Status)
	require.Equal(t, e.usdc.Address, *got.SweepAsset.Address)
}

func TestFiat_MixedPayments_AddUpAtTheirOwnQuotes(t *testing.T) {
	e := newTokenEnv(t)
	inv := e.fiatInvoice("49.90", store.Tolerance{})
	s := e.settler()
	// 30 USDC is 24.00 EUR: 25.90 EUR remain, 0.01295 ETH.
	e.transfer(e.usdc, inv.DepositAddress, "30000000")
	e.c.commit(1)
	e.mustSettle(s)
	got := e.get(inv.ID)
	require.Equal(t, store.StatusPending, got.Status)
	require.True(t, got.Underpaid)
	require.Equal(t, "24.00 EUR", paidValue(got))
	rest, err := got.Pricing.Quotes[1].AmountFor(store.MustParseFiat("25.90", "EUR"))
	require.NoError(t, err)
	require.Equal(t, "12950000000000000", rest.String())

	e.c.send(e.c.nonce(), &inv.DepositAddress, rest, 1)
	e.c.commit(1)
	e.mustSettle(s)
	got = e.get(inv.ID)
	require.Equal(t, store.StatusPaid, got.Status)
	require.Equal(t, "49.90 EUR", paidValue(got))
	require.False(t, got.Underpaid || got.Overpaid)
	require.Equal(t, []string{store.EventInvoiceUnderpaid, store.EventInvoicePaid}, e.events(inv.ID))
	values, _ := e.eventPayments(inv.ID, store.EventInvoicePaid)
	require.Equal(t, []string{"24.00 EUR", "25.90 EUR"}, values, "each payment's value")

	e.c.commit(12)
	e.mustSettle(s)
	got = e.get(inv.ID)
	require.Equal(t, store.StatusConfirmed, got.Status)
	require.True(t, got.SweepAsset.IsNative(), "the native coin leads when some arrived; the token follows")
}

func TestFiat_Tolerance_PaidWithinItStillFlaggedUnderpaid(t *testing.T) {
	e := newTokenEnv(t)
	tol := store.Tolerance{Amount: store.MustParseFiat("0.50", "EUR")}
	within := e.fiatInvoice("49.90", tol)
	beyond := e.fiatInvoice("49.90", tol)
	byPercent := e.fiatInvoice("100", store.Tolerance{Percent: store.MustParseDecimal("1")})
	s := e.settler()
	n := e.c.nonce()
	// 61.75 USDC is 49.40 EUR (0.50 short); 61.7375 is 49.39.
	e.transferAt(n, e.usdc, within.DepositAddress, "61750000")
	e.transferAt(n+1, e.usdc, beyond.DepositAddress, "61737500")
	// 1% of 100 EUR: 99.00 EUR pays (123.75 USDC).
	e.transferAt(n+2, e.usdc, byPercent.DepositAddress, "123750000")
	e.c.commit(1)
	e.mustSettle(s)
	got := e.get(within.ID)
	require.Equal(t, store.StatusPaid, got.Status, "within the merchant's tolerance")
	require.True(t, got.Underpaid, "but short of the price")
	require.Equal(t, "49.40 EUR", paidValue(got))
	got = e.get(beyond.ID)
	require.Equal(t, store.StatusPending, got.Status)
	require.True(t, got.Underpaid)
	require.Equal(t, "49.39 EUR", paidValue(got))
	require.Equal(t, store.StatusPaid, e.get(byPercent.ID).Status)
}

func TestFiat_UnquotedAssetIsAWrongAsset(t *testing.T) {
	e := newTokenEnv(t)
	inv := e.fiatInvoice("10", store.Tolerance{})
	s := e.settler()
	e.transfer(e.dai, inv.DepositAddress, "10000000000000000000")
	e.c.commit(1)
	e.mustSettle(s)
	got := e.get(inv.ID)
	require.Equal(t, store.StatusPending, got.Status)
	require.True(t, got.NeedsAttention)
	require.Nil(t, got.PaidValue, "never counted")
	require.True(t, e.payments(inv.ID)[0].WrongAsset)
	require.Equal(t, []string{store.EventInvoiceWrongAsset}, e.events(inv.ID))
}

// Beyond the late window the invoice is flagged with both valuations: the
// locked quote's and today's rate's (a real Pricer over a fixed source at
// 2,400 EUR per ETH).
func TestFiat_PaymentBeyondTheLateWindow_FlaggedWithLockedAndCurrentValue(t *testing.T) {
	e := newTokenEnv(t)
	within := e.fiatInvoice("49.90", store.Tolerance{})
	beyond := e.fiatInvoice("49.90", store.Tolerance{})
	rates := map[pricing.Pair]store.Decimal{
		{Base: "ETH", Quote: "EUR"}: store.MustParseDecimal("2400"),
		{Base: "EUR", Quote: "USD"}: store.MustParseDecimal("1.25"),
	}
	p, err := pricing.New([]pricing.Source{pricing.NewFixed("now", rates, e.clock.Now)},
		pricing.Config{Assets: []string{"ETH"}, Currencies: []string{"EUR"}, MinSources: 1, Now: e.clock.Now})
	require.NoError(t, err)
	s := e.settler(func(c *Config) { c.Valuer = p; c.LateWindow = time.Hour })

	e.clock.Advance(16 * time.Minute)
	e.mustSettle(s)
	require.Equal(t, store.StatusExpired, e.get(within.ID).Status)
	e.c.send(e.c.nonce(), &within.DepositAddress, store.MustParseAmount("24950000000000000"), 1)
	e.c.commit(1)
	e.mustSettle(s)
	got := e.get(within.ID)
	require.Equal(t, store.StatusPaid, got.Status, "within the late window: the locked quote")
	require.True(t, got.PaidLate)
	require.Nil(t, got.LateValuation)

	e.clock.Advance(2 * time.Hour)
	require.NoError(t, p.Refresh(ctx))
	e.c.send(e.c.nonce(), &beyond.DepositAddress, store.MustParseAmount("24950000000000000"), 1)
	e.c.commit(1)
	e.mustSettle(s)
	got = e.get(beyond.ID)
	require.Equal(t, store.StatusExpired, got.Status, "the merchant decides")
	require.True(t, got.NeedsAttention)
	require.Equal(t, "49.90 EUR", paidValue(got))
	require.NotNil(t, got.LateValuation)
	require.Equal(t, "49.90 EUR", got.LateValuation.Locked.String())
	require.NotNil(t, got.LateValuation.Current)
	require.Equal(t, "59.88 EUR", got.LateValuation.Current.String(), "0.02495 ETH at 2,400 EUR")
	require.Equal(t, []string{store.EventInvoiceExpired, store.EventInvoiceLatePayment}, e.events(beyond.ID))
	evs, err := e.st.ListEventsByInvoice(ctx, beyond.ID)
	require.NoError(t, err)
	var data map[string]any
	require.NoError(t, json.Unmarshal(evs[len(evs)-1].Data, &data))
	require.Equal(t, map[string]any{"locked": map[string]any{"amount": "49.90", "currency": "EUR"},
		"current": map[string]any{"amount": "59.88", "currency": "EUR"}, "at": data["late_valuation"].(map[string]any)["at"]},
		data["late_valuation"], "the event carries both valuations")
}

func TestFiat_PaymentReorgedOut_ValueAndSweepLeadReverted(t *testing.T) {
	e := newTokenEnv(t)
	inv := e.fiatInvoice("8", store.Tolerance{})
	e.paidThenReorgedOut(inv, "10000000")
	got := e.get(inv.ID)
	require.Equal(t, store.StatusPending, got.Status)
	require.Nil(t, got.PaidValue)
	require.Equal(t, "0.00 EUR", paidValue(got))
	require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceReverted}, e.events(inv.ID))
}

// The rules as pure functions: the sweep's lead asset, and a valuation
// that fails counts nothing and flags the invoice (never paid on an error).
func TestFiatRules_SweepLeadAndAFailedValuation(t *testing.T) {
	t.Parallel()
	tok := randAddr()
	usdc := store.Asset{Symbol: "USDC", Address: &tok, Decimals: 6}
	price := store.MustParseFiat("10", "EUR")
	inv := store.Invoice{Status: store.StatusPending, Pricing: &store.Pricing{Price: price, Quotes: []store.Quote{
		{Asset: usdc, Price: price, Rate: store.MustParseDecimal("1"), Amount: store.NewAmount(10_000_000)},
		{Asset: store.NativeAsset("ETH"), Price: price, Rate: store.MustParseDecimal("2000"), Amount: store.MustParseAmount("5000000000000000")},
	}}}
	inv.SetAsset(usdc)
	token := store.Payment{Token: &tok, AmountWei: store.NewAmount(1)}
	native := store.Payment{AmountWei: store.NewAmount(1)}
	require.Nil(t, sweepLead(inv, nil))
	require.Equal(t, tok, *sweepLead(inv, []store.Payment{token}).Address)
	require.True(t, sweepLead(inv, []store.Payment{token, native}).IsNative(), "the native coin leads when some arrived")

	bad := inv
	bad.Pricing = &store.Pricing{Price: price, Quotes: []store.Quote{inv.Pricing.Quotes[0],
		{Asset: store.NativeAsset("ETH"), Price: store.MustParseFiat("10", "USD"), Rate: store.MustParseDecimal("2000")}}}
	next, event := applyPayments(bad, []store.Payment{{Token: &tok, AmountWei: store.NewAmount(20_000_000)}}, t0, time.Hour)
	require.Equal(t, store.StatusPending, next.Status, "never paid on a valuation error")
	require.True(t, next.NeedsAttention)
	require.Equal(t, store.EventInvoiceUnderpaid, event)
}
