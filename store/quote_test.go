package store_test

import (
	"encoding/json"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

var usdcAddr = common.HexToAddress("0x00000000000000000000000000000000000000c1")

func usdc() store.Asset {
	a := usdcAddr
	return store.Asset{Symbol: "USDC", Address: &a, Decimals: 6}
}

func quote(t *testing.T, asset store.Asset, price store.Fiat, rate string) store.Quote {
	t.Helper()
	r := store.MustParseDecimal(rate)
	amount, err := store.QuoteAmount(price, r, asset.Decimals)
	require.NoError(t, err)
	return store.Quote{Asset: asset, Amount: amount, Price: price, Rate: r}
}

func TestQuoteAmount_RoundsUpToTheBaseUnit(t *testing.T) {
	t.Parallel()
	eth := store.NativeAsset("ETH")
	// 10.00 USD at 3 USD/ETH is 3.333… ETH: the last wei is rounded up.
	q := quote(t, eth, store.MustParseFiat("10.00", "USD"), "3")
	require.Equal(t, "3333333333333333334", q.Amount.String())
	// An exact division is not rounded.
	q = quote(t, usdc(), store.MustParseFiat("49.90", "EUR"), "0.998")
	require.Equal(t, "50000000", q.Amount.String()) // 49.90 / 0.998 = 50 USDC
	q = quote(t, usdc(), store.MustParseFiat("49.90", "USD"), "1")
	require.Equal(t, "49900000", q.Amount.String())
	// JPY has no minor unit; a 0-decimal asset rounds up to whole units.
	whole := store.Asset{Symbol: "W", Address: &usdcAddr, Decimals: 0}
	q = quote(t, whole, store.MustParseFiat("5000", "JPY"), "3000")
	require.Equal(t, "2", q.Amount.String())
	// KWD: three minor digits.
	q = quote(t, eth, store.MustParseFiat("1.001", "KWD"), "1000")
	require.Equal(t, "1001000000000000", q.Amount.String())
}

func TestQuoteAmount_RefusesZeroRateAndOverflow(t *testing.T) {
	t.Parallel()
	_, err := store.QuoteAmount(store.MustParseFiat("1", "USD"), store.Decimal{}, 18)
	require.Error(t, err)
	_, err = store.QuoteAmount(store.MustParseFiat("1000000000", "USD"), store.MustParseDecimal("0."+"000000000000000000000000000000000000000000000000000000000001"), 18)
	require.ErrorIs(t, err, store.ErrInvalidAmount)
}

func TestQuote_ValueRoundsDownAndTheQuotedAmountIsTheLeastThatPays(t *testing.T) {
	t.Parallel()
	q := quote(t, store.NativeAsset("ETH"), store.MustParseFiat("10.00", "USD"), "3")
	v, err := q.Value(q.Amount)
	require.NoError(t, err)
	require.Equal(t, "10.00", v.Amount()) // 10.0000000000000000002 rounded down
	less, _ := q.Amount.Sub(store.NewAmount(1))
	v, err = q.Value(less)
	require.NoError(t, err)
	require.Equal(t, "9.99", v.Amount()) // 9.9999999999999999999 rounded down
}

// TestQuote_RoundingProperty checks, over many random prices, rates and
// decimals, that the quoted amount values at least the price and one base
// unit less values less: the quote is exactly the least amount that pays.
func TestQuote_RoundingProperty(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	codes := []string{"USD", "JPY", "KWD", "EUR"}
	for i := 0; i < 3000; i++ {
		c, err := store.LookupCurrency(codes[rng.IntN(len(codes))])
		require.NoError(t, err)
		price := store.Fiat{Currency: c, Minor: store.NewAmount(1 + rng.Uint64N(1_000_000_000))}
		rate, err := store.NewDecimal(new(big.Int).SetUint64(1+rng.Uint64N(1<<50)), uint8(rng.IntN(19)))
		require.NoError(t, err)
		asset := store.Asset{Symbol: "T", Address: &usdcAddr, Decimals: uint8(rng.IntN(19))}
		amount, err := store.QuoteAmount(price, rate, asset.Decimals)
		require.NoError(t, err)
		q := store.Quote{Asset: asset, Amount: amount, Price: price, Rate: rate}
		v, err := q.Value(amount)
		require.NoError(t, err)
		require.GreaterOrEqual(t, v.Minor.Cmp(price.Minor), 0, "%s at %s: %s values %s", price, rate, amount, v)
		if less, ok := amount.Sub(store.NewAmount(1)); ok {
			v, err := q.Value(less)
			require.NoError(t, err)
			require.Equal(t, -1, v.Minor.Cmp(price.Minor), "%s at %s: %s − 1 still values %s", price, rate, amount, v)
		}
	}
}

func TestValuePayments_MixedAssetsAddUp(t *testing.T) {
	t.Parallel()
	price := store.MustParseFiat("100.00", "USD")
	qUSDC := quote(t, usdc(), price, "1")
	qETH := quote(t, store.NativeAsset("ETH"), price, "2500")
	require.Equal(t, "40000000000000000", qETH.Amount.String()) // 0.04 ETH
	// 40 USDC and 0.024 ETH (60 USD), the ETH in three payments.
	paid := []store.AssetAmount{
		{Token: &usdcAddr, Amount: store.NewAmount(40_000_000)},
		{Amount: store.MustParseAmount("10000000000000000")},
		{Amount: store.MustParseAmount("10000000000000000")},
		{Token: &common.Address{}, Amount: store.MustParseAmount("4000000000000000")}, // zero address: native
	}
	v, err := store.ValuePayments([]store.Quote{qUSDC, qETH}, paid)
	require.NoError(t, err)
	require.Equal(t, "100.00 USD", v.String())
	s, err := store.Assess(price, v, store.Tolerance{})
	require.NoError(t, err)
	require.True(t, s.Paid)
	require.True(t, s.Shortfall.IsZero())
	require.True(t, s.Excess.IsZero())
}

func TestValuePayments_PartsAreAddedExactlyBeforeRoundingDown(t *testing.T) {
	t.Parallel()
	price := store.MustParseFiat("1.00", "USD")
	q := quote(t, usdc(), price, "1")
	// 0.005 USDC and 0.995 USDC: half a cent and 99.5 cents. Each alone
	// rounds down (0 + 99 cents), together they are exactly 1.00.
	a, b := store.NewAmount(5000), store.NewAmount(995000)
	va, err := q.Value(a)
	require.NoError(t, err)
	vb, err := q.Value(b)
	require.NoError(t, err)
	require.Equal(t, "0.00", va.Amount())
	require.Equal(t, "0.99", vb.Amount())
	v, err := store.ValuePayments([]store.Quote{q}, []store.AssetAmount{{Token: &usdcAddr, Amount: a}, {Token: &usdcAddr, Amount: b}})
	require.NoError(t, err)
	require.Equal(t, "1.00", v.Amount())
}

func TestValuePayments_RefusesUnquotedAssetsAndMixedCurrencies(t *testing.T) {
	t.Parallel()
	q := quote(t, usdc(), store.MustParseFiat("1.00", "USD"), "1")
	_, err := store.ValuePayments([]store.Quote{q}, []store.AssetAmount{{Amount: store.NewAmount(1)}})
	require.ErrorIs(t, err, store.ErrNoQuote)
	other := common.HexToAddress("0x0000000000000000000000000000000000000bad")
	_, err = store.ValuePayments([]store.Quote{q}, []store.AssetAmount{{Token: &other, Amount: store.NewAmount(1)}})
	require.ErrorIs(t, err, store.ErrNoQuote)
	qEUR := quote(t, store.NativeAsset("ETH"), store.MustParseFiat("1.00", "EUR"), "2000")
	_, err = store.ValuePayments([]store.Quote{q, qEUR}, nil)
	require.Error(t, err)
	_, err = store.ValuePayments(nil, nil)
	require.Error(t, err)
	v, err := store.ValuePayments([]store.Quote{q}, nil)
	require.NoError(t, err)
	require.Equal(t, "0.00 USD", v.String())
}

func TestAssess_ToleranceAmountPercentAndTheLargerOfBoth(t *testing.T) {
	t.Parallel()
	price := store.MustParseFiat("100.00", "EUR")
	eur := func(s string) store.Fiat { return store.MustParseFiat(s, "EUR") }
	for _, c := range []struct {
		name     string
		tol      store.Tolerance
		received string
		paid     bool
	}{
		{"none, exact", store.Tolerance{}, "100.00", true},
		{"none, a cent short", store.Tolerance{}, "99.99", false},
		{"amount 0.50, within", store.Tolerance{Amount: eur("0.50")}, "99.50", true},
		{"amount 0.50, beyond", store.Tolerance{Amount: eur("0.50")}, "99.49", false},
		{"1 percent, within", store.Tolerance{Percent: store.MustParseDecimal("1")}, "99.00", true},
		{"1 percent, beyond", store.Tolerance{Percent: store.MustParseDecimal("1")}, "98.99", false},
		{"both: percent larger", store.Tolerance{Amount: eur("0.50"), Percent: store.MustParseDecimal("1")}, "99.00", true},
		{"both: amount larger", store.Tolerance{Amount: eur("2.00"), Percent: store.MustParseDecimal("1")}, "98.00", true},
		{"both: beyond both", store.Tolerance{Amount: eur("2.00"), Percent: store.MustParseDecimal("1")}, "97.99", false},
		{"overpaid", store.Tolerance{}, "100.01", true},
	} {
		s, err := store.Assess(price, eur(c.received), c.tol)
		require.NoError(t, err, c.name)
		require.Equal(t, c.paid, s.Paid, c.name)
	}
	s, err := store.Assess(price, eur("99.60"), store.Tolerance{Amount: eur("0.50")})
	require.NoError(t, err)
	require.True(t, s.Paid)
	require.Equal(t, "0.40 EUR", s.Shortfall.String())
	s, err = store.Assess(price, eur("100.25"), store.Tolerance{})
	require.NoError(t, err)
	require.Equal(t, "0.25 EUR", s.Excess.String())
	require.True(t, s.Shortfall.IsZero())
}

func TestTolerance_PercentRoundsDownAndIsBounded(t *testing.T) {
	t.Parallel()
	// 1 % of 0.99 EUR is 0.0099 EUR: no whole cent of allowance.
	a, err := store.Tolerance{Percent: store.MustParseDecimal("1")}.Allowance(store.MustParseFiat("0.99", "EUR"))
	require.NoError(t, err)
	require.True(t, a.IsZero())
	a, err = store.Tolerance{Percent: store.MustParseDecimal("0.5")}.Allowance(store.MustParseFiat("49.90", "EUR"))
	require.NoError(t, err)
	require.Equal(t, "0.24 EUR", a.String()) // 0.2495 rounded down
	_, err = store.Tolerance{Percent: store.MustParseDecimal("100.01")}.Allowance(store.MustParseFiat("1", "EUR"))
	require.Error(t, err)
	_, err = store.Tolerance{Amount: store.MustParseFiat("1", "USD")}.Allowance(store.MustParseFiat("1", "EUR"))
	require.Error(t, err)
	_, err = store.Assess(store.MustParseFiat("1", "EUR"), store.MustParseFiat("1", "USD"), store.Tolerance{})
	require.Error(t, err)
}

func TestQuote_AmountForTheRemainingValue(t *testing.T) {
	t.Parallel()
	price := store.MustParseFiat("100.00", "USD")
	q := quote(t, store.NativeAsset("ETH"), price, "3000")
	left, err := q.AmountFor(store.MustParseFiat("0.01", "USD"))
	require.NoError(t, err)
	require.Equal(t, "3333333333334", left.String()) // 0.01/3000 ETH, rounded up
	_, err = q.AmountFor(store.MustParseFiat("0.01", "EUR"))
	require.Error(t, err)
}

func TestQuote_JSONRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	q := quote(t, usdc(), store.MustParseFiat("49.90", "EUR"), "0.92")
	q.Pegged = true
	q.Sources = []store.QuoteSource{{Name: "kraken", Pair: "USDC/USD", Rate: store.MustParseDecimal("0.9998"), At: at}}
	q.CreatedAt, q.ExpiresAt = at, at.Add(15*time.Minute)
	b, err := json.Marshal(q)
	require.NoError(t, err)
	require.JSONEq(t, `{
		"asset": {"symbol": "USDC", "address": "0x00000000000000000000000000000000000000C1", "decimals": 6},
		"amount": "54239131",
		"price": {"amount": "49.90", "currency": "EUR"},
		"rate": "0.92",
		"pegged": true,
		"sources": [{"name": "kraken", "pair": "USDC/USD", "rate": "0.9998", "at": "2026-11-26T12:00:00Z"}],
		"created_at": "2026-11-26T12:00:00Z",
		"expires_at": "2026-11-26T12:15:00Z"
	}`, string(b))
	var back store.Quote
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, q, back)
}

// BenchmarkLedgerEntryValue_FiatInvoice is what valuing one ledger entry of
// a fiat invoice costs when the ledger is read: its invoice's pricing
// decoded from the column (two quotes, three sources each, as payd stores
// them) and the entry's amount valued at its quote.
func BenchmarkLedgerEntryValue_FiatInvoice(b *testing.B) {
	price := store.MustParseFiat("49.90", "EUR")
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	var qs []store.Quote
	for _, a := range []struct {
		asset store.Asset
		rate  string
	}{{usdc(), "0.8"}, {store.NativeAsset("ETH"), "2000"}} {
		r := store.MustParseDecimal(a.rate)
		amount, err := store.QuoteAmount(price, r, a.asset.Decimals)
		if err != nil {
			b.Fatal(err)
		}
		q := store.Quote{Asset: a.asset, Amount: amount, Price: price, Rate: r, ExpiresAt: at}
		for _, n := range []string{"coinbase", "kraken", "bitstamp"} {
			q.Sources = append(q.Sources, store.QuoteSource{Name: n, Pair: a.asset.Symbol + "/USD", Rate: r, At: at})
		}
		qs = append(qs, q)
	}
	col, err := store.Pricing{Price: price, Tolerance: store.Tolerance{Amount: store.Fiat{Currency: price.Currency}}, Quotes: qs}.Value()
	if err != nil {
		b.Fatal(err)
	}
	raw := []byte(col.(string))
	b.ReportAllocs()
	for b.Loop() {
		e := store.LedgerEntry{Amount: store.NewAmount(12_475_000_000_000_000), InvoicePricing: new(store.Pricing)}
		if err := e.InvoicePricing.Scan(raw); err != nil {
			b.Fatal(err)
		}
		if _, _, ok := e.Value(); !ok {
			b.Fatal("not valued")
		}
	}
	b.ReportMetric(float64(len(raw)), "column-bytes")
}

// A ledger entry of a fiat invoice quoting one token address on two
// chains (at different rates) is valued at the quote of the entry's chain;
// a legacy quote without a chain is the invoice's.
func TestLedgerEntry_Value_TheQuoteOfTheEntrysChain(t *testing.T) {
	price := store.MustParseFiat("10.00", "EUR")
	quote := func(chain uint64, rate string) store.Quote {
		r := store.MustParseDecimal(rate)
		amount, err := store.QuoteAmount(price, r, 6)
		require.NoError(t, err)
		return store.Quote{ChainID: chain, Asset: usdc(), Amount: amount, Price: price, Rate: r}
	}
	p := &store.Pricing{Price: price, Quotes: []store.Quote{quote(0, "0.8"), quote(9000, "1")}}
	value := func(chain, invoiceChain uint64) string {
		e := store.LedgerEntry{ChainID: chain, Amount: store.NewAmount(5_000_000), Token: usdc().Token(), InvoicePricing: p, InvoiceChainID: invoiceChain}
		cur, minor, ok := e.Value()
		require.True(t, ok, "chain %d", chain)
		return minor.String() + " " + cur
	}
	require.Equal(t, "400 EUR", value(1337, 1337), "5 USDC at 0.8 on the invoice's chain")
	require.Equal(t, "500 EUR", value(9000, 1337), "5 USDC at 1 on chain 9000")
	e := store.LedgerEntry{ChainID: 5, Amount: store.NewAmount(1), Token: usdc().Token(), InvoicePricing: p, InvoiceChainID: 1337}
	_, _, ok := e.Value()
	require.False(t, ok, "no quote on chain 5")
}
