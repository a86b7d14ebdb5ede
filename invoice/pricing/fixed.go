package pricing

import (
	"context"
	"time"

	"github.com/evmpay/evmpay/store"
)

// Fixed is a source answering a fixed table of rates, observed whenever
// asked: for development, demos and tests. Never point production at it.
type Fixed struct {
	name  string
	rates map[Pair]store.Decimal
	now   func() time.Time
}

// NewFixed returns a source named name that always answers rates, observed
// at now() (nil: time.Now).
func NewFixed(name string, rates map[Pair]store.Decimal, now func() time.Time) *Fixed {
	if now == nil {
		now = time.Now
	}
	cp := make(map[Pair]store.Decimal, len(rates))
	for p, v := range rates {
		cp[p] = v
	}
	return &Fixed{name: name, rates: cp, now: now}
}

// DevRates is the table of the dev source, round numbers chosen so that
// amounts are easy to check by hand: 1 ETH = 2,500 USD, stablecoins at 1
// USD, and the euro at 1.25 USD (so 1 ETH = 2,000 EUR). The fiat rates are
// euro-based like the ECB's; the Pricer crosses them (USD/JPY = 160 ÷
// 1.25 = 128).
var DevRates = map[Pair]store.Decimal{
	{"ETH", "USD"}:  store.MustParseDecimal("2500"),
	{"USDC", "USD"}: store.MustParseDecimal("1"),
	{"USDT", "USD"}: store.MustParseDecimal("1"),
	{"EUR", "USD"}:  store.MustParseDecimal("1.25"),
	{"EUR", "GBP"}:  store.MustParseDecimal("0.8"),
	{"EUR", "CHF"}:  store.MustParseDecimal("1"),
	{"EUR", "JPY"}:  store.MustParseDecimal("160"),
}

// Dev returns the documented offline source of `payd dev`: DevRates,
// named "dev", always fresh. A Pricer with only this source needs
// MinSources 1.
func Dev() *Fixed { return NewFixed("dev", DevRates, nil) }

// Name implements Source.
func (f *Fixed) Name() string { return f.name }

// QuotesPair implements PairQuoter: the pairs of its table.
func (f *Fixed) QuotesPair(p Pair) bool {
	_, ok := f.rates[p]
	return ok
}

// Rates implements Source.
func (f *Fixed) Rates(_ context.Context, pairs []Pair) ([]Rate, error) {
	now := f.now().UTC()
	var out []Rate
	for _, p := range pairs {
		if v, ok := f.rates[p]; ok {
			out = append(out, Rate{Pair: p, Value: v, At: now})
		}
	}
	return out, nil
}
