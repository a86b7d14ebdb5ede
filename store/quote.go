package store

import (
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// ErrNoQuote is returned when a payment is in an asset the quotes do not
// cover.
var ErrNoQuote = errors.New("no quote for the payment's asset")

// Quote is the locked price of a fiat-priced invoice in one asset: pay
// Amount base units of Asset, because Price at Rate is that much. Quotes are
// made once, when the invoice is created (invoice/pricing makes them), and
// never change: payments are valued at them (Value, ValuePayments).
//
// Rounding, in the payer's disfavour both ways so that the merchant never
// receives less than the price:
//
//   - Amount is rounded UP to the asset's base unit: the smallest amount
//     whose value at Rate is at least Price (QuoteAmount);
//   - a payment's value is rounded DOWN to the currency's minor unit
//     (Value); several payments are added exactly and rounded down once
//     (ValuePayments), so paying Amount in any number of parts still
//     values at least Price.
//
// Its JSON form is the quote as the API shows it and as it is stored.
type Quote struct {
	Asset Asset `json:"asset"`
	// ChainID is the chain the quote is paid on: an invoice accepts an
	// asset on another chain than its own by a quote on that chain
	// (docs/chains.md). 0 (every quote made before chains were quoted) is
	// the invoice's chain; see Pricing.ChainOf.
	ChainID uint64 `json:"chain_id,omitempty"`
	// Amount is what the payer sends, in base units of Asset.
	Amount Amount `json:"amount"`
	// Price is the invoice's price that this quote covers.
	Price Fiat `json:"price"`
	// Rate is the price of one whole unit of Asset in Price's currency
	// ("2500" USD per ETH).
	Rate Decimal `json:"rate"`
	// Pegged is true when Rate is a stablecoin's peg rather than its market
	// rate (the market was within the configured band of the peg).
	Pegged bool `json:"pegged,omitempty"`
	// Stale is true when Rate is the last good rate, used because too few
	// sources answered when the quote was made (never older than the
	// pricing's maximum age).
	Stale bool `json:"stale,omitempty"`
	// Sources are the observations Rate was made from: for a rate crossed
	// through another currency (ETH/JPY from ETH/USD and EUR/USD, EUR/JPY),
	// those of every leg.
	Sources   []QuoteSource `json:"sources"`
	CreatedAt time.Time     `json:"created_at"`
	ExpiresAt time.Time     `json:"expires_at"`
	// PaymentURI is the EIP-681 request for Amount of Asset to the
	// invoice's deposit address; the invoice package sets it once the
	// invoice has its address ("" before).
	PaymentURI string `json:"payment_uri,omitempty"`
}

// QuoteSource is one observation behind a quote's rate.
type QuoteSource struct {
	// Name is the source ("coinbase", "kraken", "chainlink", "ecb", …).
	Name string `json:"name"`
	// Pair is the market observed, "BASE/QUOTE": Rate units of QUOTE per
	// whole BASE ("ETH/USD", "EUR/JPY").
	Pair string    `json:"pair"`
	Rate Decimal   `json:"rate"`
	At   time.Time `json:"at"`
}

// QuoteAmount returns the base units of an asset with decimals decimals
// that pay price at rate (price's currency per whole unit), rounded up to
// the base unit: the least amount whose value at rate is price or more.
func QuoteAmount(price Fiat, rate Decimal, decimals uint8) (Amount, error) {
	if rate.IsZero() {
		return Amount{}, errors.New("quote amount: rate is zero")
	}
	if decimals > MaxDecimals {
		return Amount{}, fmt.Errorf("quote amount: %d decimals, at most %d", decimals, MaxDecimals)
	}
	// price/rate × 10^decimals = minor × 10^(scale+decimals) / (coef × 10^minorUnits)
	n := new(big.Int).Mul(price.Minor.Big(), pow10(int(rate.scale)+int(decimals)))
	d := new(big.Int).Mul(rate.coef.ToBig(), pow10(int(price.Currency.MinorUnits)))
	q, r := new(big.Int).QuoRem(n, d, new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	a, err := AmountFromBig(q)
	if err != nil {
		return Amount{}, fmt.Errorf("quote amount of %s at %s: %w", price, rate, err)
	}
	return a, nil
}

// AmountFor returns the base units of q's asset that pay f at q's rate,
// rounded up (QuoteAmount): what is left to pay in this asset when f is
// the remaining value. f must be in q's currency.
func (q Quote) AmountFor(f Fiat) (Amount, error) {
	if f.Currency != q.Price.Currency {
		return Amount{}, fmt.Errorf("amount for %s at a %s quote: different currencies", f, q.Price.Currency.Code)
	}
	return QuoteAmount(f, q.Rate, q.Asset.Decimals)
}

// exactValue is amount × rate in minor units of q's currency, exactly:
// amount × coef × 10^minorUnits / 10^(scale+decimals).
func (q Quote) exactValue(amount *big.Int) *big.Rat {
	num := new(big.Int).Mul(amount, q.Rate.coef.ToBig())
	num.Mul(num, pow10(int(q.Price.Currency.MinorUnits)))
	return new(big.Rat).SetFrac(num, pow10(int(q.Rate.scale)+int(q.Asset.Decimals)))
}

// Value returns what amount base units of q's asset are worth at q's rate,
// in q's currency, rounded down to the minor unit.
func (q Quote) Value(amount Amount) (Fiat, error) {
	return floorFiat(q.Price.Currency, q.exactValue(amount.Big()))
}

func floorFiat(c Currency, v *big.Rat) (Fiat, error) {
	m, err := AmountFromBig(new(big.Int).Quo(v.Num(), v.Denom()))
	if err != nil {
		return Fiat{}, fmt.Errorf("value in %s: %w", c.Code, err)
	}
	return Fiat{Currency: c, Minor: m}, nil
}

// AssetAmount is an amount of one asset: Token nil (or zero) for the native
// coin, as in Payment.
type AssetAmount struct {
	Token  *common.Address
	Amount Amount
}

// ValuePayments returns the value of payments, each at the quote of its
// asset, in the quotes' currency: the exact sum rounded down once to the
// minor unit. (The per-payment values of Quote.Value, each rounded down,
// may add up to a little less.) Every quote must be for the same price
// currency; a payment in an asset no quote covers is refused with
// ErrNoQuote.
func ValuePayments(quotes []Quote, payments []AssetAmount) (Fiat, error) {
	if len(quotes) == 0 {
		return Fiat{}, errors.New("value payments: no quotes")
	}
	cur := quotes[0].Price.Currency
	for _, q := range quotes[1:] {
		if q.Price.Currency != cur {
			return Fiat{}, fmt.Errorf("value payments: quotes in %s and %s", cur.Code, q.Price.Currency.Code)
		}
	}
	perQuote := make([]*big.Int, len(quotes))
	for _, p := range payments {
		i := -1
		for j, q := range quotes {
			if SameToken(q.Asset.Token(), p.Token) {
				i = j
				break
			}
		}
		if i < 0 {
			asset := "native coin"
			if p.Token != nil {
				asset = p.Token.Hex()
			}
			return Fiat{}, fmt.Errorf("value payments: %w (%s)", ErrNoQuote, asset)
		}
		if perQuote[i] == nil {
			perQuote[i] = new(big.Int)
		}
		perQuote[i].Add(perQuote[i], p.Amount.Big())
	}
	sum := new(big.Rat)
	for i, units := range perQuote {
		if units != nil {
			sum.Add(sum, quotes[i].exactValue(units))
		}
	}
	return floorFiat(cur, sum)
}

// Tolerance is how much less than the price an invoice may receive and
// still count as paid (exchanges deduct withdrawal fees, so payers underpay
// by cents). The allowance is the larger of Amount and Percent of the
// price; the zero Tolerance allows nothing. Snapshot it on the invoice at
// creation, in the invoice's currency, so later configuration changes do
// not move an open invoice.
type Tolerance struct {
	// Amount is an absolute allowance in the price's currency; zero for
	// none.
	Amount Fiat `json:"amount"`
	// Percent is an allowance in percent of the price ("0.5" is 0.5 %),
	// rounded down to the minor unit; at most 100.
	Percent Decimal `json:"percent"`
}

var hundred = MustParseDecimal("100")

// Validate checks Percent ≤ 100.
func (t Tolerance) Validate() error {
	if t.Percent.Cmp(hundred) > 0 {
		return fmt.Errorf("tolerance: %s%% is more than 100%%", t.Percent)
	}
	return nil
}

// Allowance returns how much less than price counts as paid: the larger of
// t.Amount and t.Percent of price (rounded down). t.Amount must be zero or
// in price's currency.
func (t Tolerance) Allowance(price Fiat) (Fiat, error) {
	if err := t.Validate(); err != nil {
		return Fiat{}, err
	}
	if !t.Amount.IsZero() && t.Amount.Currency != price.Currency {
		return Fiat{}, fmt.Errorf("tolerance of %s for a price in %s: different currencies", t.Amount, price.Currency.Code)
	}
	pct := new(big.Rat).Mul(new(big.Rat).SetInt(price.Minor.Big()), t.Percent.Rat())
	pct.Quo(pct, big.NewRat(100, 1))
	byPercent, err := floorFiat(price.Currency, pct)
	if err != nil {
		return Fiat{}, err
	}
	if t.Amount.Minor.Cmp(byPercent.Minor) > 0 {
		return Fiat{Currency: price.Currency, Minor: t.Amount.Minor}, nil
	}
	return byPercent, nil
}

// Standing is how the value received stands against a price.
type Standing struct {
	// Paid is true when received ≥ price − allowance.
	Paid bool
	// Shortfall is price − received when received < price (within the
	// tolerance or not), else zero: the underpayment, and what a checkout
	// page shows as remaining.
	Shortfall Fiat
	// Excess is received − price when received > price, else zero.
	Excess Fiat
}

// Assess compares received with price under tolerance t; received and
// price must be in the same currency.
func Assess(price, received Fiat, t Tolerance) (Standing, error) {
	if received.Currency != price.Currency {
		return Standing{}, fmt.Errorf("assess %s against %s: different currencies", received, price)
	}
	allow, err := t.Allowance(price)
	if err != nil {
		return Standing{}, err
	}
	s := Standing{Shortfall: Fiat{Currency: price.Currency}, Excess: Fiat{Currency: price.Currency}}
	if short, ok := price.Minor.Sub(received.Minor); ok {
		s.Shortfall.Minor = short
		s.Paid = short.Cmp(allow.Minor) <= 0
	} else {
		s.Excess.Minor, _ = received.Minor.Sub(price.Minor)
		s.Paid = true
	}
	return s, nil
}
