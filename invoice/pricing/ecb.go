package pricing

import (
	"cmp"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/evmpay/evmpay/store"
)

// ECBURL is the European Central Bank's web site, the base URL of its
// reference-rate files.
const ECBURL = "https://www.ecb.europa.eu"

// ECBDailyPath is the path, under the base URL, of the ECB's file of the
// latest euro foreign exchange reference rates.
const ECBDailyPath = "/stats/eurofxref/eurofxref-daily.xml"

// ECBConfig configures NewECB.
type ECBConfig struct {
	// BaseURL is the root the file is read under (BaseURL + ECBDailyPath),
	// like the exchanges' ExchangeConfig.BaseURL: a proxy or a test's
	// server. Defaults to ECBURL.
	BaseURL string
	// Client sends the request. Defaults to a client with Timeout.
	Client *http.Client
	// Timeout bounds the request. Defaults to 10 s.
	Timeout time.Duration
	// MaxAge is how long a day's rates may be used. The ECB publishes on
	// TARGET working days only, so Thursday's rates stand until Tuesday
	// over Easter. Defaults to 124 hours (five days and four hours).
	MaxAge time.Duration
}

// ECB reads the ECB's daily euro reference rates (EUR/USD, EUR/JPY, …, about
// thirty currencies): the fiat FX source for the currencies crypto markets
// do not quote. It answers pairs whose base is EUR; the Pricer inverts and
// crosses them (USD/JPY = EUR/JPY ÷ EUR/USD). The rates are observed at
// the concertation on their reference date, 14:15 CET (13:15 UTC).
type ECB struct {
	cfg ECBConfig
	url string // BaseURL + ECBDailyPath
}

// NewECB returns the ECB reference-rate source.
func NewECB(cfg ECBConfig) (*ECB, error) {
	cfg.BaseURL = cmp.Or(cfg.BaseURL, ECBURL)
	cfg.Timeout = cmp.Or(cfg.Timeout, 10*time.Second)
	cfg.MaxAge = cmp.Or(cfg.MaxAge, 124*time.Hour)
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: cfg.Timeout}
	}
	if cfg.Timeout < 0 || cfg.MaxAge < 0 {
		return nil, errors.New("pricing: ecb: Timeout and MaxAge must be positive")
	}
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" || base.RawQuery != "" {
		return nil, fmt.Errorf("pricing: ecb: BaseURL %q is not an http(s) URL without a query", cfg.BaseURL)
	}
	base.Path = strings.TrimSuffix(base.Path, "/") + ECBDailyPath
	return &ECB{cfg: cfg, url: base.String()}, nil
}

// Name implements Source.
func (e *ECB) Name() string { return "ecb" }

// ecbCurrencies are the currencies of the ECB's daily reference rates
// (the file of 2 October 2026: the ECB's list since it suspended RUB in
// March 2022 and dropped BGN when Bulgaria adopted the euro). The ECB
// source quotes EUR in each of them; Pricer.CheckRoutes counts on this
// list (PairQuoter).
var ecbCurrencies = []string{"USD", "JPY", "CZK", "DKK", "GBP", "HUF", "PLN", "RON", "SEK", "CHF", "ISK", "NOK",
	"TRY", "AUD", "BRL", "CAD", "CNY", "HKD", "IDR", "ILS", "INR", "KRW", "MXN", "MYR", "NZD", "PHP", "SGD", "THB", "ZAR"}

// QuotesPair implements PairQuoter: EUR in one of the currencies of its
// daily file.
func (e *ECB) QuotesPair(p Pair) bool {
	return p.Base == "EUR" && slices.Contains(ecbCurrencies, p.Quote)
}

// Rates implements Source.
func (e *ECB) Rates(ctx context.Context, pairs []Pair) ([]Rate, error) {
	want := false
	for _, p := range pairs {
		want = want || p.Base == "EUR"
	}
	if !want {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url, nil)
	if err != nil {
		return nil, fmt.Errorf("ecb: %w", err)
	}
	resp, err := e.cfg.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("ecb: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("ecb: reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("ecb: HTTP %d: %s", resp.StatusCode, snippet(body))
	}
	if len(body) > maxAnswer {
		return nil, fmt.Errorf("ecb: answer larger than %d bytes", maxAnswer)
	}
	day, rates, err := ParseECB(body)
	if err != nil {
		return nil, err
	}
	at := day.Add(13*time.Hour + 15*time.Minute)
	var out []Rate
	var errs []error
	for _, p := range pairs {
		if p.Base != "EUR" {
			continue
		}
		s, ok := rates[p.Quote]
		if !ok {
			continue
		}
		v, err := store.ParseDecimal(s)
		if err != nil || v.IsZero() {
			errs = append(errs, fmt.Errorf("ecb: %s rate %q is not a positive decimal", p.Quote, snippet([]byte(s))))
			continue
		}
		out = append(out, Rate{Pair: p, Value: v, At: at, MaxAge: e.cfg.MaxAge})
	}
	return out, errors.Join(errs...)
}

// ecbEnvelope is eurofxref-daily.xml: <gesmes:Envelope><Cube><Cube
// time='2026-10-02'><Cube currency='USD' rate='1.1225'/>…. Names are
// matched without their namespaces.
type ecbEnvelope struct {
	XMLName xml.Name `xml:"Envelope"`
	Days    []struct {
		Time  string `xml:"time,attr"`
		Rates []struct {
			Currency string `xml:"currency,attr"`
			Rate     string `xml:"rate,attr"`
		} `xml:"Cube"`
	} `xml:"Cube>Cube"`
}

// ParseECB reads a eurofxref XML file: the latest reference date (UTC
// midnight) and its rates by currency code, as the decimal text the file
// holds (units of the currency per euro).
func ParseECB(b []byte) (time.Time, map[string]string, error) {
	var env ecbEnvelope
	if err := xml.Unmarshal(b, &env); err != nil {
		return time.Time{}, nil, fmt.Errorf("ecb: malformed XML: %w", err)
	}
	var day time.Time
	var rates map[string]string
	for _, d := range env.Days {
		t, err := time.Parse(time.DateOnly, d.Time)
		if err != nil {
			return time.Time{}, nil, fmt.Errorf("ecb: reference date %q: %w", snippet([]byte(d.Time)), err)
		}
		if !t.After(day) {
			continue
		}
		day, rates = t, map[string]string{}
		for _, r := range d.Rates {
			if !store.IsCurrency(r.Currency) {
				continue // a code the currency table does not know
			}
			rates[r.Currency] = r.Rate
		}
	}
	if len(rates) == 0 {
		return time.Time{}, nil, errors.New("ecb: no reference rates in the file")
	}
	return day, rates, nil
}
