package pricing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/evmpay/evmpay/store"
)

// KrakenURL is Kraken's public REST API.
const KrakenURL = "https://api.kraken.com"

// krakenSymbols are Kraken's own names for assets whose usual symbol it
// does not use.
var krakenSymbols = map[string]string{"BTC": "XBT"}

// NewKraken returns a source reading Kraken's public ticker, GET
// /0/public/Ticker?pair=ETHUSD: the last trade closed ("c"[0]). Kraken's
// ticker carries no time, so a rate is observed when the answer arrives.
// Kraken answers under its own pair name ("XETHZUSD" for ETHUSD); one pair
// is asked per request, so the one entry of "result" is the answer. No API
// key is needed.
func NewKraken(cfg ExchangeConfig) (Source, error) {
	return newExchange("kraken", KrakenURL, cfg,
		func(p Pair) string {
			b, q := p.Base, p.Quote
			if k, ok := krakenSymbols[b]; ok {
				b = k
			}
			return b + q
		},
		func(ctx context.Context, x *exchange, market string) (store.Decimal, time.Time, error) {
			var t struct {
				Error  []string `json:"error"`
				Result map[string]struct {
					C []string `json:"c"`
				} `json:"result"`
			}
			if err := x.getJSON(ctx, "/0/public/Ticker", url.Values{"pair": {market}}, &t); err != nil {
				return store.Decimal{}, time.Time{}, err
			}
			if len(t.Error) > 0 {
				return store.Decimal{}, time.Time{}, fmt.Errorf("kraken error: %s", snippet([]byte(strings.Join(t.Error, "; "))))
			}
			if len(t.Result) != 1 {
				return store.Decimal{}, time.Time{}, fmt.Errorf("want one market in the answer, got %d", len(t.Result))
			}
			var last []string
			for _, r := range t.Result {
				last = r.C
			}
			if len(last) == 0 {
				return store.Decimal{}, time.Time{}, errors.New("no last trade (c) in the answer")
			}
			v, err := price("last trade", last[0])
			return v, time.Time{}, err
		})
}
