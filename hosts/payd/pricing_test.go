package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice/pricing"
	"github.com/evmpay/evmpay/store"
)

// payd serve names its rate sources in PRICING_SOURCES and refuses fiat
// pricing with fewer than two independent crypto sources.
func TestServe_PricingSources_AtLeastTwoCryptoSources(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "x", "RPC_URL": "y"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	e, err := readServeEnv(envOf(base))
	require.NoError(t, err)
	require.False(t, e.pricing.on(), "no sources: fiat pricing is off")

	for _, one := range []string{"coinbase", "kraken,ecb", "chainlink:ETH/USD@0x5f4eC3Df9cbd43714FE2740f5E3616155c5b8419", "ecb"} {
		_, err := readServeEnv(envOf(with("PRICING_SOURCES", one)))
		require.ErrorContains(t, err, "at least two independent", one)
	}
	_, err = readServeEnv(envOf(with("PRICING_SOURCES", "coinbase,coinbase")))
	require.ErrorContains(t, err, "named once")
	_, err = readServeEnv(envOf(with("PRICING_SOURCES", "coinbase,binance")))
	require.ErrorContains(t, err, `unknown source "binance"`)
	_, err = readServeEnv(envOf(with("PRICING_CURRENCIES", "EUR")))
	require.ErrorContains(t, err, "PRICING_SOURCES is not")
	_, err = readServeEnv(envOf(with("PRICING_SOURCES", "coinbase,kraken", "PRICING_CURRENCIES", "EUR,XYZ", "PRICING_DEPEG", "maybe", "PRICING_MAX_AGE", "-1s")))
	require.ErrorContains(t, err, `"XYZ" is not an ISO 4217 currency`)
	require.ErrorContains(t, err, "PRICING_DEPEG")
	require.ErrorContains(t, err, "PRICING_MAX_AGE")
	_, err = readServeEnv(envOf(with("PRICING_SOURCES", "coinbase,chainlink:ETH/USD")))
	require.ErrorContains(t, err, "chainlink:BASE/QUOTE@0xFEED")

	e, err = readServeEnv(envOf(with(
		"PRICING_SOURCES", "Coinbase, kraken,ecb,chainlink:ETH/USD@0x5f4eC3Df9cbd43714FE2740f5E3616155c5b8419@1h5m,chainlink:USDC/USD@0x8fFfFfd4AfB6115b954Bd326cbe7B4BA576818f6",
		"PRICING_COINBASE_URL", "http://127.0.0.1:1", "PRICING_CURRENCIES", "eur,usd", "PRICING_ASSETS", "eth,usdc",
		"PRICING_SYMBOLS", "WETH=ETH", "PRICING_MAX_AGE", "90s", "PRICING_REFRESH", "10s", "PRICING_DEPEG", "refuse")))
	require.NoError(t, err)
	p := e.pricing
	require.True(t, p.on())
	require.Equal(t, []string{"coinbase", "kraken", "ecb", "chainlink"}, p.sources, "the feeds are one source")
	require.Equal(t, map[string]string{"coinbase": "http://127.0.0.1:1"}, p.urls)
	require.Len(t, p.feeds, 2)
	require.Equal(t, pricing.Pair{Base: "ETH", Quote: "USD"}, p.feeds[0].Pair)
	require.Equal(t, common.HexToAddress("0x5f4eC3Df9cbd43714FE2740f5E3616155c5b8419"), p.feeds[0].Address)
	require.Equal(t, 65*time.Minute, p.feeds[0].MaxAge)
	require.Equal(t, []string{"EUR", "USD"}, p.currencies)
	require.Equal(t, []string{"ETH", "USDC"}, p.assets)
	require.Equal(t, map[string]string{"WETH": "ETH"}, p.symbols)
	require.Equal(t, 90*time.Second, p.maxAge)
	require.Equal(t, 10*time.Second, p.refresh)
	require.Equal(t, pricing.PegRefuse, p.depeg)
}

// servePricer builds the Pricer `payd serve` builds at start from the
// PRICING_* variables of env, for a service accepting ETH and a USDC
// token. No rate is read.
func servePricer(t *testing.T, env map[string]string) (*pricing.Pricer, error) {
	t.Helper()
	all := map[string]string{"DATABASE_URL": "x", "RPC_URL": "y"}
	for k, v := range env {
		all[k] = v
	}
	e, err := readServeEnv(envOf(all))
	require.NoError(t, err)
	usdc := common.HexToAddress("0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48")
	// A node that is never called: Chainlink feeds are only read at a
	// refresh.
	node, err := ethclient.Dial("http://127.0.0.1:1")
	require.NoError(t, err)
	t.Cleanup(node.Close)
	a := &app{cfg: appConfig{pricing: e.pricing}, assets: []store.Asset{{Symbol: "USDC", Address: &usdc, Decimals: 6}},
		log: slog.New(slog.DiscardHandler), reg: prometheus.NewRegistry()}
	return a.buildPricer(node)
}

// Two exchanges and no FX source with the default currencies (USD, EUR):
// a USD stablecoin has no route to EUR, so every EUR invoice accepting
// it (the default accept) would answer 503 rate_unavailable forever.
// payd refuses to start, naming the asset, the currency, the pair missing
// and the sources that would give it.
func TestServe_Pricing_NoRouteToACurrency_RefusedAtStart(t *testing.T) {
	t.Parallel()
	_, err := servePricer(t, map[string]string{"PRICING_SOURCES": "coinbase,kraken"})
	require.Error(t, err)
	for _, want := range []string{
		"PRICING_SOURCES=coinbase,kraken",
		"USDC can never be priced in EUR with these sources (it is pegged to USD)",
		"USD/EUR or EUR/USD is quoted by no source, and FXMinSources is 1",
		"to quote EUR/USD: add ecb or a chainlink:EUR/USD@0xFEED feed to PRICING_SOURCES",
		"PRICING_CURRENCIES", "PRICING_ASSETS",
	} {
		require.ErrorContains(t, err, want)
	}
	require.NotContains(t, err.Error(), "ETH can never", "ETH/EUR is a market of both exchanges")

	// With the ECB, or without EUR, every route exists.
	_, err = servePricer(t, map[string]string{"PRICING_SOURCES": "coinbase,kraken,ecb"})
	require.NoError(t, err)
	_, err = servePricer(t, map[string]string{"PRICING_SOURCES": "coinbase,kraken", "PRICING_CURRENCIES": "USD"})
	require.NoError(t, err)
	// A currency crypto markets do not quote needs the ECB's cross.
	_, err = servePricer(t, map[string]string{"PRICING_SOURCES": "coinbase,kraken", "PRICING_CURRENCIES": "JPY", "PRICING_ASSETS": "ETH"})
	require.ErrorContains(t, err, "ETH can never be priced in JPY")
	_, err = servePricer(t, map[string]string{"PRICING_SOURCES": "coinbase,kraken,ecb", "PRICING_CURRENCIES": "JPY", "PRICING_ASSETS": "ETH"})
	require.NoError(t, err)
}

// Two crypto sources, but only one quotes a pair a route needs: fewer than
// the two that must agree on a crypto rate (pricing.Config.MinSources),
// so that rate could never be had. payd refuses to start and names the
// setting.
func TestServe_Pricing_FewerSourcesThanMinSources_RefusedAtStart(t *testing.T) {
	t.Parallel()
	_, err := servePricer(t, map[string]string{
		"PRICING_SOURCES":    "coinbase,chainlink:ETH/USD@0x5f4eC3Df9cbd43714FE2740f5E3616155c5b8419",
		"PRICING_CURRENCIES": "USD",
	})
	require.Error(t, err)
	require.ErrorContains(t, err, "USDC can never be priced in USD with these sources (it is pegged to USD): USDC/USD is quoted by only coinbase, and MinSources is 2")
	require.ErrorContains(t, err, "to quote USDC/USD: add bitstamp or kraken or a chainlink:USDC/USD@0xFEED feed to PRICING_SOURCES")
	require.NotContains(t, err.Error(), "ETH can never", "ETH/USD has its two sources")

	_, err = servePricer(t, map[string]string{
		"PRICING_SOURCES":    "coinbase,chainlink:ETH/USD@0x5f4eC3Df9cbd43714FE2740f5E3616155c5b8419,chainlink:USDC/USD@0x8fFfFfd4AfB6115b954Bd326cbe7B4BA576818f6",
		"PRICING_CURRENCIES": "USD",
	})
	require.NoError(t, err)
}

// PRICING_COINBASE_URL, PRICING_KRAKEN_URL, PRICING_BITSTAMP_URL and
// PRICING_ECB_URL are all base URLs: each source's own path is requested
// under it (the ECB's daily file at /stats/eurofxref/eurofxref-daily.xml,
// not the base URL itself).
func TestServe_PricingURLs_AreBaseURLs(t *testing.T) {
	t.Parallel()
	xml, err := os.ReadFile(filepath.Join("..", "..", "invoice", "pricing", "testdata", "ecb", "eurofxref-daily.xml"))
	require.NoError(t, err)
	// Yesterday's rates: fresh for the ECB's 124 hours, and never ahead of
	// the clock (they are observed at 13:15 UTC of their day).
	day := time.Now().UTC().AddDate(0, 0, -1).Format(time.DateOnly)
	daily := strings.Replace(string(xml), "time='2026-10-02'", "time='"+day+"'", 1)
	var asked []string
	ecb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		asked = append(asked, req.URL.Path)
		if req.URL.Path != "/proxy/ecb/stats/eurofxref/eurofxref-daily.xml" {
			http.NotFound(w, req)
			return
		}
		_, _ = w.Write([]byte(daily))
	}))
	t.Cleanup(ecb.Close)
	prices := func() map[string]string {
		return map[string]string{"ETH/USD": "2500.00", "ETH/EUR": "2227.00", "USDC/USD": "1.0001"}
	}
	coinbase, kraken, bitstamp := newRateReplay(t, "coinbase", prices()), newRateReplay(t, "kraken", prices()), newRateReplay(t, "bitstamp", prices())

	p, err := servePricer(t, map[string]string{
		"PRICING_SOURCES":      "coinbase,kraken,bitstamp,ecb",
		"PRICING_COINBASE_URL": coinbase.srv.URL, "PRICING_KRAKEN_URL": kraken.srv.URL + "/",
		"PRICING_BITSTAMP_URL": bitstamp.srv.URL, "PRICING_ECB_URL": ecb.URL + "/proxy/ecb",
	})
	require.NoError(t, err)
	_ = p.Refresh(context.Background()) // some markets are not listed: errors beside the rates
	price, err := store.ParseFiat("49.90", "EUR")
	require.NoError(t, err)
	usdc := common.HexToAddress("0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48")
	q, err := p.Quote(context.Background(), price, store.Asset{Symbol: "USDC", Address: &usdc, Decimals: 6}, time.Now().Add(time.Hour))
	require.NoError(t, err, "USDC in EUR: the peg crossed with the ECB's EUR/USD; the ECB was asked %v", asked)
	names := map[string]bool{}
	for _, s := range q.Sources {
		names[s.Name] = true
	}
	require.Equal(t, map[string]bool{"coinbase": true, "kraken": true, "bitstamp": true, "ecb": true}, names)
	require.Equal(t, "56.01275", store.FormatUnits(q.Amount, 6), "49.90 EUR × 1.1225 USD/EUR at the 1 USD peg")
	for _, s := range p.Status().Sources {
		require.NotNil(t, s.LastSuccessAt, "%s answered at its base URL", s.Name)
	}
}
