package pricing

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/evmpay/evmpay/store"
)

// Source is where rates come from: an exchange's public API, an on-chain
// price feed, a central bank's reference rates, a fixed table. Implement it
// to add your own; the Pricer calls it from one goroutine at a time, every
// refresh, with a context that carries the refresh's deadline.
//
// Rates returns the rates it has for the pairs asked, each with the time
// the source observed it; pairs it does not quote are left out without an
// error. An error reports what failed (a request, a malformed answer); the
// rates returned beside it are still used, so a source that quotes four
// pairs and fails on one returns three rates and an error.
type Source interface {
	// Name identifies the source in quotes, logs, metrics and the status:
	// short, lower case, unique among a Pricer's sources ("coinbase").
	Name() string
	Rates(ctx context.Context, pairs []Pair) ([]Rate, error)
}

// Pair is a market: Base priced in Quote ("ETH/USD": US dollars per ether;
// "EUR/JPY": yen per euro). Symbols are upper case.
type Pair struct {
	Base, Quote string
}

// String is "BASE/QUOTE".
func (p Pair) String() string { return p.Base + "/" + p.Quote }

// ParsePair reads "ETH/USD" (any case).
func ParsePair(s string) (Pair, error) {
	b, q, ok := strings.Cut(strings.ToUpper(strings.TrimSpace(s)), "/")
	if !ok || b == "" || q == "" || strings.Contains(q, "/") || b == q {
		return Pair{}, fmt.Errorf("pricing: pair %q: want BASE/QUOTE, such as ETH/USD", s)
	}
	return Pair{Base: b, Quote: q}, nil
}

// fiat reports whether both sides are ISO 4217 currencies (an FX pair).
func (p Pair) fiat() bool { return store.IsCurrency(p.Base) && store.IsCurrency(p.Quote) }

// Rate is one observation of a source: Value units of Pair.Quote per
// whole Pair.Base, observed At.
type Rate struct {
	Pair  Pair
	Value store.Decimal
	// At is when the source observed the rate: the exchange's trade time,
	// the feed's updatedAt, the reference date's fixing time; the time the
	// answer arrived when the source gives none.
	At time.Time
	// MaxAge, when set, is how long after At this observation may be used
	// (a Chainlink feed's heartbeat, a daily reference rate's day);
	// zero uses the Pricer's Config.MaxAge.
	MaxAge time.Duration
}
