package pricing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/evmpay/evmpay/store"
)

// CoinbaseURL is the public REST API of Coinbase Exchange.
const CoinbaseURL = "https://api.exchange.coinbase.com"

// NewCoinbase returns a source reading Coinbase Exchange's public product
// ticker, GET /products/{product_id}/ticker (product "ETH-USD"): the last
// trade's "price", observed at its "time". No API key is needed.
func NewCoinbase(cfg ExchangeConfig) (Source, error) {
	return newExchange("coinbase", CoinbaseURL, cfg,
		func(p Pair) string { return p.Base + "-" + p.Quote },
		func(ctx context.Context, x *exchange, market string) (store.Decimal, time.Time, error) {
			var t struct {
				Price string `json:"price"`
				Time  string `json:"time"`
			}
			if err := x.getJSON(ctx, "/products/"+url.PathEscape(market)+"/ticker", nil, &t); err != nil {
				return store.Decimal{}, time.Time{}, err
			}
			v, err := price("price", t.Price)
			if err != nil {
				return store.Decimal{}, time.Time{}, err
			}
			if t.Time == "" {
				return store.Decimal{}, time.Time{}, errors.New("no time in the answer")
			}
			at, err := time.Parse(time.RFC3339Nano, t.Time)
			if err != nil {
				return store.Decimal{}, time.Time{}, fmt.Errorf("time %q: %w", snippet([]byte(t.Time)), err)
			}
			return v, at, nil
		})
}
