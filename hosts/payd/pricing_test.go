package main

import (
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice/pricing"
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
