package pricing

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/evmpay/evmpay/store"
)

// BitstampURL is Bitstamp's public REST API.
const BitstampURL = "https://www.bitstamp.net"

// NewBitstamp returns a source reading Bitstamp's public ticker, GET
// /api/v2/ticker/{currency_pair}/ (pair "ethusd"): the "last" price,
// observed at "timestamp" (Unix seconds, a string). No API key is needed.
func NewBitstamp(cfg ExchangeConfig) (Source, error) {
	return newExchange("bitstamp", BitstampURL, cfg,
		func(p Pair) string { return strings.ToLower(p.Base + p.Quote) },
		func(ctx context.Context, x *exchange, market string) (store.Decimal, time.Time, error) {
			var t struct {
				Last      string `json:"last"`
				Timestamp string `json:"timestamp"`
			}
			if err := x.getJSON(ctx, "/api/v2/ticker/"+url.PathEscape(market)+"/", nil, &t); err != nil {
				return store.Decimal{}, time.Time{}, err
			}
			v, err := price("last", t.Last)
			if err != nil {
				return store.Decimal{}, time.Time{}, err
			}
			sec, err := strconv.ParseInt(t.Timestamp, 10, 64)
			if err != nil || sec <= 0 {
				return store.Decimal{}, time.Time{}, fmt.Errorf("timestamp %q is not Unix seconds", snippet([]byte(t.Timestamp)))
			}
			return v, time.Unix(sec, 0), nil
		})
}
