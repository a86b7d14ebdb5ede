package pricing_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice/pricing"
	"github.com/evmpay/evmpay/store"
)

var (
	usdcAsset = store.Asset{Symbol: "USDC", Address: &common.Address{1}, Decimals: 6}
	ethAsset  = store.NativeAsset("ETH")
)

// Two exchanges and no FX source: ETH/EUR is a market of its own, but a
// USD stablecoin has no route to EUR (it is quoted at its USD peg, and
// nothing quotes USD in EUR): every EUR invoice accepting it would answer
// rate_unavailable forever. CheckRoutes says so before any rate is read.
func TestCheckRoutes_NoFXSource_StablecoinHasNoRouteToEUR(t *testing.T) {
	t.Parallel()
	coinbase, err := pricing.NewCoinbase(pricing.ExchangeConfig{})
	require.NoError(t, err)
	kraken, err := pricing.NewKraken(pricing.ExchangeConfig{})
	require.NoError(t, err)
	p, err := pricing.New([]pricing.Source{coinbase, kraken}, pricing.Config{Assets: []string{"ETH", "USDC"}})
	require.NoError(t, err)
	err = p.CheckRoutes()
	var re *pricing.RouteError
	require.ErrorAs(t, err, &re)
	require.Equal(t, []pricing.Unpriced{{Asset: "USDC", Currency: "EUR", Peg: "USD", Lacking: []pricing.Shortfall{
		{Pair: pricing.Pair{Base: "USD", Quote: "EUR"}, EitherWay: true, Need: 1, Setting: "FXMinSources"},
	}}}, re.Unpriced)
	require.EqualError(t, err, "pricing: USDC can never be priced in EUR with these sources (it is pegged to USD): "+
		"USD/EUR or EUR/USD is quoted by no source, and FXMinSources is 1")

	ecb, err := pricing.NewECB(pricing.ECBConfig{})
	require.NoError(t, err)
	p, err = pricing.New([]pricing.Source{coinbase, kraken, ecb}, pricing.Config{Assets: []string{"ETH", "USDC"}})
	require.NoError(t, err)
	require.NoError(t, p.CheckRoutes(), "the ECB quotes EUR/USD")
}

// A route whose pair fewer sources quote than MinSources needs is no
// route: the error names the pair, who quotes it and the setting.
func TestCheckRoutes_FewerSourcesThanMinSources(t *testing.T) {
	t.Parallel()
	coinbase, err := pricing.NewCoinbase(pricing.ExchangeConfig{})
	require.NoError(t, err)
	feed := pricing.NewFixed("feeds", map[pricing.Pair]store.Decimal{ethUSD: store.MustParseDecimal("2500")}, nil)
	p, err := pricing.New([]pricing.Source{coinbase, feed}, pricing.Config{Assets: []string{"ETH", "USDC"}, Currencies: []string{"USD"}})
	require.NoError(t, err)
	err = p.CheckRoutes()
	require.EqualError(t, err, "pricing: USDC can never be priced in USD with these sources (it is pegged to USD): "+
		"USDC/USD is quoted by only coinbase, and MinSources is 2")

	p, err = pricing.New([]pricing.Source{coinbase, feed}, pricing.Config{Assets: []string{"ETH", "USDC"}, Currencies: []string{"USD"}, MinSources: 1})
	require.NoError(t, err)
	require.NoError(t, p.CheckRoutes(), "one source is enough when MinSources is 1")
}

// An embedder's Source that cannot say what it quotes is counted as
// quoting everything: CheckRoutes never refuses what it cannot know.
func TestCheckRoutes_SourceWithoutPairQuoter_CountsAsQuotingEverything(t *testing.T) {
	t.Parallel()
	p, err := pricing.New([]pricing.Source{newScript("a"), newScript("b")}, pricing.Config{Assets: []string{"ETH", "USDC"}, Currencies: []string{"JPY"}})
	require.NoError(t, err)
	require.NoError(t, p.CheckRoutes())
}

// payd dev's offline table prices every dev asset in every dev currency.
func TestCheckRoutes_DevTable(t *testing.T) {
	t.Parallel()
	p, err := pricing.New([]pricing.Source{pricing.Dev()}, pricing.Config{Assets: []string{"ETH", "USDC"},
		Currencies: []string{"USD", "EUR", "GBP", "CHF", "JPY"}, MinSources: 1})
	require.NoError(t, err)
	require.NoError(t, p.CheckRoutes())
}

// CheckRoutes walks the routes Quote takes: over many random sets of
// pairs the sources quote (every one answering, consistent rates), an
// asset and currency it calls unpriced fail to quote, and the others
// quote.
func TestCheckRoutes_AgreesWithQuote(t *testing.T) {
	t.Parallel()
	// Consistent rates: USD per unit of each symbol.
	usd := map[string]float64{"ETH": 2500, "USDC": 1, "USD": 1, "EUR": 1.25, "GBP": 1.5, "JPY": 0.008}
	symbols := []string{"ETH", "USDC", "USD", "EUR", "GBP", "JPY"}
	var universe []pricing.Pair
	for _, b := range symbols {
		for _, q := range []string{"USD", "EUR", "GBP", "JPY"} {
			if b != q {
				universe = append(universe, pricing.Pair{Base: b, Quote: q})
			}
		}
	}
	rate := func(p pricing.Pair) store.Decimal {
		return store.MustParseDecimal(fmt.Sprintf("%.12f", usd[p.Base]/usd[p.Quote]))
	}
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(25, 32))
	priced, unpriced := 0, 0
	for round := range 300 {
		var sources []pricing.Source
		for i := range 1 + rng.IntN(3) {
			table := map[pricing.Pair]store.Decimal{}
			for _, p := range universe {
				if rng.IntN(3) == 0 {
					table[p] = rate(p)
				}
			}
			sources = append(sources, pricing.NewFixed(fmt.Sprintf("s%d", i), table, func() time.Time { return now }))
		}
		cfg := pricing.Config{Assets: []string{"ETH", "USDC"}, Currencies: []string{"USD", "EUR", "GBP", "JPY"},
			MinSources: 1 + rng.IntN(2), Now: func() time.Time { return now }}
		p, err := pricing.New(sources, cfg)
		require.NoError(t, err)
		require.NoError(t, p.Refresh(context.Background()))
		missing := map[string]bool{}
		var re *pricing.RouteError
		if err := p.CheckRoutes(); err != nil {
			require.True(t, errors.As(err, &re), "%v", err)
			for _, u := range re.Unpriced {
				require.NotEmpty(t, u.Lacking)
				missing[u.Asset+"/"+u.Currency] = true
			}
		}
		for _, asset := range []store.Asset{ethAsset, usdcAsset} {
			for _, cur := range cfg.Currencies {
				price, err := store.ParseFiat("10.00", cur)
				if cur == "JPY" {
					price, err = store.ParseFiat("1000", cur)
				}
				require.NoError(t, err)
				_, qerr := p.Quote(context.Background(), price, asset, now.Add(time.Hour))
				key := asset.Symbol + "/" + cur
				if missing[key] {
					unpriced++
					require.ErrorIs(t, qerr, pricing.ErrRateUnavailable, "round %d: %s is unpriced but quoted", round, key)
				} else {
					priced++
					require.NoError(t, qerr, "round %d: %s has a route but no quote (%s)", round, key, strings.TrimSpace(fmt.Sprint(re)))
				}
			}
		}
	}
	require.Positive(t, priced)
	require.Positive(t, unpriced)
}

// The ECB quotes EUR in exactly the currencies of its daily file.
func TestECB_QuotesPair_TheCurrenciesOfItsFile(t *testing.T) {
	t.Parallel()
	_, rates, err := pricing.ParseECB([]byte(recorded(t, "ecb/eurofxref-daily.xml")))
	require.NoError(t, err)
	ecb, err := pricing.NewECB(pricing.ECBConfig{})
	require.NoError(t, err)
	n := 0
	for a := 'A'; a <= 'Z'; a++ {
		for b := 'A'; b <= 'Z'; b++ {
			for c := 'A'; c <= 'Z'; c++ {
				code := string([]rune{a, b, c})
				if !store.IsCurrency(code) {
					continue
				}
				_, inFile := rates[code]
				require.Equal(t, inFile, ecb.QuotesPair(pricing.Pair{Base: "EUR", Quote: code}), code)
				require.False(t, ecb.QuotesPair(pricing.Pair{Base: code, Quote: "EUR"}), code)
				if inFile {
					n++
				}
			}
		}
	}
	require.Equal(t, len(rates), n)
}
