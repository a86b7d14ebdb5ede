package pricing_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice/pricing"
	"github.com/evmpay/evmpay/store"
)

// script is a Source whose next answer the test sets: an implementation
// of the interface embedders implement, not a stand-in for a real part.
type script struct {
	name string
	mu   sync.Mutex
	obs  map[pricing.Pair]pricing.Rate
	err  error
}

func newScript(name string) *script {
	return &script{name: name, obs: map[pricing.Pair]pricing.Rate{}}
}

func (s *script) Name() string { return s.name }

func (s *script) Rates(_ context.Context, pairs []pricing.Pair) ([]pricing.Rate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	var out []pricing.Rate
	for _, p := range pairs {
		if r, ok := s.obs[p]; ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// set makes the source answer pair at value, observed at.
func (s *script) set(pair pricing.Pair, value string, at time.Time) *script {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.obs[pair] = pricing.Rate{Pair: pair, Value: store.MustParseDecimal(value), At: at}
	return s
}

func (s *script) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// clock is a test's time, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type fixture struct {
	t     *testing.T
	p     *pricing.Pricer
	clock *clock
	logs  *bytes.Buffer
	reg   *prometheus.Registry
}

func newFixture(t *testing.T, cfg pricing.Config, sources ...pricing.Source) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: &clock{t: fixedNow}, logs: &bytes.Buffer{}, reg: prometheus.NewRegistry()}
	cfg.Now = f.clock.Now
	cfg.Logger = slog.New(slog.NewTextHandler(&lockedWriter{w: f.logs}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg.Registerer = f.reg
	if cfg.Assets == nil {
		cfg.Assets = []string{"ETH", "USDC"}
	}
	p, err := pricing.New(sources, cfg)
	require.NoError(t, err)
	f.p = p
	return f
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (f *fixture) refresh() {
	f.t.Helper()
	_ = f.p.Refresh(context.Background())
}

func (f *fixture) quote(amount, currency string, asset store.Asset) (store.Quote, error) {
	return f.p.Quote(context.Background(), store.MustParseFiat(amount, currency), asset, f.clock.Now().Add(15*time.Minute))
}

var (
	eth     = store.NativeAsset("ETH")
	usdcTok = common.HexToAddress("0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48")
	usdcA   = store.Asset{Symbol: "USDC", Address: &usdcTok, Decimals: 6}
	usdcUSD = pricing.Pair{Base: "USDC", Quote: "USD"}
	eurUSD  = pricing.Pair{Base: "EUR", Quote: "USD"}
	eurJPY  = pricing.Pair{Base: "EUR", Quote: "JPY"}
)

func TestPricer_MedianOfThreeSources(t *testing.T) {
	t.Parallel()
	a := newScript("a").set(ethUSD, "2500", fixedNow)
	b := newScript("b").set(ethUSD, "2502", fixedNow)
	c := newScript("c").set(ethUSD, "2498.5", fixedNow.Add(-30*time.Second))
	f := newFixture(t, pricing.Config{}, a, b, c)
	f.refresh()
	q, err := f.quote("49.90", "USD", eth)
	require.NoError(t, err)
	require.Equal(t, "2500", q.Rate.String())
	require.Equal(t, "19960000000000000", q.Amount.String()) // 49.90 / 2500 ETH
	require.False(t, q.Stale)
	require.Len(t, q.Sources, 3)
	require.Equal(t, "a", q.Sources[0].Name)
	require.Equal(t, "ETH/USD", q.Sources[0].Pair)
	require.Equal(t, fixedNow.Add(15*time.Minute), q.ExpiresAt)
	require.Equal(t, fixedNow, q.CreatedAt)
	require.Equal(t, store.MustParseFiat("49.90", "USD"), q.Price)

	// An even count: the mean of the middle two, exactly.
	f2 := newFixture(t, pricing.Config{},
		newScript("a").set(ethUSD, "2500", fixedNow), newScript("b").set(ethUSD, "2500.01", fixedNow))
	f2.refresh()
	q, err = f2.quote("1", "USD", eth)
	require.NoError(t, err)
	require.Equal(t, "2500.005", q.Rate.String())
}

func TestPricer_OneSourceDownStillQuotes(t *testing.T) {
	t.Parallel()
	a := newScript("a").set(ethUSD, "2500", fixedNow)
	b := newScript("b").set(ethUSD, "2501", fixedNow)
	c := newScript("c")
	c.fail(errors.New("connection refused"))
	f := newFixture(t, pricing.Config{}, a, b, c)
	err := f.p.Refresh(context.Background())
	require.ErrorContains(t, err, "connection refused")
	q, err := f.quote("10", "USD", eth)
	require.NoError(t, err)
	require.Equal(t, "2500.5", q.Rate.String())
	st := f.p.Status()
	require.False(t, st.Sources[2].Healthy)
	require.Equal(t, "connection refused", st.Sources[2].LastError)
	require.True(t, st.Sources[0].Healthy)
	require.Contains(t, f.logs.String(), `msg="pricing: source failing" source=c error="connection refused"`)
	require.Equal(t, 0.0, metricValue(t, f.reg, "pricing_source_up", "c"))
}

func TestPricer_AllSourcesDown_RateUnavailableWithRetryAfter(t *testing.T) {
	t.Parallel()
	a, b := newScript("a"), newScript("b")
	a.fail(errors.New("timeout"))
	b.fail(errors.New("HTTP 502"))
	f := newFixture(t, pricing.Config{RefreshInterval: 20 * time.Second}, a, b)
	f.refresh()
	_, err := f.quote("10", "USD", eth)
	require.ErrorIs(t, err, pricing.ErrRateUnavailable)
	var u *pricing.UnavailableError
	require.ErrorAs(t, err, &u)
	require.Equal(t, "ETH", u.Asset)
	require.Equal(t, "USD", u.Currency)
	require.Contains(t, u.Reason, "ETH/USD: no source")
	ra, ok := pricing.RetryAfter(err)
	require.True(t, ok)
	require.Equal(t, 20*time.Second, ra) // not running: one refresh interval
	require.Equal(t, 1.0, metricValue(t, f.reg, "pricing_rate_unavailable_total", "ETH", "USD"))
}

func TestPricer_StaleSourceDroppedLoggedAndCounted(t *testing.T) {
	t.Parallel()
	a := newScript("a").set(ethUSD, "2500", fixedNow)
	b := newScript("b").set(ethUSD, "2501", fixedNow)
	stale := newScript("stale").set(ethUSD, "2600", fixedNow.Add(-5*time.Minute))
	f := newFixture(t, pricing.Config{MaxAge: 2 * time.Minute}, a, b, stale)
	f.refresh()
	q, err := f.quote("10", "USD", eth)
	require.NoError(t, err)
	require.Equal(t, "2500.5", q.Rate.String()) // 2600 not in the median
	for _, s := range q.Sources {
		require.NotEqual(t, "stale", s.Name)
	}
	require.Contains(t, f.logs.String(), `msg="pricing: source dropped" source=stale pair=ETH/USD reason=stale rate=2600`)
	require.Equal(t, 1.0, metricValue(t, f.reg, "pricing_source_dropped_total", "ETH/USD", "stale", "stale"))
	f.refresh()
	require.Equal(t, 2.0, metricValue(t, f.reg, "pricing_source_dropped_total", "ETH/USD", "stale", "stale"))
	require.Equal(t, 1, strings.Count(f.logs.String(), "source dropped"), "logged when it starts, not at every refresh")

	// Fresh again: used again, and said so.
	stale.set(ethUSD, "2502", f.clock.Now())
	f.refresh()
	q, err = f.quote("10", "USD", eth)
	require.NoError(t, err)
	require.Equal(t, "2501", q.Rate.String())
	require.Contains(t, f.logs.String(), `msg="pricing: source used again" source=stale pair=ETH/USD`)
}

func TestPricer_ObservationFromTheFutureDropped(t *testing.T) {
	t.Parallel()
	a := newScript("a").set(ethUSD, "2500", fixedNow)
	b := newScript("b").set(ethUSD, "2501", fixedNow)
	c := newScript("c").set(ethUSD, "2400", fixedNow.Add(10*time.Minute))
	f := newFixture(t, pricing.Config{}, a, b, c)
	f.refresh()
	st := f.p.Status()
	require.Equal(t, "future", observation(t, st, "ETH/USD", "c").Dropped)
	q, err := f.quote("10", "USD", eth)
	require.NoError(t, err)
	require.Equal(t, "2500.5", q.Rate.String())
}

func TestPricer_DeviatingSourceDropped(t *testing.T) {
	t.Parallel()
	a := newScript("a").set(ethUSD, "2500", fixedNow)
	b := newScript("b").set(ethUSD, "2510", fixedNow)
	wild := newScript("wild").set(ethUSD, "1"+strings.Repeat("0", 70), fixedNow) // a well-formed but absurd price
	dip := newScript("dip").set(ethUSD, "2380", fixedNow)                        // 4.8 % under the median
	f := newFixture(t, pricing.Config{MaxDeviationBps: 100}, a, b, wild, dip)
	f.refresh()
	q, err := f.quote("10", "USD", eth)
	require.NoError(t, err)
	require.Equal(t, "2505", q.Rate.String())
	require.Len(t, q.Sources, 2)
	st := f.p.Status()
	require.Equal(t, "deviation", observation(t, st, "ETH/USD", "wild").Dropped)
	require.Equal(t, "deviation", observation(t, st, "ETH/USD", "dip").Dropped)
	require.True(t, observation(t, st, "ETH/USD", "a").Used)
	require.Contains(t, f.logs.String(), "source=dip pair=ETH/USD reason=deviation rate=2380")
}

func TestPricer_TwoSourcesDisagreeing_NeitherIsTrusted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, pricing.Config{},
		newScript("a").set(ethUSD, "2500", fixedNow), newScript("b").set(ethUSD, "2600", fixedNow))
	f.refresh()
	_, err := f.quote("10", "USD", eth)
	require.ErrorIs(t, err, pricing.ErrRateUnavailable)
	require.ErrorContains(t, err, "ETH/USD: 0 of 2 sources needed (a: deviation, b: deviation)")
	require.Contains(t, f.logs.String(), `msg="pricing: rate not verified" pair=ETH/USD`)
}

func TestPricer_TooFewSources_LastGoodRateUntilMaxAgeThenUnavailable(t *testing.T) {
	t.Parallel()
	a := newScript("a").set(ethUSD, "2500", fixedNow)
	b := newScript("b").set(ethUSD, "2502", fixedNow)
	f := newFixture(t, pricing.Config{MaxAge: 2 * time.Minute, RefreshInterval: 15 * time.Second}, a, b)
	f.refresh() // verified at t0

	// a goes down; b keeps answering. a's last observation is usable for
	// MaxAge after it was made.
	a.fail(errors.New("down"))
	f.clock.Add(90 * time.Second)
	b.set(ethUSD, "2504", f.clock.Now())
	f.refresh() // t0+90s: a (90 s old) and b agree: verified at t0+90s
	q, err := f.quote("10", "USD", eth)
	require.NoError(t, err)
	require.False(t, q.Stale)
	require.Equal(t, "2502", q.Rate.String())

	f.clock.Add(60 * time.Second) // t0+150s: a is stale, b alone is too few
	b.set(ethUSD, "2530", f.clock.Now())
	f.refresh()
	q, err = f.quote("10", "USD", eth)
	require.NoError(t, err)
	require.True(t, q.Stale, "the last good rate stands in")
	require.Equal(t, "2502", q.Rate.String())
	require.Equal(t, 1.0, metricValue(t, f.reg, "pricing_quotes_stale_total", "ETH", "USD"))
	st := f.p.Status()
	rs := rate(t, st, "ETH/USD")
	require.True(t, rs.Available)
	require.True(t, rs.Stale)
	require.Equal(t, int64(60), *rs.AgeSeconds)
	require.Contains(t, rs.Reason, "1 of 2 sources needed (a: stale)")

	f.clock.Add(61 * time.Second) // t0+211s: the last good rate is 121 s old
	_, err = f.quote("10", "USD", eth)
	require.ErrorIs(t, err, pricing.ErrRateUnavailable)
	require.False(t, rate(t, f.p.Status(), "ETH/USD").Available)
}

func TestPricer_StablecoinAtItsPegWithinTheBand(t *testing.T) {
	t.Parallel()
	f := newFixture(t, pricing.Config{},
		newScript("a").set(usdcUSD, "0.9991", fixedNow), newScript("b").set(usdcUSD, "0.9995", fixedNow))
	f.refresh()
	q, err := f.quote("49.90", "USD", usdcA)
	require.NoError(t, err)
	require.True(t, q.Pegged)
	require.Equal(t, "1", q.Rate.String())
	require.Equal(t, "49900000", q.Amount.String())
	require.Len(t, q.Sources, 2) // the market observations that kept it on its peg
	require.Equal(t, "0.9991", q.Sources[0].Rate.String())
	ps := f.p.Status().Pegs
	require.Len(t, ps, 1)
	require.True(t, ps[0].Holding)
	require.Equal(t, "1 USD", ps[0].Peg)
}

func TestPricer_DepeggedStablecoin_MarketRateOrRefused(t *testing.T) {
	t.Parallel()
	for _, market := range []string{"0.97", "1.02"} { // both ways off the peg
		t.Run("market "+market, func(t *testing.T) {
			t.Parallel()
			sources := func() []pricing.Source {
				return []pricing.Source{newScript("a").set(usdcUSD, market, fixedNow), newScript("b").set(usdcUSD, market, fixedNow)}
			}
			f := newFixture(t, pricing.Config{}, sources()...) // default: PegUseMarket
			f.refresh()
			q, err := f.quote("97.00", "USD", usdcA)
			require.NoError(t, err)
			require.False(t, q.Pegged)
			require.Equal(t, market, q.Rate.String())
			require.Contains(t, f.logs.String(), `msg="pricing: stablecoin off its peg" asset=USDC rate=`+market)
			require.Equal(t, 0.0, metricValue(t, f.reg, "pricing_peg_holding", "USDC"))

			refuse := newFixture(t, pricing.Config{Pegs: []pricing.Peg{{Asset: "USDC", Currency: "USD", BandBps: 50, Outside: pricing.PegRefuse}}}, sources()...)
			refuse.refresh()
			_, err = refuse.quote("97.00", "USD", usdcA)
			require.ErrorIs(t, err, pricing.ErrDepegged)
			require.ErrorIs(t, err, pricing.ErrRateUnavailable)
			_, ok := pricing.RetryAfter(err)
			require.True(t, ok)
		})
	}
}

func TestPricer_CrossRatesThroughBridges(t *testing.T) {
	t.Parallel()
	crypto := func(name string) *script {
		return newScript(name).set(ethUSD, "2500", fixedNow).set(usdcUSD, "1", fixedNow)
	}
	// An ECB-like source: euro-based fiat rates, a day old.
	fx := newScript("fx").set(eurUSD, "1.25", fixedNow.Add(-24*time.Hour)).set(eurJPY, "160", fixedNow.Add(-24*time.Hour))
	fx.obs[eurUSD] = pricing.Rate{Pair: eurUSD, Value: store.MustParseDecimal("1.25"), At: fixedNow.Add(-24 * time.Hour), MaxAge: 124 * time.Hour}
	fx.obs[eurJPY] = pricing.Rate{Pair: eurJPY, Value: store.MustParseDecimal("160"), At: fixedNow.Add(-24 * time.Hour), MaxAge: 124 * time.Hour}
	f := newFixture(t, pricing.Config{Currencies: []string{"USD", "EUR", "JPY"}}, crypto("a"), crypto("b"), fx)
	f.refresh()

	// ETH in EUR: no ETH/EUR market, so ETH/USD × USD/EUR (1 ÷ 1.25).
	q, err := f.quote("100.00", "EUR", eth)
	require.NoError(t, err)
	require.Equal(t, "2000", q.Rate.String())
	require.Equal(t, "50000000000000000", q.Amount.String())
	require.Len(t, q.Sources, 3) // a and b for ETH/USD, fx for EUR/USD
	require.Equal(t, "EUR/USD", q.Sources[2].Pair)

	// ETH in JPY: ETH/USD × USD/JPY, USD/JPY = EUR/JPY ÷ EUR/USD = 128.
	q, err = f.quote("320000", "JPY", eth)
	require.NoError(t, err)
	require.Equal(t, "320000", q.Rate.String())
	require.Equal(t, "1000000000000000000", q.Amount.String())

	// A USD stablecoin for a EUR price: at its peg, then into euros.
	q, err = f.quote("49.90", "EUR", usdcA)
	require.NoError(t, err)
	require.True(t, q.Pegged)
	require.Equal(t, "0.8", q.Rate.String())
	require.Equal(t, "62375000", q.Amount.String()) // 49.90 / 0.8 USDC

	// A currency not configured is refused before any rate is looked at.
	_, err = f.quote("10", "GBP", eth)
	require.ErrorIs(t, err, pricing.ErrUnsupportedCurrency)
}

func TestPricer_DirectMarketPreferredOverACross(t *testing.T) {
	t.Parallel()
	src := func(name string) *script {
		return newScript(name).set(ethUSD, "2500", fixedNow).set(ethEUR, "2100", fixedNow).set(eurUSD, "1.25", fixedNow)
	}
	f := newFixture(t, pricing.Config{}, src("a"), src("b"))
	f.refresh()
	q, err := f.quote("21.00", "EUR", eth)
	require.NoError(t, err)
	require.Equal(t, "2100", q.Rate.String()) // not 2500 ÷ 1.25
	require.Equal(t, "10000000000000000", q.Amount.String())
}

func TestPricer_DerivedRatesRoundTo18SignificantDigits(t *testing.T) {
	t.Parallel()
	src := func(name string) *script {
		return newScript(name).set(ethUSD, "2500", fixedNow).set(eurUSD, "1.1225", fixedNow)
	}
	f := newFixture(t, pricing.Config{}, src("a"), src("b"))
	f.refresh()
	q, err := f.quote("49.90", "EUR", eth)
	require.NoError(t, err)
	// 1 ÷ 1.1225 = 0.890868596881959910… → 0.890868596881959911 (18 digits),
	// × 2500 = 2227.1714922048997775 → 2227.17149220489978.
	require.Equal(t, "2227.17149220489978", q.Rate.String())
	// The amount is computed from the stored rate, rounded up.
	want, err := store.QuoteAmount(store.MustParseFiat("49.90", "EUR"), q.Rate, 18)
	require.NoError(t, err)
	require.Equal(t, want, q.Amount)
	v, err := q.Value(q.Amount)
	require.NoError(t, err)
	require.Equal(t, "49.90", v.Amount())
}

func TestPricer_RefusesUnknownAssetsZeroPricesAndPastExpiry(t *testing.T) {
	t.Parallel()
	f := newFixture(t, pricing.Config{}, newScript("a"))
	_, err := f.quote("10", "USD", store.NativeAsset("BTC"))
	require.ErrorIs(t, err, pricing.ErrUnknownAsset)
	_, err = f.quote("0", "USD", eth)
	require.ErrorIs(t, err, pricing.ErrInvalidPrice)
	_, err = f.p.Quote(context.Background(), store.MustParseFiat("1", "USD"), eth, fixedNow)
	require.Error(t, err)
	require.NoError(t, f.p.Check(store.MustParseFiat("1", "USD"), eth))
	require.ErrorIs(t, f.p.Check(store.MustParseFiat("1", "CHF"), eth), pricing.ErrUnsupportedCurrency)
}

func TestPricer_SymbolsMapAnAssetToItsMarket(t *testing.T) {
	t.Parallel()
	f := newFixture(t, pricing.Config{Symbols: map[string]string{"weth": "eth"}},
		newScript("a").set(ethUSD, "2500", fixedNow), newScript("b").set(ethUSD, "2500", fixedNow))
	f.refresh()
	weth := store.Asset{Symbol: "WETH", Address: &usdcTok, Decimals: 18}
	q, err := f.quote("25", "USD", weth)
	require.NoError(t, err)
	require.Equal(t, "10000000000000000", q.Amount.String())
	require.Equal(t, weth, q.Asset)
}

func TestPricer_QuotesAllOrNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, pricing.Config{},
		newScript("a").set(ethUSD, "2500", fixedNow), newScript("b").set(ethUSD, "2500", fixedNow))
	f.refresh()
	qs, err := f.p.Quotes(context.Background(), store.MustParseFiat("10", "USD"), []store.Asset{eth}, fixedNow.Add(time.Hour))
	require.NoError(t, err)
	require.Len(t, qs, 1)
	qs, err = f.p.Quotes(context.Background(), store.MustParseFiat("10", "USD"), []store.Asset{eth, usdcA}, fixedNow.Add(time.Hour))
	require.ErrorIs(t, err, pricing.ErrRateUnavailable) // no USDC market
	require.Nil(t, qs)
}

func TestPricer_CurrentValueOfALatePayment(t *testing.T) {
	t.Parallel()
	f := newFixture(t, pricing.Config{},
		newScript("a").set(ethUSD, "3000", fixedNow), newScript("b").set(ethUSD, "3000", fixedNow))
	f.refresh()
	v, err := f.p.CurrentValue(context.Background(), eth, store.MustParseAmount("16633333333333334"), "USD")
	require.NoError(t, err)
	require.Equal(t, "49.90 USD", v.String())
	_, err = f.p.CurrentValue(context.Background(), eth, store.NewAmount(1), "XYZ")
	require.ErrorIs(t, err, store.ErrUnknownCurrency)
}

func TestPricer_RunRefreshesUntilCancelled(t *testing.T) {
	t.Parallel()
	calls := make(chan struct{}, 10)
	src := &notifying{script: newScript("a").set(ethUSD, "2500", fixedNow), calls: calls}
	f := newFixture(t, pricing.Config{MinSources: 1, RefreshInterval: 10 * time.Millisecond}, src)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.p.Run(ctx) }()
	<-calls
	<-calls // refreshed twice: once at start, once a tick later
	require.Error(t, f.p.Run(ctx), "a second Run is refused")
	_, err := f.quote("10", "USD", eth)
	require.NoError(t, err)
	cancel()
	require.NoError(t, <-done)
}

type notifying struct {
	*script
	calls chan struct{}
}

func (n *notifying) Rates(ctx context.Context, pairs []pricing.Pair) ([]pricing.Rate, error) {
	defer func() {
		select {
		case n.calls <- struct{}{}:
		default:
		}
	}()
	return n.script.Rates(ctx, pairs)
}

func TestPricer_SlowSourceBoundedBySourceTimeout(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	r.slow("/products/ETH-USD/ticker")
	cfg := exchangeConfig(r)
	cfg.Timeout = time.Minute // the source's own timeout is longer than the Pricer's
	cb, err := pricing.NewCoinbase(cfg)
	require.NoError(t, err)
	f := newFixture(t, pricing.Config{MinSources: 1, SourceTimeout: 50 * time.Millisecond},
		cb, newScript("b").set(ethUSD, "2500", fixedNow))
	err = f.p.Refresh(context.Background())
	require.ErrorIs(t, err, context.DeadlineExceeded)
	q, err := f.quote("10", "USD", eth)
	require.NoError(t, err)
	require.Equal(t, "2500", q.Rate.String())
	require.False(t, f.p.Status().Sources[0].Healthy)
}

func TestPricer_StatusAndAgeMetric(t *testing.T) {
	t.Parallel()
	f := newFixture(t, pricing.Config{},
		newScript("a").set(ethUSD, "2500", fixedNow), newScript("b").set(ethUSD, "2501", fixedNow))
	f.refresh()
	f.clock.Add(30 * time.Second)
	st := f.p.Status()
	require.Len(t, st.Sources, 2)
	require.True(t, st.Sources[0].Healthy)
	require.Equal(t, fixedNow, *st.Sources[0].LastSuccessAt)
	require.Equal(t, 1, st.Sources[0].Rates)
	rs := rate(t, st, "ETH/USD")
	require.True(t, rs.Available)
	require.Equal(t, "2500.5", rs.Rate.String())
	require.Equal(t, int64(30), *rs.AgeSeconds)
	require.Equal(t, 30.0, metricValue(t, f.reg, "pricing_rate_age_seconds", "ETH/USD"))
}

func TestNew_RefusesABadConfiguration(t *testing.T) {
	t.Parallel()
	src := newScript("a")
	for name, cfg := range map[string]pricing.Config{
		"no assets":          {},
		"fiat asset":         {Assets: []string{"EUR"}},
		"unknown currency":   {Assets: []string{"ETH"}, Currencies: []string{"XYZ"}},
		"refresh ≥ max age":  {Assets: []string{"ETH"}, MaxAge: time.Minute, RefreshInterval: time.Minute},
		"negative sources":   {Assets: []string{"ETH"}, MinSources: -1},
		"negative deviation": {Assets: []string{"ETH"}, MaxDeviationBps: -5},
		"two pegs":           {Assets: []string{"USDC"}, Pegs: []pricing.Peg{{Asset: "USDC", Currency: "USD"}, {Asset: "usdc", Currency: "USD"}}},
		"peg to a non-fiat":  {Assets: []string{"USDC"}, Pegs: []pricing.Peg{{Asset: "USDC", Currency: "BTC"}}},
	} {
		_, err := pricing.New([]pricing.Source{src}, cfg)
		require.Error(t, err, name)
	}
	_, err := pricing.New(nil, pricing.Config{Assets: []string{"ETH"}})
	require.Error(t, err)
	_, err = pricing.New([]pricing.Source{newScript("a"), newScript("a")}, pricing.Config{Assets: []string{"ETH"}})
	require.Error(t, err)
}

func TestPricer_DevSourceQuotesOffline(t *testing.T) {
	t.Parallel()
	p, err := pricing.New([]pricing.Source{pricing.Dev()}, pricing.Config{
		Assets: []string{"ETH", "USDC"}, Currencies: []string{"USD", "EUR", "GBP", "JPY"}, MinSources: 1,
	})
	require.NoError(t, err)
	require.NoError(t, p.Refresh(context.Background()))
	for _, c := range []struct{ price, currency, rate string }{
		{"25.00", "USD", "2500"}, {"20.00", "EUR", "2000"}, {"16.00", "GBP", "1600"}, {"3200", "JPY", "320000"},
	} {
		q, err := p.Quote(context.Background(), store.MustParseFiat(c.price, c.currency), eth, time.Now().Add(time.Hour))
		require.NoError(t, err, c)
		require.Equal(t, c.rate, q.Rate.String(), c)
		require.Equal(t, "10000000000000000", q.Amount.String(), c) // 0.01 ETH each
	}
}

// metricValue reads one counter or gauge by its label values, in the
// order of the label names (pair, reason, source).
func metricValue(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var vals []string
			for _, l := range m.GetLabel() {
				vals = append(vals, l.GetValue())
			}
			if strings.Join(vals, ",") == strings.Join(labels, ",") {
				return m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}

func rate(t *testing.T, st pricing.Status, pair string) pricing.RateStatus {
	t.Helper()
	for _, r := range st.Rates {
		if r.Pair == pair {
			return r
		}
	}
	t.Fatalf("no %s in the status", pair)
	return pricing.RateStatus{}
}

func observation(t *testing.T, st pricing.Status, pair, source string) pricing.ObservationStatus {
	t.Helper()
	for _, o := range rate(t, st, pair).Observations {
		if o.Source == source {
			return o
		}
	}
	t.Fatalf("no %s observation of %s", source, pair)
	return pricing.ObservationStatus{}
}

// TestPricer_EvaluationFollowsTheClockBetweenRefreshes checks that what a
// quote sees changes as observations age out or come of age, with no
// refresh in between (evaluations are cached until then).
func TestPricer_EvaluationFollowsTheClockBetweenRefreshes(t *testing.T) {
	t.Parallel()
	a := newScript("a").set(ethUSD, "2500", fixedNow)
	b := newScript("b").set(ethUSD, "2504", fixedNow.Add(-100*time.Second))
	c := newScript("c").set(ethUSD, "2502", fixedNow.Add(2*time.Minute)) // a clock running ahead
	f := newFixture(t, pricing.Config{MinSources: 1, MaxAge: 2 * time.Minute}, a, b, c)
	f.refresh()
	q, err := f.quote("10", "USD", eth)
	require.NoError(t, err)
	require.Equal(t, "2502", q.Rate.String()) // a and b; c is in the future

	f.clock.Add(61 * time.Second) // c comes of age; b (161 s) ages out
	q, err = f.quote("10", "USD", eth)
	require.NoError(t, err)
	require.Equal(t, "2501", q.Rate.String()) // a and c
	require.Equal(t, []string{"a", "c"}, []string{q.Sources[0].Name, q.Sources[1].Name})
}

func TestPricer_RefreshCancelledRecordsNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, pricing.Config{MinSources: 1}, newScript("a").set(ethUSD, "2500", fixedNow))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, f.p.Refresh(ctx), context.Canceled)
	require.Nil(t, f.p.Status().Sources[0].LastAttemptAt)
	_, err := f.quote("10", "USD", eth)
	require.ErrorIs(t, err, pricing.ErrRateUnavailable)
}
