package invoice

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/evmpay/evmpay/invoice/pricing"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/problem"
)

// Pricer quotes fiat prices in assets, for invoices priced in a fiat
// currency (docs/pricing.md). *pricing.Pricer satisfies it; an embedder
// may bring its own, returning pricing's errors (ErrRateUnavailable with
// an *pricing.UnavailableError for a retry hint, ErrUnsupportedCurrency,
// ErrUnknownAsset, ErrInvalidPrice).
type Pricer interface {
	// Check reports whether price's currency and asset can be quoted at
	// all, whatever the rates.
	Check(price store.Fiat, asset store.Asset) error
	// Quotes locks price in every asset until expiresAt, all or nothing.
	Quotes(ctx context.Context, price store.Fiat, assets []store.Asset, expiresAt time.Time) ([]store.Quote, error)
}

// maxAccepted bounds a request's accept list.
const maxAccepted = 32

// fiatRequest is the fiat part of a POST /v1/invoices: the price and the
// accepted assets, checked against the Pricer.
type fiatRequest struct {
	price  store.Fiat
	accept []store.Asset
	// chains are the chains of accept's assets (parallel to it).
	chains []uint64
}

// parseFiat reads "price" and "accept" (ms holds both, price not null). A
// price excludes the asset members: the quotes decide the amounts.
func (s *Service) parseFiat(c *chain, ms map[string]json.RawMessage) (*fiatRequest, *problem.Problem) {
	for _, name := range []string{"asset", "amount", "amount_formatted", "amount_wei"} {
		if !isNull(ms[name]) {
			return nil, problem.OfField(problem.CodeInvalidField, name,
				name+" is for an invoice priced in an asset; an invoice with a price is quoted in the accepted assets (accept)")
		}
	}
	if s.cfg.Pricer == nil {
		return nil, problem.OfField(problem.CodeUnsupportedCurrency, "price",
			"this service prices no invoice in a fiat currency (fiat pricing is not configured); give an asset and an amount")
	}
	if ms["price"][0] != '{' {
		return nil, problem.OfField(problem.CodeInvalidField, "price",
			`price must be an object {"amount": "49.90", "currency": "EUR"}`)
	}
	pm, perr := members(ms["price"], "amount", "currency")
	if perr != nil {
		perr.Field = "price." + perr.Field
		return nil, perr
	}
	amount, perr := stringMember(pm, "amount", 100)
	if perr != nil || amount == "" {
		return nil, problem.OfField(problem.CodeInvalidAmount, "price.amount",
			`price.amount must be a JSON string of the amount in whole units, e.g. "49.90"`)
	}
	code, perr := stringMember(pm, "currency", 10)
	if perr != nil || code == "" {
		return nil, problem.OfField(problem.CodeUnsupportedCurrency, "price.currency",
			`price.currency must be an ISO 4217 code, e.g. "EUR"`)
	}
	cur, err := store.LookupCurrency(code)
	if err != nil {
		return nil, problem.OfField(problem.CodeUnsupportedCurrency, "price.currency",
			fmt.Sprintf("price.currency %q is not an ISO 4217 currency", truncate(code, 16)))
	}
	price, err := cur.Parse(amount)
	if err != nil {
		return nil, problem.OfField(problem.CodeInvalidAmount, "price.amount",
			fmt.Sprintf("price.amount must be a decimal number with at most %d digits after the point (%s's minor unit), without sign, exponent or leading zeros",
				cur.MinorUnits, cur.Code))
	}
	if price.IsZero() {
		return nil, problem.OfField(problem.CodeInvalidAmount, "price.amount", "price.amount must be greater than 0")
	}
	req := &fiatRequest{price: price}
	if req.accept, req.chains, perr = s.parseAccept(c, ms["accept"], price); perr != nil {
		return nil, perr
	}
	return req, nil
}

// parseAccept reads "accept": the assets the payer may pay in, by symbol
// or token address, on the invoice's chain c or, suffixed "@<chain id>"
// ("USDC@9000"), on another chain the service serves. Absent, it is every
// asset of chain c that the Pricer prices (the native coin first, then the
// tokens). The first accepted asset is the invoice's own: on its chain.
// It returns each asset's chain beside it.
func (s *Service) parseAccept(c *chain, raw json.RawMessage, price store.Fiat) ([]store.Asset, []uint64, *problem.Problem) {
	set := c.assets
	check := func(a store.Asset, field string) *problem.Problem {
		err := s.cfg.Pricer.Check(price, a)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, pricing.ErrUnsupportedCurrency):
			return problem.OfField(problem.CodeUnsupportedCurrency, "price.currency",
				fmt.Sprintf("invoices are not priced in %s here", price.Currency.Code))
		case errors.Is(err, pricing.ErrInvalidPrice):
			return problem.OfField(problem.CodeInvalidAmount, "price.amount", "price.amount must be greater than 0")
		case errors.Is(err, pricing.ErrUnknownAsset):
			return problem.OfField(problem.CodeUnknownAsset, field, fmt.Sprintf("%s has no exchange rate here: it cannot be quoted", a.Symbol))
		}
		return problem.OfField(problem.CodeInvalidField, field, err.Error())
	}
	if isNull(raw) {
		var out []store.Asset
		var chains []uint64
		for _, a := range set.list {
			if perr := check(a, "accept"); perr == nil {
				out, chains = append(out, a), append(chains, c.id)
			} else if perr.Code != problem.CodeUnknownAsset {
				return nil, nil, perr
			}
		}
		if len(out) == 0 {
			return nil, nil, problem.OfField(problem.CodeUnknownAsset, "accept", "none of this service's assets has an exchange rate: no invoice can be priced in a fiat currency")
		}
		return out, chains, nil
	}
	var names []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &names) != nil || len(names) == 0 || len(names) > maxAccepted {
		return nil, nil, problem.OfField(problem.CodeInvalidField, "accept",
			fmt.Sprintf(`accept must be an array of 1 to %d asset symbols or token addresses, each optionally "@<chain id>", e.g. ["USDC", "ETH", "USDC@9000"]`, maxAccepted))
	}
	var (
		out    []store.Asset
		chains []uint64
	)
	for i, n := range names {
		field := "accept[" + strconv.Itoa(i) + "]"
		on, name, perr := s.assetChain(c, n, field)
		if perr != nil {
			return nil, nil, perr
		}
		if i == 0 && on != c {
			return nil, nil, problem.OfField(problem.CodeInvalidField, field, fmt.Sprintf(
				"the first accepted asset is the invoice's own, on the invoice's chain %d: list an asset of that chain first, or name the other chain in chain_id", c.id))
		}
		a, perr := s.parseAssetName(on, name, field)
		if perr != nil {
			return nil, nil, perr
		}
		for j, b := range out {
			if a.Same(b) && chains[j] == on.id {
				return nil, nil, problem.OfField(problem.CodeInvalidField, field, fmt.Sprintf("%s on chain %d is accepted twice", a.Symbol, on.id))
			}
		}
		if perr := check(a, field); perr != nil {
			return nil, nil, perr
		}
		out, chains = append(out, a), append(chains, on.id)
	}
	return out, chains, nil
}

// assetChain splits an accepted asset's name "NAME@<chain id>" into the
// chain the service serves and the name (a JSON string again); without
// "@" the chain is c.
func (s *Service) assetChain(c *chain, raw json.RawMessage, field string) (*chain, json.RawMessage, *problem.Problem) {
	var name string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &name) != nil {
		return c, raw, nil // parseAssetName says what is wrong
	}
	asset, id, ok := strings.Cut(name, "@")
	if !ok {
		return c, raw, nil
	}
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil || n == 0 || strings.HasPrefix(id, "0") || strings.HasPrefix(id, "+") {
		return nil, nil, problem.OfField(problem.CodeInvalidField, field,
			fmt.Sprintf(`%s: the chain after "@" must be a chain id, e.g. "USDC@9000"`, field))
	}
	on, served := s.configuredChain(n)
	if !served {
		return nil, nil, problem.OfField(problem.CodeUnknownChain, field, fmt.Sprintf("chain %d is not served here", n))
	}
	b, _ := json.Marshal(asset)
	return on, b, nil
}

// quote locks j's price in its accepted assets until the invoice expires,
// with the merchant's tolerance as it stands: the invoice's pricing.
func (s *Service) quote(ctx context.Context, m store.Merchant, f *fiatRequest, expiresAt time.Time) (*store.Pricing, error) {
	quotes, err := s.cfg.Pricer.Quotes(ctx, f.price, f.accept, expiresAt)
	if err != nil {
		return nil, err
	}
	if len(quotes) != len(f.chains) {
		return nil, fmt.Errorf("invoice: pricer made %d quotes for %d assets", len(quotes), len(f.chains))
	}
	for i := range quotes {
		quotes[i].ChainID = f.chains[i]
	}
	p := &store.Pricing{Price: f.price, Tolerance: m.Tolerance.For(f.price.Currency), Quotes: quotes}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("invoice: pricer's quotes: %w", err)
	}
	return p, nil
}

// errRateUnavailable is the problem of a quote refused for want of rates;
// the caller adds Retry-After.
func rateUnavailable(err error) (*problem.Problem, string) {
	after, _ := pricing.RetryAfter(err)
	secs := int(math.Ceil(after.Seconds()))
	if secs < 1 {
		secs = 1
	}
	detail := "no exchange rate fresh and agreed enough to quote this price right now; nothing was created and the Idempotency-Key may be used again: retry after the seconds in Retry-After"
	if errors.Is(err, pricing.ErrDepegged) {
		detail = "an accepted stablecoin is off its peg and refused by configuration; nothing was created: retry later, or accept other assets"
	}
	return problem.Of(problem.CodeRateUnavailable, detail), strconv.Itoa(secs)
}

// withQuoteURIs copies p for an invoice at deposit address, each quote
// with its payment URI, and returns the first quote's URI (the invoice's).
func (s *Service) withQuoteURIs(p *store.Pricing, inv *store.Invoice) (*store.Pricing, error) {
	out := *p
	out.Quotes = append([]store.Quote(nil), p.Quotes...)
	for i := range out.Quotes {
		uri, err := paymentURI(out.Quotes[i].ChainOf(inv.ChainID), out.Quotes[i].Asset, inv.DepositAddress, out.Quotes[i].Amount)
		if err != nil {
			return nil, err
		}
		out.Quotes[i].PaymentURI = uri
	}
	return &out, nil
}

// fiatStanding is how a fiat invoice's payments stand against its price:
// what remains to pay (zero once the price is reached) and the value paid.
func fiatStanding(inv store.Invoice) (paid, remaining store.Fiat) {
	paid, _ = inv.PaidFiat()
	remaining = store.Fiat{Currency: paid.Currency}
	if short, ok := inv.Pricing.Price.Minor.Sub(paid.Minor); ok {
		remaining.Minor = short
	}
	return paid, remaining
}

// publicFiat is what the checkout page needs of a fiat invoice: the price
// first, what was paid and what remains in fiat, and each accepted asset
// with its exact amount due now and the URI for it.
type publicFiat struct {
	Price          store.Fiat `json:"price"`
	PaidValue      store.Fiat `json:"paid_value"`
	RemainingValue store.Fiat `json:"remaining_value"`
	// Quotes are the accepted assets, in the merchant's order.
	Quotes []publicQuote `json:"quotes"`
}

// publicQuote is one accepted asset of a fiat invoice as the payer sees
// it.
type publicQuote struct {
	// ChainID is the chain the quote is paid on (the invoice's, or
	// another the invoice accepts the asset on).
	ChainID uint64      `json:"chain_id"`
	Asset   store.Asset `json:"asset"`
	// Amount is the locked quote: the whole price in this asset.
	Amount store.Amount `json:"amount"`
	// Paid is what arrived in this asset.
	Paid store.Amount `json:"paid"`
	// Remaining is what to send in this asset now to pay what remains
	// (rounded up; the quoted amount before any payment, 0 once paid).
	Remaining store.Amount `json:"remaining"`
	Rate      string       `json:"rate"`
	// PaymentURI is the request for Remaining ("" once nothing remains).
	PaymentURI string `json:"payment_uri,omitempty"`
}

// publicFiatOf builds publicFiat from inv and its counted payments.
func (s *Service) publicFiatOf(inv store.Invoice, ps []store.Payment) (*publicFiat, error) {
	paid, remaining := fiatStanding(inv)
	// Once a payment counts, the invoice is on its chain for good: only
	// that chain's quotes are offered (a payment on another chain would be
	// a wrong-network one).
	quotes := inv.Pricing.Quotes
	if inv.PaidValue != nil {
		quotes = inv.Pricing.QuotesOn(inv.ChainID, inv.ChainID)
	}
	out := &publicFiat{Price: inv.Pricing.Price, PaidValue: paid, RemainingValue: remaining,
		Quotes: make([]publicQuote, len(quotes))}
	for i, q := range quotes {
		pq := publicQuote{ChainID: q.ChainOf(inv.ChainID), Asset: q.Asset, Amount: q.Amount, Rate: q.Rate.String()}
		for _, p := range ps {
			if cmp.Or(p.ChainID, inv.ChainID) == pq.ChainID && store.SameToken(p.Token, q.Asset.Token()) {
				pq.Paid, _ = pq.Paid.Add(p.AmountWei)
			}
		}
		switch {
		case inv.PaidValue == nil:
			pq.Remaining, pq.PaymentURI = q.Amount, q.PaymentURI
		case !remaining.IsZero():
			rest, err := q.AmountFor(remaining)
			if err != nil {
				return nil, err
			}
			uri, err := paymentURI(pq.ChainID, q.Asset, inv.DepositAddress, rest)
			if err != nil {
				return nil, err
			}
			pq.Remaining, pq.PaymentURI = rest, uri
		}
		out.Quotes[i] = pq
	}
	return out, nil
}

// quoteOf finds the quote of a fiat invoice for an asset named by symbol
// or token address (any case).
func quoteOf(inv store.Invoice, name string, chainID uint64) (store.Quote, bool) {
	for _, q := range inv.Pricing.Quotes {
		if chainID != 0 && q.ChainOf(inv.ChainID) != chainID {
			continue
		}
		if strings.EqualFold(q.Asset.Symbol, name) {
			return q, true
		}
		if t := q.Asset.Token(); t != nil && strings.EqualFold(t.Hex(), name) {
			return q, true
		}
	}
	return store.Quote{}, false
}

// maxToleranceAmounts bounds a merchant's per-currency tolerance amounts.
const maxToleranceAmounts = 64

// parseTolerance reads a merchant's underpayment_tolerance:
// {"percent": "0.5", "amounts": [{"amount": "0.50", "currency": "EUR"}]},
// both optional (absent: none). It replaces the whole tolerance.
func parseTolerance(raw json.RawMessage) (store.MerchantTolerance, *problem.Problem) {
	const field = "underpayment_tolerance"
	bad := func(detail string) (store.MerchantTolerance, *problem.Problem) {
		return store.MerchantTolerance{}, problem.OfField(problem.CodeInvalidField, field, field+" "+detail)
	}
	if raw[0] != '{' {
		return bad(`must be an object {"percent": "0.5", "amounts": [{"amount": "0.50", "currency": "EUR"}]}`)
	}
	ms, perr := members(raw, "percent", "amounts")
	if perr != nil {
		return bad(`takes percent and amounts: ` + perr.Detail)
	}
	var t store.MerchantTolerance
	if p, perr := stringMember(ms, "percent", 100); perr != nil {
		return bad(`percent must be a JSON string, e.g. "0.5"`)
	} else if p != "" {
		d, err := store.ParseDecimal(p)
		if err != nil || d.Cmp(store.MustParseDecimal("100")) > 0 {
			return bad(`percent must be a decimal from 0 to 100 without sign or exponent, e.g. "0.5"`)
		}
		t.Percent = d
	}
	if raw := ms["amounts"]; !isNull(raw) {
		var list []map[string]json.RawMessage
		if raw[0] != '[' || json.Unmarshal(raw, &list) != nil || len(list) > maxToleranceAmounts {
			return bad(fmt.Sprintf(`amounts must be an array of at most %d {"amount": "0.50", "currency": "EUR"}`, maxToleranceAmounts))
		}
		for i, m := range list {
			amount, p1 := stringMember(m, "amount", 100)
			code, p2 := stringMember(m, "currency", 10)
			if p1 != nil || p2 != nil || len(m) != 2 {
				return bad(fmt.Sprintf(`amounts[%d] must be {"amount": "0.50", "currency": "EUR"}`, i))
			}
			f, err := store.ParseFiat(amount, code)
			if err != nil {
				return bad(fmt.Sprintf("amounts[%d]: %s", i, err.Error()))
			}
			t.Amounts = append(t.Amounts, f)
		}
	}
	if err := t.Validate(); err != nil {
		return bad(err.Error())
	}
	return t, nil
}
