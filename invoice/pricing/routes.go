package pricing

import (
	"fmt"
	"slices"
	"strings"
)

// PairQuoter is implemented by a Source that can tell, without asking
// anyone, whether it quotes a pair: the exchanges (their Quotes or
// Markets), the ECB (EUR in the currencies of its daily file), Chainlink
// (its feeds) and Fixed (its table). Pricer.CheckRoutes counts on it; a
// Source that does not implement it is taken to quote every pair.
type PairQuoter interface {
	QuotesPair(Pair) bool
}

// Shortfall is a pair that a route needs and too few of the Pricer's
// sources quote.
type Shortfall struct {
	Pair Pair
	// EitherWay is set for a fiat rate, which the Pricer also takes
	// inverted (USD/EUR = 1 ÷ EUR/USD): either pair would do.
	EitherWay bool
	// Sources are the sources that quote it (fewer than Need).
	Sources []string
	// Need is how many must agree on its rate, and Setting the Config
	// field that says so: "MinSources" (a crypto pair) or "FXMinSources".
	Need    int
	Setting string
}

func (s Shortfall) String() string {
	pair := s.Pair.String()
	if s.EitherWay {
		pair += " or " + Pair{s.Pair.Quote, s.Pair.Base}.String()
	}
	by := "no source"
	if len(s.Sources) > 0 {
		by = "only " + strings.Join(s.Sources, ", ")
	}
	return fmt.Sprintf("%s is quoted by %s, and %s is %d", pair, by, s.Setting, s.Need)
}

// Unpriced is an asset that can never be priced in a currency with the
// Pricer's sources, and the pairs its routes lack.
type Unpriced struct {
	Asset, Currency string
	// Peg is the currency the asset is pegged to, when it is a
	// stablecoin: its routes all go through its market in that currency.
	Peg string
	// Lacking are the pairs that too few sources quote, on every route
	// the Pricer could take (direct, through each bridge, the peg crossed
	// into the currency): supplying those of one route makes it work.
	Lacking []Shortfall
}

func (u Unpriced) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s can never be priced in %s with these sources", u.Asset, u.Currency)
	if u.Peg != "" {
		fmt.Fprintf(&b, " (it is pegged to %s)", u.Peg)
	}
	b.WriteString(": ")
	for i, s := range u.Lacking {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(s.String())
	}
	return b.String()
}

// RouteError is CheckRoutes' error: every asset and currency without a
// route.
type RouteError struct {
	Unpriced []Unpriced
}

func (e *RouteError) Error() string {
	lines := make([]string, len(e.Unpriced))
	for i, u := range e.Unpriced {
		lines[i] = u.String()
	}
	return "pricing: " + strings.Join(lines, "\npricing: ")
}

// CheckRoutes reports, before any rate is fetched, every asset the Pricer
// could never price in one of its currencies: each route it would take
// (the direct market, a bridge currency crossed into the currency, a
// stablecoin's peg crossed into the currency; see Quote) needs a pair
// that fewer of its sources quote than MinSources (a crypto pair) or
// FXMinSources (a fiat pair) require. Such a Pricer answers
// ErrRateUnavailable for that asset and currency forever — a
// configuration mistake that looks like an outage — so a host calls
// CheckRoutes at start. Sources that do not implement PairQuoter are
// counted as quoting every pair. The error is a *RouteError; nil when
// every asset has a route to every currency.
func (p *Pricer) CheckRoutes() error {
	quoters := map[Pair][]string{}
	for _, pr := range p.pairs {
		for _, s := range p.sources {
			if q, ok := s.(PairQuoter); !ok || q.QuotesPair(pr) {
				quoters[pr] = append(quoters[pr], s.Name())
			}
		}
	}
	var e RouteError
	for _, a := range p.cfg.Assets {
		for _, c := range p.cfg.Currencies {
			r := &routeCheck{p: p, quoters: quoters}
			if r.price(a, c) {
				continue
			}
			u := Unpriced{Asset: a, Currency: c, Lacking: r.lacking}
			if peg, ok := p.pegs[a]; ok {
				u.Peg = peg.Currency
			}
			e.Unpriced = append(e.Unpriced, u)
		}
	}
	if len(e.Unpriced) == 0 {
		return nil
	}
	return &e
}

// routeCheck walks the routes of resolve.go over what the sources could
// quote instead of what they answered, noting the pairs that fall short.
type routeCheck struct {
	p       *Pricer
	quoters map[Pair][]string
	lacking []Shortfall
}

func (r *routeCheck) need(pr Pair) (int, string) {
	if pr.fiat() {
		return r.p.cfg.FXMinSources, "FXMinSources"
	}
	return r.p.cfg.MinSources, "MinSources"
}

// enough: pr is asked of the sources and enough of them quote it.
func (r *routeCheck) enough(pr Pair) bool {
	n, _ := r.need(pr)
	return slices.Contains(r.p.pairs, pr) && len(r.quoters[pr]) >= n
}

func (r *routeCheck) lack(pr Pair, eitherWay bool) {
	for _, s := range r.lacking {
		if s.Pair == pr || s.EitherWay && eitherWay && s.Pair == (Pair{pr.Quote, pr.Base}) {
			return
		}
	}
	n, setting := r.need(pr)
	r.lacking = append(r.lacking, Shortfall{Pair: pr, EitherWay: eitherWay, Sources: r.quoters[pr], Need: n, Setting: setting})
}

func (r *routeCheck) direct(pr Pair) bool {
	if r.enough(pr) {
		return true
	}
	r.lack(pr, false)
	return false
}

// fxLeg is fxLeg of resolve.go: base in quote, either way round. The
// shortfall names the way more sources quote (base/quote on a tie).
func (r *routeCheck) fxLeg(base, quote string) bool {
	pr, inv := Pair{base, quote}, Pair{quote, base}
	if r.enough(pr) || r.enough(inv) {
		return true
	}
	if len(r.quoters[inv]) > len(r.quoters[pr]) {
		pr = inv
	}
	r.lack(pr, true)
	return false
}

// fx is fx of resolve.go.
func (r *routeCheck) fx(base, quote string) bool {
	if base == quote || r.fxLeg(base, quote) {
		return true
	}
	for _, hub := range r.p.cfg.Bridges {
		if hub == base || hub == quote {
			continue
		}
		toQuote, toBase := r.fxLeg(hub, quote), r.fxLeg(hub, base)
		if toQuote && toBase {
			return true
		}
	}
	return false
}

// price is price and market of resolve.go.
func (r *routeCheck) price(asset, currency string) bool {
	if peg, ok := r.p.pegs[asset]; ok {
		m, f := r.direct(Pair{asset, peg.Currency}), r.fx(peg.Currency, currency)
		return m && f
	}
	if r.direct(Pair{asset, currency}) {
		return true
	}
	for _, b := range r.p.cfg.Bridges {
		if b == currency {
			continue
		}
		m, f := r.direct(Pair{asset, b}), r.fx(b, currency)
		if m && f {
			return true
		}
	}
	return false
}
