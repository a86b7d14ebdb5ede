package pricing

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/evmpay/evmpay/store"
)

// ExchangeConfig configures an exchange's public price source (NewCoinbase,
// NewKraken, NewBitstamp). The zero value reads the exchange's public
// production API.
type ExchangeConfig struct {
	// BaseURL is the API's root. Defaults to the exchange's public API
	// (see each constructor); tests point it at a local server.
	BaseURL string
	// Client sends the requests. Defaults to a client with Timeout.
	Client *http.Client
	// Timeout bounds each request. Defaults to 5 s.
	Timeout time.Duration
	// Quotes are the currencies this source is asked for: a pair is
	// quoted when its base is not a fiat currency and its quote is one of
	// these. Defaults to USD, EUR and GBP.
	Quotes []string
	// Markets, when set, replaces the rule above: exactly these pairs are
	// quoted, each under the exchange's own market id ("ETH-USD" on
	// Coinbase, "XBTUSD" on Kraken, "ethusd" on Bitstamp). Defaults to
	// none: market ids are derived from the pair.
	Markets map[Pair]string
	// UserAgent is sent with every request. Defaults to "evmpay-pricing/1".
	UserAgent string
	// Now is the clock for answers that carry no time. Defaults to time.Now.
	Now func() time.Time
}

// maxAnswer bounds the size of an exchange's answer that is read.
const maxAnswer = 1 << 20

// exchange is the source shared by the exchanges: it derives a market id
// per pair, fetches each market with one GET (concurrently) and leaves
// the parsing to read.
type exchange struct {
	name   string
	cfg    ExchangeConfig
	base   *url.URL
	market func(Pair) string
	// read fetches one market and returns its last price and the time the
	// exchange observed it (zero when the answer has none).
	read func(ctx context.Context, x *exchange, market string) (store.Decimal, time.Time, error)
}

func newExchange(name, defaultBase string, cfg ExchangeConfig, market func(Pair) string,
	read func(context.Context, *exchange, string) (store.Decimal, time.Time, error)) (*exchange, error) {
	cfg.BaseURL = cmp.Or(cfg.BaseURL, defaultBase)
	cfg.Timeout = cmp.Or(cfg.Timeout, 5*time.Second)
	if cfg.Quotes == nil {
		cfg.Quotes = []string{"USD", "EUR", "GBP"}
	}
	cfg.UserAgent = cmp.Or(cfg.UserAgent, "evmpay-pricing/1")
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: cfg.Timeout}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("pricing: %s: Timeout must be positive", name)
	}
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("pricing: %s: BaseURL %q is not an http(s) URL", name, cfg.BaseURL)
	}
	base.Path = strings.TrimSuffix(base.Path, "/")
	return &exchange{name: name, cfg: cfg, base: base, market: market, read: read}, nil
}

func (x *exchange) Name() string { return x.name }

// marketOf returns the exchange's market id for p, or "" when p is not
// quoted here.
func (x *exchange) marketOf(p Pair) string {
	if x.cfg.Markets != nil {
		return x.cfg.Markets[p]
	}
	if store.IsCurrency(p.Base) {
		return ""
	}
	for _, q := range x.cfg.Quotes {
		if strings.EqualFold(q, p.Quote) {
			return x.market(p)
		}
	}
	return ""
}

// QuotesPair implements PairQuoter: a pair with a market id here.
func (x *exchange) QuotesPair(p Pair) bool { return x.marketOf(p) != "" }

// Rates implements Source: one request per quoted pair, concurrently.
func (x *exchange) Rates(ctx context.Context, pairs []Pair) ([]Rate, error) {
	var (
		mu    sync.Mutex
		out   []Rate
		errs  []error
		group sync.WaitGroup
	)
	for _, p := range pairs {
		m := x.marketOf(p)
		if m == "" {
			continue
		}
		group.Go(func() {
			v, at, err := x.read(ctx, x, m)
			if err == nil && v.IsZero() {
				err = errors.New("price is zero")
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w", x.name, m, err))
				return
			}
			if at.IsZero() {
				at = x.cfg.Now()
			}
			out = append(out, Rate{Pair: p, Value: v, At: at.UTC()})
		})
	}
	group.Wait()
	return out, errors.Join(errs...)
}

// getJSON sends GET base+path?query and decodes a 200 answer into v. Any
// other status is an error carrying the start of the body.
func (x *exchange) getJSON(ctx context.Context, path string, query url.Values, v any) error {
	u := *x.base
	u.Path += path
	u.RawQuery = query.Encode()
	ctx, cancel := context.WithTimeout(ctx, x.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", x.cfg.UserAgent)
	resp, err := x.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	if len(body) > maxAnswer {
		return fmt.Errorf("answer larger than %d bytes", maxAnswer)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, snippet(body))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("malformed answer: %w", err)
	}
	return nil
}

// snippet is the start of a body for an error message, on one line.
func snippet(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// price parses a price field: a JSON string of a positive plain decimal.
func price(field, s string) (store.Decimal, error) {
	if s == "" {
		return store.Decimal{}, fmt.Errorf("no %s in the answer", field)
	}
	d, err := store.ParseDecimal(s)
	if err != nil {
		return store.Decimal{}, fmt.Errorf("%s %q: %w", field, snippet([]byte(s)), err)
	}
	return d, nil
}
