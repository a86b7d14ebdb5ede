package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrUnknownCurrency is returned for a code that is not an ISO 4217
// currency of the table in this file.
var ErrUnknownCurrency = errors.New("unknown currency: want an ISO 4217 code such as USD or EUR")

// Currency is a fiat currency: its ISO 4217 code and the number of digits of
// its minor unit (2 for EUR cents, 0 for JPY, 3 for KWD fils).
type Currency struct {
	Code       string
	MinorUnits uint8
}

// currencies is ISO 4217 list one: the active currencies with their minor
// units, without funds codes (CLF, USN, …), precious metals (XAU, …),
// special drawing rights (XDR) and the testing codes, and without the
// currencies withdrawn from it (HRK, BGN since the euro, SLL, ZWL, …).
var currencies = map[string]uint8{
	"AED": 2, "AFN": 2, "ALL": 2, "AMD": 2, "AOA": 2, "ARS": 2, "AUD": 2, "AWG": 2, "AZN": 2,
	"BAM": 2, "BBD": 2, "BDT": 2, "BHD": 3, "BIF": 0, "BMD": 2, "BND": 2, "BOB": 2, "BRL": 2,
	"BSD": 2, "BTN": 2, "BWP": 2, "BYN": 2, "BZD": 2,
	"CAD": 2, "CDF": 2, "CHF": 2, "CLP": 0, "CNY": 2, "COP": 2, "CRC": 2, "CUP": 2, "CVE": 2,
	"CZK": 2,
	"DJF": 0, "DKK": 2, "DOP": 2, "DZD": 2,
	"EGP": 2, "ERN": 2, "ETB": 2, "EUR": 2,
	"FJD": 2, "FKP": 2,
	"GBP": 2, "GEL": 2, "GHS": 2, "GIP": 2, "GMD": 2, "GNF": 0, "GTQ": 2, "GYD": 2,
	"HKD": 2, "HNL": 2, "HTG": 2, "HUF": 2,
	"IDR": 2, "ILS": 2, "INR": 2, "IQD": 3, "IRR": 2, "ISK": 0,
	"JMD": 2, "JOD": 3, "JPY": 0,
	"KES": 2, "KGS": 2, "KHR": 2, "KMF": 0, "KPW": 2, "KRW": 0, "KWD": 3, "KYD": 2, "KZT": 2,
	"LAK": 2, "LBP": 2, "LKR": 2, "LRD": 2, "LSL": 2, "LYD": 3,
	"MAD": 2, "MDL": 2, "MGA": 2, "MKD": 2, "MMK": 2, "MNT": 2, "MOP": 2, "MRU": 2, "MUR": 2,
	"MVR": 2, "MWK": 2, "MXN": 2, "MYR": 2, "MZN": 2,
	"NAD": 2, "NGN": 2, "NIO": 2, "NOK": 2, "NPR": 2, "NZD": 2,
	"OMR": 3,
	"PAB": 2, "PEN": 2, "PGK": 2, "PHP": 2, "PKR": 2, "PLN": 2, "PYG": 0,
	"QAR": 2,
	"RON": 2, "RSD": 2, "RUB": 2, "RWF": 0,
	"SAR": 2, "SBD": 2, "SCR": 2, "SDG": 2, "SEK": 2, "SGD": 2, "SHP": 2, "SLE": 2, "SOS": 2,
	"SRD": 2, "SSP": 2, "STN": 2, "SVC": 2, "SYP": 2, "SZL": 2,
	"THB": 2, "TJS": 2, "TMT": 2, "TND": 3, "TOP": 2, "TRY": 2, "TTD": 2, "TWD": 2, "TZS": 2,
	"UAH": 2, "UGX": 0, "USD": 2, "UYU": 2, "UZS": 2,
	"VED": 2, "VES": 2, "VND": 0, "VUV": 0,
	"WST": 2,
	"XAF": 0, "XCD": 2, "XCG": 2, "XOF": 0, "XPF": 0,
	"YER": 2,
	"ZAR": 2, "ZMW": 2, "ZWG": 2,
}

// LookupCurrency returns the ISO 4217 currency with code (any case: "eur"
// is EUR), or ErrUnknownCurrency.
func LookupCurrency(code string) (Currency, error) {
	if len(code) != 3 {
		return Currency{}, ErrUnknownCurrency
	}
	up := strings.ToUpper(code)
	n, ok := currencies[up]
	if !ok {
		return Currency{}, fmt.Errorf("%w (%q)", ErrUnknownCurrency, code)
	}
	return Currency{Code: up, MinorUnits: n}, nil
}

// IsCurrency reports whether code (upper case) is a currency of the table.
func IsCurrency(code string) bool {
	_, ok := currencies[code]
	return ok
}

// Currencies returns every currency of the table, sorted by code.
func Currencies() []Currency {
	out := make([]Currency, 0, len(currencies))
	for c, n := range currencies {
		out = append(out, Currency{Code: c, MinorUnits: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out
}

// Parse reads an amount of c in whole units ("49.90", "49.9", "49") into its
// minor units, exactly. More digits after the point than c's minor units
// ("49.901" EUR, "100.5" JPY), signs, exponents and leading zeros are
// refused with ErrInvalidAmount (see ParseUnits).
func (c Currency) Parse(s string) (Fiat, error) {
	if c.Code == "" {
		return Fiat{}, ErrUnknownCurrency
	}
	m, err := ParseUnits(s, c.MinorUnits)
	if err != nil {
		return Fiat{}, fmt.Errorf("%s amount %q: %w", c.Code, s, err)
	}
	return Fiat{Currency: c, Minor: m}, nil
}

// Fiat is an exact amount of money in a fiat currency, as a count of the
// currency's minor units (cents): 49.90 EUR is {EUR, 4990}.
//
// The Currency travels with the amount, minor units included, so a Fiat
// formats without the table. Its JSON form is {"amount": "49.90",
// "currency": "EUR"}: the amount a string with exactly the currency's
// minor-unit digits.
type Fiat struct {
	Currency Currency
	Minor    Amount
}

// ParseFiat reads amount ("49.90") of the ISO 4217 currency code ("EUR").
func ParseFiat(amount, code string) (Fiat, error) {
	c, err := LookupCurrency(code)
	if err != nil {
		return Fiat{}, err
	}
	return c.Parse(amount)
}

// MustParseFiat is ParseFiat for constants in tests and examples; it panics
// on a malformed amount or an unknown currency.
func MustParseFiat(amount, code string) Fiat {
	f, err := ParseFiat(amount, code)
	if err != nil {
		panic(fmt.Sprintf("store.MustParseFiat(%q, %q): %v", amount, code, err))
	}
	return f
}

// Amount returns the amount in whole units with exactly the currency's
// minor-unit digits ("49.90", "5000" for JPY, "1.500" for KWD).
func (f Fiat) Amount() string {
	s := FormatUnits(f.Minor, f.Currency.MinorUnits)
	n := int(f.Currency.MinorUnits)
	if n == 0 {
		return s
	}
	whole, frac, _ := strings.Cut(s, ".")
	return whole + "." + frac + strings.Repeat("0", n-len(frac))
}

// String is "49.90 EUR".
func (f Fiat) String() string { return f.Amount() + " " + f.Currency.Code }

// IsZero reports whether the amount is 0.
func (f Fiat) IsZero() bool { return f.Minor.IsZero() }

// Cmp compares f and g, which must be in the same currency: -1 if f < g, 0
// if equal, +1 if f > g.
func (f Fiat) Cmp(g Fiat) (int, error) {
	if f.Currency != g.Currency {
		return 0, fmt.Errorf("compare %s with %s: different currencies", f.Currency.Code, g.Currency.Code)
	}
	return f.Minor.Cmp(g.Minor), nil
}

type fiatJSON struct {
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

// MarshalJSON encodes {"amount": "49.90", "currency": "EUR"}.
func (f Fiat) MarshalJSON() ([]byte, error) {
	return json.Marshal(fiatJSON{Amount: f.Amount(), Currency: f.Currency.Code})
}

// UnmarshalJSON decodes the form MarshalJSON writes, against the currency
// table (see ParseFiat); the amount must be a JSON string.
func (f *Fiat) UnmarshalJSON(b []byte) error {
	var j fiatJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("%w (want {\"amount\": \"49.90\", \"currency\": \"EUR\"})", ErrInvalidAmount)
	}
	p, err := ParseFiat(j.Amount, j.Currency)
	if err != nil {
		return err
	}
	*f = p
	return nil
}
