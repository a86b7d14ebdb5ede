// Package pricing turns fiat prices into locked quotes in crypto assets:
// rate sources, their aggregation, and quote creation. The quote record
// and its valuation (what a payment is worth at a locked quote, tolerance,
// mixed payments) live in package store (store.Quote), so that settlement
// can value payments without importing this package.
//
// Sources (the Source interface, one call returning observations of
// asset/currency pairs with their times):
//
//   - NewCoinbase, NewKraken, NewBitstamp: the exchanges' public ticker
//     endpoints (no API key), base URL configurable;
//   - NewChainlink: Chainlink price feeds on chain (AggregatorV3Interface
//     latestRoundData and decimals through eth_call);
//   - NewECB: the ECB's daily euro reference rates, for the fiat
//     currencies crypto markets do not quote, base URL configurable;
//   - Dev (NewFixed): a fixed offline table for `payd dev`.
//
// A Pricer keeps every source's latest observations in memory (Run
// refreshes them) and quotes from memory only:
//
//	p, err := pricing.New([]pricing.Source{coinbase, kraken, feeds, ecb}, pricing.Config{
//		Assets:     []string{"ETH", "USDC"},
//		Currencies: []string{"EUR", "USD"},
//		Logger:     logger,
//		Registerer: registry,
//	})
//	if err := p.CheckRoutes(); err != nil {
//		// some asset can never be priced in some currency with these sources
//	}
//	go p.Run(ctx)
//	quotes, err := p.Quotes(ctx, store.MustParseFiat("49.90", "EUR"), assets, expiresAt)
//	if after, ok := pricing.RetryAfter(err); ok {
//		// 503 rate_unavailable, Retry-After: after; create nothing
//	}
//
// The rules — median, maximum age, maximum deviation, minimum sources, the
// last good rate, stablecoin pegs, crossing through USD or EUR, rounding —
// are in docs/pricing.md.
package pricing
