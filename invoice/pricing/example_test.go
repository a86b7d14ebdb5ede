package pricing_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/evmpay/evmpay/invoice/pricing"
	"github.com/evmpay/evmpay/store"
)

// A Pricer with the offline dev source quotes a euro price in ether and
// in a USD stablecoin, then values payments at the locked quotes.
func Example() {
	ctx := context.Background()
	p, err := pricing.New([]pricing.Source{pricing.Dev()}, pricing.Config{
		Assets:     []string{"ETH", "USDC"},
		Currencies: []string{"EUR", "USD"},
		MinSources: 1, // the dev source alone; production asks for 2 or more
	})
	if err != nil {
		panic(err)
	}
	_ = p.Refresh(ctx) // in a service: go p.Run(ctx)

	price := store.MustParseFiat("49.90", "EUR")
	usdc := store.Asset{Symbol: "USDC", Address: &usdcTok, Decimals: 6}
	quotes, err := p.Quotes(ctx, price, []store.Asset{store.NativeAsset("ETH"), usdc}, time.Now().Add(15*time.Minute))
	if err != nil {
		panic(err)
	}
	for _, q := range quotes {
		fmt.Printf("%s: pay %s %s (rate %s EUR, pegged %v)\n", price, q.Asset.Format(q.Amount), q.Asset.Symbol, q.Rate, q.Pegged)
	}

	// The payer sends 20 USDC (16 EUR) and 0.01693 ETH (33.86 EUR): 4 cents
	// short, within a 5-cent tolerance.
	paid := []store.AssetAmount{
		{Token: &usdcTok, Amount: store.NewAmount(20_000_000)},
		{Amount: store.MustParseAmount("16930000000000000")},
	}
	value, err := store.ValuePayments(quotes, paid)
	if err != nil {
		panic(err)
	}
	standing, err := store.Assess(price, value, store.Tolerance{Amount: store.MustParseFiat("0.05", "EUR")})
	if err != nil {
		panic(err)
	}
	fmt.Printf("received %s, paid %v, short %s\n", value, standing.Paid, standing.Shortfall)
	// Output:
	// 49.90 EUR: pay 0.02495 ETH (rate 2000 EUR, pegged false)
	// 49.90 EUR: pay 62.375 USDC (rate 0.8 EUR, pegged true)
	// received 49.86 EUR, paid true, short 0.04 EUR
}

// An outage: with no rate to quote from, Quote says when to try again,
// and nothing is created.
func ExampleRetryAfter() {
	down := pricing.NewFixed("empty", nil, nil)
	p, err := pricing.New([]pricing.Source{down}, pricing.Config{Assets: []string{"ETH"}, RefreshInterval: 20 * time.Second})
	if err != nil {
		panic(err)
	}
	_ = p.Refresh(context.Background())
	_, err = p.Quote(context.Background(), store.MustParseFiat("10", "USD"), store.NativeAsset("ETH"), time.Now().Add(time.Hour))
	after, _ := pricing.RetryAfter(err)
	fmt.Println(errors.Is(err, pricing.ErrRateUnavailable), after)
	// Output: true 20s
}
