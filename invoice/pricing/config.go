package pricing

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/evmpay/evmpay/store"
)

// PegPolicy is what a Pricer does with a stablecoin whose market rate is
// outside its band.
type PegPolicy int

const (
	// PegUseMarket quotes it at its market rate.
	PegUseMarket PegPolicy = iota
	// PegRefuse refuses to quote it (ErrDepegged, an ErrRateUnavailable).
	PegRefuse
)

// Peg declares a stablecoin: quoted at Value in Currency while its market
// rate in Currency is within BandBps of Value.
type Peg struct {
	// Asset is the stablecoin's market symbol ("USDC").
	Asset string
	// Currency is what it is pegged to ("USD").
	Currency string
	// Value is the peg. Defaults to 1.
	Value store.Decimal
	// BandBps is the band around the peg, in basis points of Value.
	// Defaults to 50 (0.5 %).
	BandBps int
	// Outside is the policy off the band. Defaults to PegUseMarket.
	Outside PegPolicy
}

// DefaultPegs are the pegs of Config.Pegs when it is nil: USDC, USDT and
// DAI to 1 USD, EURC to 1 EUR, each with a 0.5 % band, quoted at the
// market rate outside it. A peg applies only to an asset in Config.Assets.
func DefaultPegs() []Peg {
	return []Peg{
		{Asset: "USDC", Currency: "USD"},
		{Asset: "USDT", Currency: "USD"},
		{Asset: "DAI", Currency: "USD"},
		{Asset: "EURC", Currency: "EUR"},
	}
}

// Config configures a Pricer.
type Config struct {
	// Assets are the market symbols of the assets priced ("ETH", "USDC"),
	// as the sources name them. Required.
	Assets []string
	// Symbols maps an invoice asset's symbol (store.Asset.Symbol, any case)
	// to its market symbol when they differ (a chain whose native coin is
	// wrapped ether: "WETH": "ETH"). Defaults to none: the asset's symbol
	// in upper case is its market symbol.
	Symbols map[string]string
	// Currencies are the ISO 4217 currencies invoices may be priced in.
	// Defaults to USD and EUR.
	Currencies []string
	// Bridges are the currencies crypto markets are read in besides the
	// invoice currencies, and through which rates are crossed: an invoice
	// in JPY is quoted ETH/USD × USD/JPY, USD/JPY from the FX sources
	// (EUR/JPY ÷ EUR/USD from the ECB). Tried in order. Defaults to USD
	// and EUR.
	Bridges []string
	// MinSources is how many sources must agree on a crypto rate (ETH/USD).
	// `payd serve` requires 2 or more. Defaults to 2.
	MinSources int
	// FXMinSources is how many sources must agree on a fiat rate
	// (EUR/USD). Defaults to 1: the ECB alone.
	FXMinSources int
	// MaxAge is how long after a source observed a rate it may be used,
	// unless the rate carries its own (Rate.MaxAge: a Chainlink feed's
	// heartbeat, the ECB's day); and how long a last good rate stands in
	// when too few sources answer. Defaults to 2 minutes.
	MaxAge time.Duration
	// MaxDeviationBps drops a source further than this from the median of
	// the fresh sources of its pair, in basis points. Defaults to 100 (1 %).
	MaxDeviationBps int
	// Pegs are the stablecoins quoted at their peg. Defaults to
	// DefaultPegs(); an empty, non-nil slice declares none.
	Pegs []Peg
	// RefreshInterval is the time between two refreshes of every source
	// by Run. Must be shorter than MaxAge. Defaults to 15 s.
	RefreshInterval time.Duration
	// SourceTimeout bounds one source's answer in a refresh. Defaults to
	// 10 s.
	SourceTimeout time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// Logger receives dropped sources, failing sources and unavailable
	// rates, each when it starts and when it ends. Defaults to a logger
	// that discards everything.
	Logger *slog.Logger
	// Registerer receives the Prometheus collectors. Defaults to a new
	// private registry.
	Registerer prometheus.Registerer
}

// futureSkew is how far in the future a source's observation time may be
// (clocks differ) before it is refused.
const futureSkew = time.Minute

func (c Config) withDefaults() Config {
	if c.Currencies == nil {
		c.Currencies = []string{"USD", "EUR"}
	}
	if c.Bridges == nil {
		c.Bridges = []string{"USD", "EUR"}
	}
	c.MinSources = cmp.Or(c.MinSources, 2)
	c.FXMinSources = cmp.Or(c.FXMinSources, 1)
	c.MaxAge = cmp.Or(c.MaxAge, 2*time.Minute)
	c.MaxDeviationBps = cmp.Or(c.MaxDeviationBps, 100)
	if c.Pegs == nil {
		c.Pegs = DefaultPegs()
	}
	c.RefreshInterval = cmp.Or(c.RefreshInterval, 15*time.Second)
	c.SourceTimeout = cmp.Or(c.SourceTimeout, 10*time.Second)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	up := func(s []string) []string {
		out := make([]string, len(s))
		for i, v := range s {
			out[i] = strings.ToUpper(strings.TrimSpace(v))
		}
		return out
	}
	c.Assets, c.Currencies, c.Bridges = up(c.Assets), up(c.Currencies), up(c.Bridges)
	pegs := make([]Peg, len(c.Pegs))
	for i, p := range c.Pegs {
		p.Asset, p.Currency = strings.ToUpper(p.Asset), strings.ToUpper(p.Currency)
		if p.Value.IsZero() {
			p.Value = store.MustParseDecimal("1")
		}
		p.BandBps = cmp.Or(p.BandBps, 50)
		pegs[i] = p
	}
	c.Pegs = pegs
	symbols := make(map[string]string, len(c.Symbols))
	for k, v := range c.Symbols {
		symbols[strings.ToUpper(k)] = strings.ToUpper(v)
	}
	c.Symbols = symbols
	return c
}

func (c Config) validate() error {
	if len(c.Assets) == 0 {
		return errors.New("pricing: Config.Assets is empty")
	}
	for _, a := range c.Assets {
		if a == "" || strings.Contains(a, "/") || store.IsCurrency(a) {
			return fmt.Errorf("pricing: asset %q: want a market symbol such as ETH", a)
		}
	}
	for _, list := range [][]string{c.Currencies, c.Bridges} {
		for _, code := range list {
			if !store.IsCurrency(code) {
				return fmt.Errorf("pricing: %q is not an ISO 4217 currency", code)
			}
		}
	}
	if len(c.Currencies) == 0 {
		return errors.New("pricing: Config.Currencies is empty")
	}
	switch {
	case c.MinSources < 1 || c.FXMinSources < 1:
		return errors.New("pricing: MinSources and FXMinSources must be at least 1")
	case c.MaxAge <= 0:
		return errors.New("pricing: MaxAge must be positive")
	case c.MaxDeviationBps <= 0:
		return errors.New("pricing: MaxDeviationBps must be positive")
	case c.RefreshInterval <= 0 || c.RefreshInterval >= c.MaxAge:
		return errors.New("pricing: RefreshInterval must be positive and shorter than MaxAge")
	case c.SourceTimeout <= 0:
		return errors.New("pricing: SourceTimeout must be positive")
	}
	seen := map[string]bool{}
	for _, p := range c.Pegs {
		if seen[p.Asset] {
			return fmt.Errorf("pricing: two pegs for %s", p.Asset)
		}
		seen[p.Asset] = true
		if !store.IsCurrency(p.Currency) || p.BandBps < 0 || p.Outside != PegUseMarket && p.Outside != PegRefuse {
			return fmt.Errorf("pricing: peg of %s: want an ISO 4217 currency, a non-negative band and a policy", p.Asset)
		}
	}
	return nil
}
