package store

import (
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// Pricing is how an invoice priced in a fiat currency is paid (issue 25):
// its price, the merchant's underpayment tolerance as it stood when the
// invoice was created, and one locked quote per accepted asset. It is
// fixed at creation and never changes. Stored as JSON (this form) in the
// invoice's pricing column.
type Pricing struct {
	Price     Fiat      `json:"price"`
	Tolerance Tolerance `json:"tolerance"`
	// Quotes are in the order the request accepted the assets; the first
	// is the invoice's own asset (Invoice.Asset: its amount and payment
	// URI are the invoice's amount_wei and payment_uri).
	Quotes []Quote `json:"quotes"`
}

// QuoteFor returns the quote of the asset with this token (nil: the native
// coin), and whether there is one.
func (p *Pricing) QuoteFor(token *common.Address) (Quote, bool) {
	if p == nil {
		return Quote{}, false
	}
	for _, q := range p.Quotes {
		if SameToken(q.Asset.Token(), token) {
			return q, true
		}
	}
	return Quote{}, false
}

// QuoteOn returns the quote of the asset with this token (nil: the native
// coin) on chain id, for an invoice on chain invoiceChain (a quote
// without a chain is on the invoice's), and whether there is one.
func (p *Pricing) QuoteOn(invoiceChain, id uint64, token *common.Address) (Quote, bool) {
	if p == nil {
		return Quote{}, false
	}
	for _, q := range p.Quotes {
		if q.ChainOf(invoiceChain) == id && SameToken(q.Asset.Token(), token) {
			return q, true
		}
	}
	return Quote{}, false
}

// ChainOf is the chain q is paid on for an invoice on chain invoiceChain:
// its own, or (a quote made before quotes named their chain) the
// invoice's.
func (q Quote) ChainOf(invoiceChain uint64) uint64 {
	if q.ChainID == 0 {
		return invoiceChain
	}
	return q.ChainID
}

// Validate checks what every stored pricing must hold: a price, at least
// one quote, every quote for that price and a distinct asset on its chain,
// and a tolerance in the price's currency.
func (p Pricing) Validate() error {
	if p.Price.Currency.Code == "" || p.Price.IsZero() {
		return errors.New("pricing: no price")
	}
	if len(p.Quotes) == 0 {
		return errors.New("pricing: no quote")
	}
	for i, q := range p.Quotes {
		if q.Price != p.Price {
			return fmt.Errorf("pricing: quote %d is for %s, not %s", i, q.Price, p.Price)
		}
		for _, o := range p.Quotes[:i] {
			if o.Asset.Same(q.Asset) && o.ChainID == q.ChainID {
				return fmt.Errorf("pricing: two quotes for %s on one chain", q.Asset)
			}
		}
	}
	if !p.Tolerance.Amount.IsZero() && p.Tolerance.Amount.Currency != p.Price.Currency {
		return fmt.Errorf("pricing: tolerance in %s for a price in %s", p.Tolerance.Amount.Currency.Code, p.Price.Currency.Code)
	}
	return p.Tolerance.Validate()
}

// Value implements driver.Valuer: the JSON text.
func (p Pricing) Value() (driver.Value, error) { return jsonValue(p) }

// Scan implements sql.Scanner.
func (p *Pricing) Scan(src any) error { return jsonScan(src, p) }

// LateValuation is how a fiat invoice stands when money arrived after its
// late window (the invoice stays EXPIRED, flagged needs_attention, and the
// merchant decides): the payments that arrived beyond the window valued at
// the invoice's locked quotes and at the rates of the moment. Settlement
// records it with the invoice.late_payment event.
type LateValuation struct {
	// Locked is their value at the invoice's locked quotes.
	Locked Fiat `json:"locked"`
	// Current is their value at the current rates when the last of them
	// was recorded; nil when no current rate could be had.
	Current *Fiat `json:"current,omitempty"`
	// At is when they were valued.
	At time.Time `json:"at"`
}

// Value implements driver.Valuer: the JSON text.
func (l LateValuation) Value() (driver.Value, error) { return jsonValue(l) }

// Scan implements sql.Scanner.
func (l *LateValuation) Scan(src any) error { return jsonScan(src, l) }

// MerchantTolerance is a merchant's underpayment tolerance: a percentage
// of the price, and an absolute amount per currency. An invoice priced in
// a currency gets Tolerance(currency), snapshotted at its creation. The
// zero value forgives nothing.
type MerchantTolerance struct {
	// Percent of the price ("0.5" is 0.5 %), at most 100.
	Percent Decimal `json:"percent"`
	// Amounts are absolute allowances, at most one per currency.
	Amounts []Fiat `json:"amounts"`
}

// IsZero reports whether the tolerance forgives nothing.
func (t MerchantTolerance) IsZero() bool {
	for _, a := range t.Amounts {
		if !a.IsZero() {
			return false
		}
	}
	return t.Percent.IsZero()
}

// Validate checks Percent ≤ 100 and one amount per currency.
func (t MerchantTolerance) Validate() error {
	if t.Percent.Cmp(hundred) > 0 {
		return fmt.Errorf("tolerance: %s%% is more than 100%%", t.Percent)
	}
	seen := map[string]bool{}
	for _, a := range t.Amounts {
		if a.Currency.Code == "" {
			return errors.New("tolerance: an amount without a currency")
		}
		if seen[a.Currency.Code] {
			return fmt.Errorf("tolerance: two amounts in %s", a.Currency.Code)
		}
		seen[a.Currency.Code] = true
	}
	return nil
}

// For returns the tolerance of an invoice priced in c: the percentage, and
// the amount configured for c (none when c has none).
func (t MerchantTolerance) For(c Currency) Tolerance {
	out := Tolerance{Percent: t.Percent, Amount: Fiat{Currency: c}}
	for _, a := range t.Amounts {
		if a.Currency.Code == c.Code {
			out.Amount = Fiat{Currency: c, Minor: a.Minor}
		}
	}
	return out
}

// Value implements driver.Valuer: "" for the zero tolerance, else JSON.
func (t MerchantTolerance) Value() (driver.Value, error) {
	if t.IsZero() {
		return "", nil
	}
	return jsonValue(t)
}

// Scan implements sql.Scanner ("" and NULL are the zero tolerance).
func (t *MerchantTolerance) Scan(src any) error {
	*t = MerchantTolerance{}
	return jsonScan(src, t)
}

// Value implements driver.Valuer for a stored asset (Invoice.SweepAsset):
// its JSON.
func (a Asset) Value() (driver.Value, error) { return jsonValue(a) }

// Scan implements sql.Scanner.
func (a *Asset) Scan(src any) error { return jsonScan(src, a) }

func jsonValue(v any) (driver.Value, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// jsonScan decodes a JSON text column into v; NULL and "" leave v as it
// is.
func jsonScan(src, v any) error {
	var b []byte
	switch s := src.(type) {
	case nil:
		return nil
	case string:
		b = []byte(s)
	case []byte:
		b = s
	default:
		return fmt.Errorf("scan %T: unsupported type %T", v, src)
	}
	if strings.TrimSpace(string(b)) == "" {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("scan %T: %w", v, err)
	}
	return nil
}

// IsFiat reports whether the invoice is priced in a fiat currency.
func (inv *Invoice) IsFiat() bool { return inv.Pricing != nil }

// Accepts reports whether a payment on the invoice's own chain in the
// asset with this token (nil: the native coin) counts toward the invoice:
// its own asset, or for a fiat invoice any asset quoted on its chain
// (AcceptsOn(inv.ChainID, token)).
func (inv *Invoice) Accepts(token *common.Address) bool {
	return inv.AcceptsOn(inv.ChainID, token)
}

// AcceptsOn reports whether the invoice has a price for the asset with
// this token (nil: the native coin) on chain id: for an invoice priced in
// its asset, that asset on its own chain; for a fiat invoice, a quote on
// that chain (Pricing.QuoteOn). A token is matched with its chain, never
// by its address alone: the same contract address on two chains is two
// assets. A payment on another chain than the invoice's counts only by
// moving the invoice to that chain (settlement; docs/chains.md).
func (inv *Invoice) AcceptsOn(id uint64, token *common.Address) bool {
	if inv.Pricing != nil {
		_, ok := inv.Pricing.QuoteOn(inv.ChainID, id, token)
		return ok
	}
	return id == inv.ChainID && SameToken(token, inv.TokenAddress)
}

// QuotesOn returns the quotes of p paid on chain id, for an invoice on
// chain invoiceChain (a quote without a chain is on the invoice's), in
// their order: the quotes a payment on that chain is valued at.
func (p *Pricing) QuotesOn(invoiceChain, id uint64) []Quote {
	if p == nil {
		return nil
	}
	var out []Quote
	for _, q := range p.Quotes {
		if q.ChainOf(invoiceChain) == id {
			out = append(out, q)
		}
	}
	return out
}

// PaidFiat returns the value paid toward a fiat invoice, in its price's
// currency (zero before the first payment); ok is false for an invoice
// priced in its asset.
func (inv *Invoice) PaidFiat() (f Fiat, ok bool) {
	if inv.Pricing == nil {
		return Fiat{}, false
	}
	f.Currency = inv.Pricing.Price.Currency
	if inv.PaidValue != nil {
		f.Minor = *inv.PaidValue
	}
	return f, true
}

// MoveToChain moves a fiat invoice to chain id, where it has a quote for
// the asset with this token (nil: the native coin): the invoice's chain
// becomes id and its own asset, amount and payment URI become that
// quote's. The quotes are kept, the moved-to one first (the first quote
// is the invoice's own asset) and the others in their order, each quote
// that named no chain (the old chain's) now naming it, so that every
// quote keeps the chain it is paid on. It reports false, changing
// nothing, when the invoice is not priced in fiat, is on id already, or
// has no quote for the asset on id. Settlement moves an invoice so when
// the first payment that counts arrives on another quoted chain than its
// own (docs/chains.md, "Paid on any quoted chain"); the caller writes the
// move (SettlementStore.MoveInvoice).
func (inv *Invoice) MoveToChain(id uint64, token *common.Address) bool {
	if inv.Pricing == nil || id == inv.ChainID {
		return false
	}
	at := -1
	for i, q := range inv.Pricing.Quotes {
		if q.ChainOf(inv.ChainID) == id && SameToken(q.Asset.Token(), token) {
			at = i
			break
		}
	}
	if at < 0 {
		return false
	}
	p := *inv.Pricing
	p.Quotes = make([]Quote, 0, len(inv.Pricing.Quotes))
	p.Quotes = append(p.Quotes, inv.Pricing.Quotes[at])
	for i, q := range inv.Pricing.Quotes {
		if i != at {
			p.Quotes = append(p.Quotes, q)
		}
	}
	for i := range p.Quotes {
		p.Quotes[i].ChainID = p.Quotes[i].ChainOf(inv.ChainID)
	}
	q := p.Quotes[0]
	inv.ChainID = id
	inv.SetAsset(q.Asset)
	inv.AmountWei = q.Amount
	inv.PaymentURI = q.PaymentURI
	inv.Pricing = &p
	return true
}
