package pricing_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/evmpay/evmpay/invoice/pricing"
	"github.com/evmpay/evmpay/store"
)

// warmPricer is a Pricer as payd serve would run it, rates warm: four
// crypto sources (the median of four ETH/USD and USDC/USD observations),
// an ECB-like FX source, pegs on.
func warmPricer(b *testing.B) *pricing.Pricer {
	now := time.Now()
	var sources []pricing.Source
	for i, name := range []string{"coinbase", "kraken", "bitstamp", "chainlink"} {
		s := newScript(name)
		s.set(ethUSD, []string{"2500.12", "2501.5", "2499.87", "2500.5"}[i], now)
		s.set(usdcUSD, []string{"0.9998", "1.0001", "0.9999", "1"}[i], now)
		sources = append(sources, s)
	}
	fx := newScript("ecb")
	fx.obs[eurUSD] = pricing.Rate{Pair: eurUSD, Value: store.MustParseDecimal("1.1225"), At: now, MaxAge: 124 * time.Hour}
	fx.obs[eurJPY] = pricing.Rate{Pair: eurJPY, Value: store.MustParseDecimal("176.99"), At: now, MaxAge: 124 * time.Hour}
	sources = append(sources, fx)
	p, err := pricing.New(sources, pricing.Config{Assets: []string{"ETH", "USDC"}, Currencies: []string{"USD", "EUR", "JPY"}})
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Refresh(context.Background()); err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkQuote is the cost quote creation adds to invoice creation with
// warm rates: one asset, a direct market (ETH in USD), a cross (ETH in
// JPY through USD and the ECB), and the two quotes of an invoice
// accepting ETH and USDC in EUR.
func BenchmarkQuote(b *testing.B) {
	p := warmPricer(b)
	ctx := context.Background()
	expires := time.Now().Add(time.Hour)
	for _, c := range []struct {
		name   string
		price  store.Fiat
		assets []store.Asset
	}{
		{"ETH_in_USD", store.MustParseFiat("49.90", "USD"), []store.Asset{eth}},
		{"ETH_in_JPY_cross", store.MustParseFiat("5000", "JPY"), []store.Asset{eth}},
		{"ETH_and_USDC_in_EUR", store.MustParseFiat("49.90", "EUR"), []store.Asset{eth, usdcA}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Quotes(ctx, c.price, c.assets, expires); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQuote_Parallel is the same with every CPU quoting at once (an
// API replica under load): quotes share the Pricer's read lock.
func BenchmarkQuote_Parallel(b *testing.B) {
	p := warmPricer(b)
	price := store.MustParseFiat("49.90", "EUR")
	expires := time.Now().Add(time.Hour)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := p.Quotes(context.Background(), price, []store.Asset{eth, usdcA}, expires); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkQuote_Percentiles times every quote of an invoice accepting ETH
// and USDC in EUR (the costliest case above) and reports the p50 and p99
// of those times: the bar is on the p50 added to invoice creation.
func BenchmarkQuote_Percentiles(b *testing.B) {
	p := warmPricer(b)
	price := store.MustParseFiat("49.90", "EUR")
	expires := time.Now().Add(time.Hour)
	var took []time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := p.Quotes(context.Background(), price, []store.Asset{eth, usdcA}, expires); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
}
