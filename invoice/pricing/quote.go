package pricing

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/evmpay/evmpay/store"
)

// Quote locks price in asset until expiresAt: the amount to pay in the
// asset's base units (rounded up, store.QuoteAmount), the rate, the
// observations behind it. It reads only the rates in memory; an
// *UnavailableError (ErrRateUnavailable) says when to try again.
func (p *Pricer) Quote(ctx context.Context, price store.Fiat, asset store.Asset, expiresAt time.Time) (store.Quote, error) {
	now := p.cfg.Now()
	sym, err := p.check(price, asset)
	if err != nil {
		return store.Quote{}, err
	}
	if !expiresAt.After(now) {
		return store.Quote{}, fmt.Errorf("pricing: quote expiring at %s, before now", expiresAt.UTC().Format(time.RFC3339))
	}
	p.mu.RLock()
	l, err := p.price(sym, price.Currency.Code, now)
	p.mu.RUnlock()
	if err != nil {
		p.m.unavailable.WithLabelValues(sym, price.Currency.Code).Inc()
		return store.Quote{}, err
	}
	amount, err := store.QuoteAmount(price, l.value, asset.Decimals)
	if err != nil {
		return store.Quote{}, fmt.Errorf("pricing: %w", err)
	}
	if l.stale {
		p.m.stale.WithLabelValues(sym, price.Currency.Code).Inc()
	}
	return store.Quote{
		Asset: asset, Amount: amount, Price: price, Rate: l.value,
		Pegged: l.pegged, Stale: l.stale, Sources: l.sources,
		CreatedAt: now.UTC(), ExpiresAt: expiresAt.UTC(),
	}, nil
}

// Quotes quotes price in every asset, all or nothing: the first error
// (an unavailable rate, an unknown asset) is returned and no quote with it,
// so that an invoice is created with every accepted asset quoted or not at
// all.
func (p *Pricer) Quotes(ctx context.Context, price store.Fiat, assets []store.Asset, expiresAt time.Time) ([]store.Quote, error) {
	out := make([]store.Quote, 0, len(assets))
	for _, a := range assets {
		q, err := p.Quote(ctx, price, a, expiresAt)
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, nil
}

// CurrentValue is what amount base units of asset are worth now in
// currency, rounded down to the minor unit: the "current" valuation of a
// payment that arrives beyond an invoice's late window, beside the locked
// one (store.Quote.Value).
func (p *Pricer) CurrentValue(ctx context.Context, asset store.Asset, amount store.Amount, currency string) (store.Fiat, error) {
	c, err := store.LookupCurrency(currency)
	if err != nil {
		return store.Fiat{}, err
	}
	sym, err := p.check(store.Fiat{Currency: c, Minor: store.NewAmount(1)}, asset)
	if err != nil {
		return store.Fiat{}, err
	}
	now := p.cfg.Now()
	p.mu.RLock()
	l, err := p.price(sym, c.Code, now)
	p.mu.RUnlock()
	if err != nil {
		p.m.unavailable.WithLabelValues(sym, c.Code).Inc()
		return store.Fiat{}, err
	}
	q := store.Quote{Asset: asset, Price: store.Fiat{Currency: c}, Rate: l.value}
	return q.Value(amount)
}

// Check reports whether price (its currency) and asset can be quoted at
// all, whatever the rates: ErrInvalidPrice for a zero price,
// ErrUnsupportedCurrency, ErrUnknownAsset. Validate a request with it
// before doing anything that must not be done twice.
func (p *Pricer) Check(price store.Fiat, asset store.Asset) error {
	_, err := p.check(price, asset)
	return err
}

func (p *Pricer) check(price store.Fiat, asset store.Asset) (string, error) {
	if price.Minor.IsZero() {
		return "", ErrInvalidPrice
	}
	if !p.currencies[price.Currency.Code] {
		return "", fmt.Errorf("%w: %s (quoted: %s)", ErrUnsupportedCurrency, price.Currency.Code, strings.Join(p.cfg.Currencies, ", "))
	}
	sym := p.Symbol(asset)
	if !p.assets[sym] {
		return "", fmt.Errorf("%w: %s", ErrUnknownAsset, asset.Symbol)
	}
	return sym, nil
}

// Symbol returns the market symbol the Pricer prices asset under.
func (p *Pricer) Symbol(asset store.Asset) string {
	up := strings.ToUpper(asset.Symbol)
	if s, ok := p.cfg.Symbols[up]; ok {
		return s
	}
	return up
}

// Currencies returns the currencies invoices may be priced in.
func (p *Pricer) Currencies() []string { return append([]string(nil), p.cfg.Currencies...) }
