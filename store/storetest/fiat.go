package storetest

import (
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func fiatTests() []test {
	return []test{
		{"Fiat_InvoicePricingRoundTrips", testFiatInvoiceRoundTrip},
		{"Fiat_CreateInvoices_KeepEachPricing", testFiatCreateInvoices},
		{"Fiat_UpdateInvoiceStates_WritesValueLateValuationAndSweepAsset", testFiatUpdateStates},
		{"Fiat_Archive_KeepsAnExpiredInvoicePaidInAnotherQuotedAsset", testFiatArchive},
		{"Fiat_MerchantToleranceRoundTrips", testMerchantTolerance},
	}
}

var fiatToken = common.HexToAddress("0x00000000000000000000000000000000000000c1")

// fiatPricing is a price of 49.90 EUR quoted in a token and the native
// coin, with the sources and times every quote carries.
func fiatPricing() *store.Pricing {
	price := store.MustParseFiat("49.90", "EUR")
	tok := fiatToken
	usdc := store.Asset{Symbol: "USDC", Address: &tok, Decimals: 6}
	at := now().Add(-3 * time.Second)
	return &store.Pricing{
		Price:     price,
		Tolerance: store.Tolerance{Amount: store.MustParseFiat("0.50", "EUR"), Percent: store.MustParseDecimal("1.5")},
		Quotes: []store.Quote{
			{Asset: usdc, Amount: store.NewAmount(62_375_000), Price: price, Rate: store.MustParseDecimal("0.8"), Pegged: true,
				Sources:   []store.QuoteSource{{Name: "coinbase", Pair: "USDC/USD", Rate: store.MustParseDecimal("1.0001"), At: at}},
				CreatedAt: now(), ExpiresAt: now().Add(15 * time.Minute),
				PaymentURI: "ethereum:0x00000000000000000000000000000000000000C1@1337/transfer?address=0x1&uint256=62375000"},
			{Asset: store.NativeAsset("ETH"), Amount: store.MustParseAmount("24950000000000000"), Price: price,
				Rate: store.MustParseDecimal("2000"), Stale: true,
				Sources: []store.QuoteSource{{Name: "kraken", Pair: "ETH/USD", Rate: store.MustParseDecimal("2500"), At: at},
					{Name: "ecb", Pair: "EUR/USD", Rate: store.MustParseDecimal("1.25"), At: at.Add(-time.Hour)}},
				CreatedAt: now(), ExpiresAt: now().Add(15 * time.Minute), PaymentURI: "ethereum:0x1@1337?value=24950000000000000"},
		},
	}
}

func fiatInvoice(p *store.Pricing) func(*store.Invoice) {
	return func(inv *store.Invoice) {
		inv.Pricing = p
		inv.SetAsset(p.Quotes[0].Asset)
		inv.AmountWei = p.Quotes[0].Amount
	}
}

// requirePricing compares two pricings through their stored form (times
// compared as instants).
func requirePricing(t *testing.T, want, got *store.Pricing) {
	t.Helper()
	require.NotNil(t, got)
	require.NoError(t, got.Validate())
	require.Equal(t, want.Price, got.Price)
	require.Equal(t, want.Tolerance, got.Tolerance)
	require.Len(t, got.Quotes, len(want.Quotes))
	for i, q := range want.Quotes {
		g := got.Quotes[i]
		require.True(t, q.Asset.Same(g.Asset))
		require.Equal(t, q.Asset.Symbol, g.Asset.Symbol)
		require.Equal(t, q.Asset.Decimals, g.Asset.Decimals)
		require.Equal(t, q.Amount, g.Amount)
		require.Equal(t, q.Rate, g.Rate)
		require.Equal(t, q.Pegged, g.Pegged)
		require.Equal(t, q.Stale, g.Stale)
		require.Equal(t, q.PaymentURI, g.PaymentURI)
		requireTime(t, q.CreatedAt, g.CreatedAt)
		requireTime(t, q.ExpiresAt, g.ExpiresAt)
		require.Len(t, g.Sources, len(q.Sources))
		for j, s := range q.Sources {
			require.Equal(t, s.Name, g.Sources[j].Name)
			require.Equal(t, s.Pair, g.Sources[j].Pair)
			require.Equal(t, s.Rate, g.Sources[j].Rate)
			requireTime(t, s.At, g.Sources[j].At)
		}
	}
}

func testFiatInvoiceRoundTrip(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	p := fiatPricing()
	inv := newInvoice(t, st, m.ID, fiatInvoice(p))
	plain := newInvoice(t, st, m.ID)

	got, err := st.GetInvoice(ctx, inv.ID)
	require.NoError(t, err)
	requirePricing(t, p, got.Pricing)
	require.True(t, got.IsFiat())
	require.Nil(t, got.PaidValue)
	require.Nil(t, got.LateValuation)
	require.Nil(t, got.SweepAsset)
	require.True(t, got.Accepts(nil), "the native coin is quoted")
	tok := fiatToken
	require.True(t, got.Accepts(&tok))
	other := randAddr()
	require.False(t, got.Accepts(&other))
	paid, ok := got.PaidFiat()
	require.True(t, ok)
	require.Equal(t, "0.00 EUR", paid.String())

	again, err := st.GetInvoice(ctx, plain.ID)
	require.NoError(t, err)
	require.Nil(t, again.Pricing, "an invoice priced in its asset has no pricing")
	require.False(t, again.IsFiat())

	// UpdateInvoice writes the fields settlement and sweep own; the
	// pricing, fixed at creation, stays.
	v := store.NewAmount(4990)
	eth := store.NativeAsset("ETH")
	got.PaidValue, got.SweepAsset, got.Status = &v, &eth, store.StatusPaid
	got.Pricing = nil
	require.NoError(t, st.UpdateInvoice(ctx, &got))
	again, err = st.GetInvoice(ctx, inv.ID)
	require.NoError(t, err)
	requirePricing(t, p, again.Pricing)
	require.Equal(t, "4990", again.PaidValue.String())
	require.NotNil(t, again.SweepAsset)
	require.True(t, again.SweepAsset.IsNative())
	require.Equal(t, "ETH", again.SweepAsset.Symbol)
	paid, _ = again.PaidFiat()
	require.Equal(t, "49.90 EUR", paid.String())
}

func testFiatCreateInvoices(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	first, err := st.ReserveDerivationIndexes(ctx, 3)
	require.NoError(t, err)
	p1, p2 := fiatPricing(), fiatPricing()
	p2.Price = store.MustParseFiat("10", "USD")
	for i := range p2.Quotes {
		p2.Quotes[i].Price = p2.Price
	}
	p2.Tolerance = store.Tolerance{Amount: store.Fiat{Currency: p2.Price.Currency}}
	var invs []*store.Invoice
	for i, p := range []*store.Pricing{p1, nil, p2} {
		inv := &store.Invoice{MerchantID: m.ID, Status: store.StatusPending, AmountWei: store.NewAmount(1), ChainID: 1337,
			DepositAddress: randAddr(), DerivationIndex: first + uint32(i), LookupTokenHash: randBytes(32),
			ExpiresAt: now().Add(time.Hour), CreatedAt: now(), UpdatedAt: now(), SweepStatus: store.SweepNone}
		if p != nil {
			fiatInvoice(p)(inv)
		}
		invs = append(invs, inv)
	}
	require.NoError(t, st.CreateInvoices(ctx, invs))
	for i, p := range []*store.Pricing{p1, nil, p2} {
		got, err := st.GetInvoice(ctx, invs[i].ID)
		require.NoError(t, err)
		if p == nil {
			require.Nil(t, got.Pricing)
			continue
		}
		requirePricing(t, p, got.Pricing)
	}
}

func testFiatUpdateStates(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID, fiatInvoice(fiatPricing()))
	plain := newInvoice(t, st, m.ID)
	v := store.NewAmount(5012)
	cur := store.MustParseFiat("61.20", "EUR")
	late := store.LateValuation{Locked: store.MustParseFiat("50.12", "EUR"), Current: &cur, At: now().Add(time.Hour)}
	tok := fiatToken
	usdc := store.Asset{Symbol: "USDC", Address: &tok, Decimals: 6}
	inv.Status, inv.PaidValue, inv.LateValuation, inv.SweepAsset = store.StatusExpired, &v, &late, &usdc
	inv.NeedsAttention, inv.UpdatedAt = true, now().Add(time.Hour)
	plain.Status = store.StatusPaid
	require.NoError(t, st.InTx(ctx, func(tx store.Tx) error {
		return tx.UpdateInvoiceStates(ctx, []*store.Invoice{&inv, &plain})
	}))
	got, err := st.GetInvoice(ctx, inv.ID)
	require.NoError(t, err)
	require.Equal(t, "5012", got.PaidValue.String())
	require.NotNil(t, got.LateValuation)
	require.Equal(t, late.Locked, got.LateValuation.Locked)
	require.Equal(t, cur, *got.LateValuation.Current)
	requireTime(t, late.At, got.LateValuation.At)
	require.NotNil(t, got.SweepAsset)
	require.Equal(t, tok, *got.SweepAsset.Address)
	require.EqualValues(t, 6, got.SweepAsset.Decimals)
	require.True(t, got.NeedsAttention)
	again, err := st.GetInvoice(ctx, plain.ID)
	require.NoError(t, err)
	require.Nil(t, again.PaidValue)
	require.Nil(t, again.LateValuation)
	require.Nil(t, again.SweepAsset)

	// Cleared again (a reorg takes the payments away).
	got.PaidValue, got.LateValuation, got.SweepAsset = nil, nil, nil
	require.NoError(t, st.InTx(ctx, func(tx store.Tx) error { return tx.UpdateInvoiceStates(ctx, []*store.Invoice{&got}) }))
	got, err = st.GetInvoice(ctx, inv.ID)
	require.NoError(t, err)
	require.Nil(t, got.PaidValue)
	require.Nil(t, got.LateValuation)
	require.Nil(t, got.SweepAsset)
}

// An expired fiat invoice paid (short) in another quoted asset than its
// first has paid_wei 0 but holds money: it is underpaid, and stays.
func testFiatArchive(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	old := now().AddDate(-2, 0, 0)
	v := store.NewAmount(100)
	short := newInvoice(t, st, m.ID, fiatInvoice(fiatPricing()), func(i *store.Invoice) {
		i.CreatedAt, i.Status, i.Underpaid, i.PaidValue = old, store.StatusExpired, true, &v
	})
	unpaid := newInvoice(t, st, m.ID, fiatInvoice(fiatPricing()), func(i *store.Invoice) {
		i.CreatedAt, i.Status = old, store.StatusExpired
	})
	moved, err := st.ArchiveInvoices(ctx, now().AddDate(-1, 0, 0), 100)
	require.NoError(t, err)
	require.Equal(t, 1, moved)
	_, err = st.GetInvoice(ctx, unpaid.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.GetInvoice(ctx, short.ID)
	require.NoError(t, err, "an expired invoice holding money stays")
}

func testMerchantTolerance(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	got, err := st.GetMerchant(ctx, m.ID)
	require.NoError(t, err)
	require.True(t, got.Tolerance.IsZero(), "default: nothing forgiven")
	got.Tolerance = store.MerchantTolerance{Percent: store.MustParseDecimal("0.5"),
		Amounts: []store.Fiat{store.MustParseFiat("0.50", "EUR"), store.MustParseFiat("100", "JPY")}}
	require.NoError(t, st.UpdateMerchant(ctx, got))
	again, err := st.GetMerchant(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, got.Tolerance, again.Tolerance)
	eur, err := store.LookupCurrency("EUR")
	require.NoError(t, err)
	require.Equal(t, store.Tolerance{Amount: store.MustParseFiat("0.50", "EUR"), Percent: store.MustParseDecimal("0.5")},
		again.Tolerance.For(eur))
	usd, _ := store.LookupCurrency("USD")
	require.Equal(t, store.Tolerance{Amount: store.Fiat{Currency: usd}, Percent: store.MustParseDecimal("0.5")},
		again.Tolerance.For(usd), "a currency without an amount gets the percentage only")

	again.Tolerance = store.MerchantTolerance{}
	require.NoError(t, st.UpdateMerchant(ctx, again))
	byDigest, err := st.GetMerchantByAPIKeyDigest(ctx, m.APIKeyDigest)
	require.NoError(t, err)
	require.True(t, byDigest.Tolerance.IsZero())

	created := store.Merchant{Name: "with tolerance", APIKeyDigest: randBytes(32), APIKeyHash: "h", APIKeyPrefix: "p",
		WebhookSecretCiphertext: randBytes(8), SettlementAddress: randAddr(), CreatedAt: now(), UpdatedAt: now(),
		Tolerance: store.MerchantTolerance{Percent: store.MustParseDecimal("2")}}
	require.NoError(t, st.CreateMerchant(ctx, &created))
	list, err := st.ListMerchants(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "2", list[1].Tolerance.Percent.String())
}
