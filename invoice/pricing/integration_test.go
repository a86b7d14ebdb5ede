package pricing_test

import (
	"context"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice/pricing"
	"github.com/evmpay/evmpay/store"
)

// TestPricer_RealSources quotes through every real source at once: the
// three exchanges replaying their documented answers (prices and times
// moved to the test's day), Chainlink's MockV3Aggregator on the simulated
// chain, and the ECB file. ETH in JPY is the median of four ETH/USD
// observations crossed with USD/JPY from the ECB's EUR/JPY and EUR/USD.
func TestPricer_RealSources(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 3, 10, 0, 0, 0, time.UTC) // the day after the recorded ECB file
	cfg := pricing.ExchangeConfig{Timeout: 2 * time.Second, Now: func() time.Time { return now }}

	coinbase := newReplay(t)
	coinbase.on("/products/ETH-USD/ticker", 200, strings.NewReplacer(
		`"price": "6268.48"`, `"price": "2500.00"`, "2020-03-20T00:22:57.833Z", now.Add(-5*time.Second).Format(time.RFC3339Nano),
	).Replace(recorded(t, "coinbase/ticker.json")))
	kraken := newReplay(t)
	kraken.on("/0/public/Ticker?pair=ETHUSD", 200, strings.NewReplacer(
		`"XXBTZUSD"`, `"XETHZUSD"`, `"c": ["30303.20000", "0.00067643"]`, `"c": ["2501.00000", "0.5"]`,
	).Replace(recorded(t, "kraken/ticker.json")))
	bitstamp := newReplay(t)
	bitstamp.on("/api/v2/ticker/ethusd/", 200, strings.NewReplacer(
		`"last": "2211.00"`, `"last": "2499.50"`, `"1643640186"`, `"`+strconv.FormatInt(now.Add(-3*time.Second).Unix(), 10)+`"`,
	).Replace(recorded(t, "bitstamp/ticker.json")))
	ecb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != pricing.ECBDailyPath {
			http.NotFound(w, req)
			return
		}
		_, _ = w.Write([]byte(recorded(t, "ecb/eurofxref-daily.xml")))
	}))
	t.Cleanup(ecb.Close)

	c := newChain(t)
	feed := c.mock(8, 250_000_000_000)
	c.mined(feed.UpdateRoundData(c.opts, 2, big.NewInt(250_050_000_000), uint64(now.Add(-30*time.Second).Unix()), uint64(now.Add(-30*time.Second).Unix())))

	var sources []pricing.Source
	for _, mk := range []struct {
		r  *replay
		fn func(pricing.ExchangeConfig) (pricing.Source, error)
	}{{coinbase, pricing.NewCoinbase}, {kraken, pricing.NewKraken}, {bitstamp, pricing.NewBitstamp}} {
		cfg.BaseURL = mk.r.srv.URL
		s, err := mk.fn(cfg)
		require.NoError(t, err)
		sources = append(sources, s)
	}
	cl, err := pricing.NewChainlink(c.client, pricing.ChainlinkConfig{Feeds: []pricing.ChainlinkFeed{{Pair: ethUSD, Address: feed.Address, MaxAge: time.Hour}}})
	require.NoError(t, err)
	fx, err := pricing.NewECB(pricing.ECBConfig{BaseURL: ecb.URL})
	require.NoError(t, err)
	sources = append(sources, cl, fx)

	p, err := pricing.New(sources, pricing.Config{Assets: []string{"ETH"}, Currencies: []string{"USD", "EUR", "JPY"}, Now: func() time.Time { return now }})
	require.NoError(t, err)
	// Coinbase and Bitstamp are asked for ETH/EUR too and answer 404; Kraken
	// and the others quote what they have.
	_ = p.Refresh(context.Background())

	q, err := p.Quote(context.Background(), store.MustParseFiat("50000", "JPY"), eth, now.Add(time.Hour))
	require.NoError(t, err)
	// ETH/USD = mean(2500.00, 2500.50) of {2499.50, 2500.00, 2500.50, 2501};
	// USD/JPY = 176.99 ÷ 1.1225 = 157.674832962138085 (18 digits);
	// ETH/JPY = 2500.25 × that = 394226.501113585747.
	require.Equal(t, "394226.501113585747", q.Rate.String())
	require.Equal(t, "126830641417467384", q.Amount.String())
	var names []string
	for _, s := range q.Sources {
		names = append(names, s.Name+" "+s.Pair)
	}
	require.Equal(t, []string{
		"bitstamp ETH/USD", "chainlink ETH/USD", "coinbase ETH/USD", "kraken ETH/USD", "ecb EUR/JPY", "ecb EUR/USD",
	}, names)

	// The feed stops updating: two hours later than its heartbeat allows,
	// it is dropped as stale and the three exchanges carry on.
	old := now.Add(-2 * time.Hour)
	c.mined(feed.UpdateRoundData(c.opts, 3, big.NewInt(200_000_000_000), uint64(old.Unix()), uint64(old.Unix())))
	_ = p.Refresh(context.Background())
	q, err = p.Quote(context.Background(), store.MustParseFiat("100", "USD"), eth, now.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, "2500", q.Rate.String())
	require.Equal(t, "stale", observation(t, p.Status(), "ETH/USD", "chainlink").Dropped)
}
