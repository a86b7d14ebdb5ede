package pricing

import (
	"slices"
	"strings"
	"time"

	"github.com/evmpay/evmpay/store"
)

// leg is a resolved rate with what it was made from.
type leg struct {
	value   store.Decimal
	sources []store.QuoteSource
	stale   bool // from a last good rate
	pegged  bool
}

// times multiplies two legs (rounded to sigDigits unless one is 1).
func (l leg) times(o leg) (leg, error) {
	v, err := mul(l.value, o.value)
	if err != nil {
		return leg{}, err
	}
	return leg{value: v, sources: slices.Concat(l.sources, o.sources), stale: l.stale || o.stale, pegged: l.pegged}, nil
}

var one = store.MustParseDecimal("1")

// direct is pair's rate now: verified from the observations in memory, or
// else its last good rate while younger than MaxAge. The reason says why
// there is none. Callers hold p.mu.
func (p *Pricer) direct(pair Pair, now time.Time) (leg, string) {
	ev := p.evaluate(pair, now)
	if ev.ok {
		return leg{value: ev.value, sources: quoteSources(ev.used)}, ""
	}
	if g, ok := p.good[pair]; ok && now.Sub(g.at) <= p.cfg.MaxAge {
		return leg{value: g.value, sources: g.sources, stale: true}, ""
	}
	if _, any := p.readings[pair]; !any {
		return leg{}, pair.String() + ": no source"
	}
	return leg{}, ev.reason
}

// fxLeg is base in quote from a direct rate either way round (USD/EUR is
// 1 ÷ EUR/USD).
func (p *Pricer) fxLeg(base, quote string, now time.Time) (leg, string) {
	l, why := p.direct(Pair{base, quote}, now)
	if why == "" {
		return l, ""
	}
	inv, why2 := p.direct(Pair{quote, base}, now)
	if why2 != "" {
		return leg{}, why + "; " + why2
	}
	v, err := quo(one, inv.value)
	if err != nil {
		return leg{}, err.Error()
	}
	inv.value = v
	return inv, ""
}

// fx is the rate of fiat currency base in quote: direct, inverted, or
// crossed through a bridge currency (USD/JPY = EUR/JPY ÷ EUR/USD).
func (p *Pricer) fx(base, quote string, now time.Time) (leg, string) {
	if base == quote {
		return leg{value: one}, ""
	}
	l, why := p.fxLeg(base, quote, now)
	if why == "" {
		return l, ""
	}
	reasons := []string{why}
	for _, hub := range p.cfg.Bridges {
		if hub == base || hub == quote {
			continue
		}
		toQuote, w1 := p.fxLeg(hub, quote, now)
		toBase, w2 := p.fxLeg(hub, base, now)
		if w1 != "" || w2 != "" {
			reasons = append(reasons, strings.Trim(w1+"; "+w2, "; "))
			continue
		}
		v, err := quo(toQuote.value, toBase.value)
		if err != nil {
			return leg{}, err.Error()
		}
		return leg{value: v, sources: slices.Concat(toQuote.sources, toBase.sources), stale: toQuote.stale || toBase.stale}, ""
	}
	return leg{}, strings.Join(reasons, "; ")
}

// market is asset's market rate in currency: direct, or through a bridge
// (ETH/JPY = ETH/USD × USD/JPY), bridges in order.
func (p *Pricer) market(asset, currency string, now time.Time) (leg, string) {
	l, why := p.direct(Pair{asset, currency}, now)
	if why == "" {
		return l, ""
	}
	reasons := []string{why}
	for _, b := range p.cfg.Bridges {
		if b == currency {
			continue
		}
		a, w := p.direct(Pair{asset, b}, now)
		if w != "" {
			reasons = append(reasons, w)
			continue
		}
		f, w := p.fx(b, currency, now)
		if w != "" {
			reasons = append(reasons, w)
			continue
		}
		out, err := a.times(f)
		if err != nil {
			return leg{}, err.Error()
		}
		return out, ""
	}
	return leg{}, strings.Join(dedupe(reasons), "; ")
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		for _, part := range strings.Split(v, "; ") {
			if part != "" && !seen[part] {
				seen[part] = true
				out = append(out, part)
			}
		}
	}
	return out
}

// price resolves asset (market symbol) in currency at now, pegs applied.
// Callers hold p.mu.
func (p *Pricer) price(asset, currency string, now time.Time) (leg, error) {
	unavailable := func(reason string, depegged bool) error {
		return &UnavailableError{Asset: asset, Currency: currency, Reason: reason, RetryAfter: p.retryAfter(now), Depegged: depegged}
	}
	peg, pegged := p.pegs[asset]
	if !pegged {
		l, why := p.market(asset, currency, now)
		if why != "" {
			return leg{}, unavailable(why, false)
		}
		return l, nil
	}
	// A stablecoin: its market rate in its peg currency decides.
	m, why := p.direct(Pair{asset, peg.Currency}, now)
	if why != "" {
		return leg{}, unavailable(why, false)
	}
	if !deviates(m.value, peg.Value, peg.BandBps) {
		m.value, m.pegged = peg.Value, true
	} else if peg.Outside == PegRefuse {
		return leg{}, unavailable(asset+"/"+peg.Currency+" at "+m.value.String()+" is off its peg of "+peg.Value.String(), true)
	}
	f, why := p.fx(peg.Currency, currency, now)
	if why != "" {
		return leg{}, unavailable(why, false)
	}
	if peg.Currency == currency {
		return m, nil
	}
	return m.times(f)
}

// retryAfter is the time to the next refresh, at least a second.
func (p *Pricer) retryAfter(now time.Time) time.Duration {
	d := p.cfg.RefreshInterval
	if n := p.next.Load(); n != 0 {
		d = time.Unix(0, n).Sub(now)
	}
	return max(d.Round(time.Second), time.Second)
}
