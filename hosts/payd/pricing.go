package main

import (
	"cmp"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/invoice/pricing"
	"github.com/evmpay/evmpay/store"
)

// pricingConfig is fiat pricing's configuration (docs/pricing.md): the
// rate sources and the Pricer's knobs. The zero value turns fiat pricing
// off (an invoice with a price is refused with unsupported_currency).
type pricingConfig struct {
	// dev prices offline with pricing.Dev() (payd dev).
	dev bool
	// sources are the PRICING_SOURCES entries: coinbase, kraken,
	// bitstamp, ecb, chainlink feeds.
	sources []string
	// urls override the exchanges' and the ECB's public URLs
	// (PRICING_<NAME>_URL), for a proxy or a test's replay server.
	urls map[string]string
	// feeds are the Chainlink feeds (chainlink:BASE/QUOTE@0xADDRESS[@MAXAGE]).
	feeds []pricing.ChainlinkFeed
	// currencies invoices may be priced in (PRICING_CURRENCIES); nil: the
	// Pricer's default, USD and EUR.
	currencies []string
	// assets are the service assets priced (PRICING_ASSETS, symbols); nil:
	// every asset of the service.
	assets []string
	// symbols map an asset's symbol to its market symbol
	// (PRICING_SYMBOLS=WETH=ETH,…).
	symbols map[string]string
	// maxAge, refresh: PRICING_MAX_AGE, PRICING_REFRESH (0: defaults).
	maxAge, refresh time.Duration
	// depeg is what a stablecoin off its peg gets (PRICING_DEPEG:
	// market, the default, or refuse).
	depeg pricing.PegPolicy
}

// on reports whether fiat pricing is configured.
func (c pricingConfig) on() bool { return c.dev || len(c.sources) > 0 }

// exchanges are the sources PRICING_SOURCES names by name alone.
var exchanges = map[string]func(pricing.ExchangeConfig) (pricing.Source, error){
	"coinbase": pricing.NewCoinbase, "kraken": pricing.NewKraken, "bitstamp": pricing.NewBitstamp,
}

// readPricingEnv reads serve's PRICING_* variables. With PRICING_SOURCES
// set, at least two independent crypto sources are required (the ECB
// quotes no crypto asset): a single source would price every invoice alone.
func readPricingEnv(getenv func(string) string) (pricingConfig, error) {
	var c pricingConfig
	list := strings.TrimSpace(getenv("PRICING_SOURCES"))
	if list == "" {
		for _, name := range []string{"PRICING_CURRENCIES", "PRICING_ASSETS", "PRICING_SYMBOLS", "PRICING_MAX_AGE", "PRICING_REFRESH", "PRICING_DEPEG"} {
			if getenv(name) != "" {
				return c, fmt.Errorf("%s is set but PRICING_SOURCES is not: name the rate sources (e.g. coinbase,kraken,ecb) or unset it", name)
			}
		}
		return c, nil
	}
	var errs []error
	crypto := map[string]bool{}
	c.urls = map[string]string{}
	for _, entry := range strings.Split(list, ",") {
		entry = strings.TrimSpace(entry)
		name, spec, _ := strings.Cut(entry, ":")
		name = strings.ToLower(name)
		switch {
		case exchanges[name] != nil || name == "ecb":
			if spec != "" || contains(c.sources, name) {
				errs = append(errs, fmt.Errorf("PRICING_SOURCES: %q: %s is named once, without parameters", entry, name))
				continue
			}
			c.sources = append(c.sources, name)
			if name != "ecb" {
				crypto[name] = true
			}
			if u := getenv("PRICING_" + strings.ToUpper(name) + "_URL"); u != "" {
				c.urls[name] = u
			}
		case name == "chainlink":
			f, err := parseFeed(spec)
			if err != nil {
				errs = append(errs, fmt.Errorf("PRICING_SOURCES: %q: %w", entry, err))
				continue
			}
			c.feeds = append(c.feeds, f)
			if !contains(c.sources, "chainlink") {
				c.sources = append(c.sources, "chainlink")
			}
			crypto["chainlink"] = true
		default:
			errs = append(errs, fmt.Errorf("PRICING_SOURCES: unknown source %q (want coinbase, kraken, bitstamp, ecb or chainlink:BASE/QUOTE@0xFEED[@MAXAGE])", entry))
		}
	}
	if len(errs) == 0 && len(crypto) < 2 {
		errs = append(errs, fmt.Errorf("PRICING_SOURCES names %d crypto rate source(s); fiat pricing needs at least two independent ones (coinbase, kraken, bitstamp, chainlink feeds), so that no single source prices an invoice alone", len(crypto)))
	}
	csv := func(name string) []string {
		var out []string
		for _, v := range strings.Split(getenv(name), ",") {
			if v = strings.ToUpper(strings.TrimSpace(v)); v != "" {
				out = append(out, v)
			}
		}
		return out
	}
	c.currencies, c.assets = csv("PRICING_CURRENCIES"), csv("PRICING_ASSETS")
	for _, code := range c.currencies {
		if !store.IsCurrency(code) {
			errs = append(errs, fmt.Errorf("PRICING_CURRENCIES: %q is not an ISO 4217 currency", code))
		}
	}
	if s := getenv("PRICING_SYMBOLS"); s != "" {
		c.symbols = map[string]string{}
		for _, kv := range strings.Split(s, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || k == "" || v == "" {
				errs = append(errs, fmt.Errorf("PRICING_SYMBOLS: %q: want SYMBOL=MARKET, e.g. WETH=ETH", kv))
				continue
			}
			c.symbols[k] = v
		}
	}
	dur := func(name string, dst *time.Duration) {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				errs = append(errs, fmt.Errorf("%s=%q: want a positive duration, e.g. 2m", name, v))
			}
			*dst = d
		}
	}
	dur("PRICING_MAX_AGE", &c.maxAge)
	dur("PRICING_REFRESH", &c.refresh)
	switch v := getenv("PRICING_DEPEG"); v {
	case "", "market":
	case "refuse":
		c.depeg = pricing.PegRefuse
	default:
		errs = append(errs, fmt.Errorf("PRICING_DEPEG=%q: want market or refuse", v))
	}
	return c, errors.Join(errs...)
}

// parseFeed reads a Chainlink feed: BASE/QUOTE@0xADDRESS[@MAXAGE].
func parseFeed(spec string) (pricing.ChainlinkFeed, error) {
	parts := strings.Split(spec, "@")
	if len(parts) < 2 || len(parts) > 3 {
		return pricing.ChainlinkFeed{}, errors.New("want chainlink:BASE/QUOTE@0xFEED[@MAXAGE], e.g. chainlink:ETH/USD@0x5f4e…8419@1h5m")
	}
	pair, err := pricing.ParsePair(parts[0])
	if err != nil {
		return pricing.ChainlinkFeed{}, err
	}
	addr, err := store.ParseAddress(parts[1])
	if err != nil || addr == (common.Address{}) {
		return pricing.ChainlinkFeed{}, fmt.Errorf("feed address %q: want a 0x address", parts[1])
	}
	f := pricing.ChainlinkFeed{Pair: pair, Address: addr}
	if len(parts) == 3 {
		if f.MaxAge, err = time.ParseDuration(parts[2]); err != nil || f.MaxAge <= 0 {
			return pricing.ChainlinkFeed{}, fmt.Errorf("max age %q: want a duration, the feed's heartbeat plus a margin, e.g. 1h5m", parts[2])
		}
	}
	return f, nil
}

// buildPricer makes the Pricer of the configuration, pricing the service's
// assets (the native coin and the tokens, or PRICING_ASSETS), its metrics
// on payd's registry; nil when fiat pricing is off.
func (a *app) buildPricer(chain ethereum.ContractCaller) (*pricing.Pricer, error) {
	c := a.cfg.pricing
	if !c.on() {
		return nil, nil
	}
	var sources []pricing.Source
	minSources := 0
	if c.dev {
		sources, minSources = []pricing.Source{pricing.Dev()}, 1
	}
	for _, name := range c.sources {
		var (
			s   pricing.Source
			err error
		)
		switch {
		case exchanges[name] != nil:
			s, err = exchanges[name](pricing.ExchangeConfig{BaseURL: c.urls[name]})
		case name == "ecb":
			s, err = pricing.NewECB(pricing.ECBConfig{BaseURL: c.urls[name]})
		case name == "chainlink":
			s, err = pricing.NewChainlink(chain, pricing.ChainlinkConfig{Feeds: c.feeds})
		}
		if err != nil {
			return nil, fmt.Errorf("pricing source %s: %w", name, err)
		}
		sources = append(sources, s)
	}
	assets := c.assets
	if assets == nil {
		// Every chain's coin and tokens (an invoice quotes assets of
		// other chains too: docs/chains.md).
		assets = append(assets, strings.ToUpper(cmp.Or(a.cfg.chain.nativeSymbol, invoice.DefaultNativeSymbol)))
		for _, as := range a.assets {
			assets = append(assets, strings.ToUpper(as.Symbol))
		}
		for _, u := range a.others {
			assets = append(assets, strings.ToUpper(cmp.Or(u.spec.nativeSymbol, invoice.DefaultNativeSymbol)))
			for _, as := range u.assets {
				assets = append(assets, strings.ToUpper(as.Symbol))
			}
		}
	}
	var market []string
	for _, s := range assets {
		m := s
		if v, ok := c.symbols[s]; ok {
			m = strings.ToUpper(v)
		}
		if !contains(market, m) {
			market = append(market, m)
		}
	}
	pegs := pricing.DefaultPegs()
	for i := range pegs {
		pegs[i].Outside = c.depeg
	}
	currencies := c.currencies
	if c.dev && currencies == nil {
		currencies = []string{"USD", "EUR", "GBP", "CHF", "JPY"} // the dev table's
	}
	p, err := pricing.New(sources, pricing.Config{
		Assets:          market,
		Symbols:         c.symbols,
		Currencies:      currencies,
		MinSources:      minSources,
		MaxAge:          c.maxAge,
		RefreshInterval: c.refresh,
		Pegs:            pegs,
		Logger:          a.log.With("component", "pricing"),
		Registerer:      a.metrics(),
	})
	if err != nil {
		return nil, err
	}
	// An asset the sources can never price in a currency would answer
	// every such invoice 503 rate_unavailable, forever: a configuration
	// mistake that looks like an outage, refused here instead.
	if err := p.CheckRoutes(); err != nil {
		return nil, routesError(err, c)
	}
	return p, nil
}

// routesError adds to CheckRoutes' error which of payd's sources would
// supply each pair missing, and the settings to change.
func routesError(err error, c pricingConfig) error {
	var re *pricing.RouteError
	if !errors.As(err, &re) {
		return err
	}
	// payd's sources as configured by default: what they would quote.
	candidates := map[string]pricing.Source{}
	for name, mk := range exchanges {
		if s, err := mk(pricing.ExchangeConfig{}); err == nil {
			candidates[name] = s
		}
	}
	if s, err := pricing.NewECB(pricing.ECBConfig{}); err == nil {
		candidates["ecb"] = s
	}
	names := make([]string, 0, len(candidates))
	for name := range candidates {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "PRICING_SOURCES=%s: %s", strings.Join(c.sources, ","), err)
	seen := map[pricing.Pair]bool{}
	for _, u := range re.Unpriced {
		for _, s := range u.Lacking {
			if seen[s.Pair] {
				continue
			}
			seen[s.Pair] = true
			pairs := []pricing.Pair{s.Pair}
			if s.EitherWay {
				pairs = append(pairs, pricing.Pair{Base: s.Pair.Quote, Quote: s.Pair.Base})
			}
			// The pair as the sources that would give it name it (the
			// ECB quotes EUR/USD, not USD/EUR).
			shown := pairs[0]
			var more []string
			for _, name := range names {
				q, ok := candidates[name].(pricing.PairQuoter)
				if !ok || contains(c.sources, name) {
					continue
				}
				for _, pr := range pairs {
					if q.QuotesPair(pr) {
						more, shown = append(more, name), pr
						break
					}
				}
			}
			more = append(more, "a chainlink:"+shown.String()+"@0xFEED feed")
			fmt.Fprintf(&b, "\nto quote %s: add %s to PRICING_SOURCES", shown, strings.Join(more, " or "))
		}
	}
	b.WriteString("\nor leave the currency out of PRICING_CURRENCIES (default USD,EUR), or the asset out of PRICING_ASSETS")
	return errors.New(b.String())
}
