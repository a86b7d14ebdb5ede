package store

import (
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/holiman/uint256"
)

// ErrInvalidDecimal is returned when a value is not a non-negative decimal
// number of the form Decimal accepts.
var ErrInvalidDecimal = errors.New("invalid decimal: want digits with at most one decimal point, no sign or exponent")

// MaxDecimalScale bounds the digits after a Decimal's point.
const MaxDecimalScale = 77

// Decimal is an exact non-negative decimal number, coef × 10^-scale with coef
// an unsigned 256-bit integer: an exchange rate as a source printed it
// ("3012.45"), never rounded through a float.
//
// The zero value is 0. Decimal is a value type (copying it copies the
// number) and is kept normalised (no trailing zeros after the point), so
// two Decimals of the same value are ==. Its text, JSON (a string) and SQL
// forms are the canonical decimal string ("3012.45", "0.000123", "2500").
type Decimal struct {
	coef  uint256.Int
	scale uint8
}

// ParseDecimal reads a non-negative decimal number exactly: digits with at
// most one decimal point ("3012.45", "0.5", "2500", "1.10"). Signs,
// exponents, spaces, a leading or trailing point, leading zeros ("012"),
// more than MaxDecimalScale digits after the point and numbers whose digits
// do not fit in 256 bits are refused with ErrInvalidDecimal. Trailing zeros
// after the point are dropped ("1.10" is 1.1).
func ParseDecimal(s string) (Decimal, error) {
	whole, frac, hasPoint := strings.Cut(s, ".")
	if whole == "" || hasPoint && frac == "" || len(whole) > 1 && whole[0] == '0' || len(s) > 200 {
		return Decimal{}, ErrInvalidDecimal
	}
	for _, part := range []string{whole, frac} {
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return Decimal{}, ErrInvalidDecimal
			}
		}
	}
	frac = strings.TrimRight(frac, "0")
	if len(frac) > MaxDecimalScale {
		return Decimal{}, fmt.Errorf("%w: more than %d digits after the point", ErrInvalidDecimal, MaxDecimalScale)
	}
	digits := strings.TrimLeft(whole+frac, "0")
	var d Decimal
	if digits == "" {
		return d, nil
	}
	if len(digits) > 78 || d.coef.SetFromDecimal(digits) != nil {
		return Decimal{}, fmt.Errorf("%w: too many digits", ErrInvalidDecimal)
	}
	d.scale = uint8(len(frac))
	return d, nil
}

// MustParseDecimal is ParseDecimal for constants in tests and examples; it
// panics on a malformed number.
func MustParseDecimal(s string) Decimal {
	d, err := ParseDecimal(s)
	if err != nil {
		panic(fmt.Sprintf("store.MustParseDecimal(%q): %v", s, err))
	}
	return d
}

// NewDecimal returns coef × 10^-scale. It fails when coef is nil, negative
// or does not fit in 256 bits, or scale exceeds MaxDecimalScale.
func NewDecimal(coef *big.Int, scale uint8) (Decimal, error) {
	var d Decimal
	if coef == nil || coef.Sign() < 0 || scale > MaxDecimalScale {
		return d, ErrInvalidDecimal
	}
	if d.coef.SetFromBig(coef) {
		return Decimal{}, fmt.Errorf("%w: too many digits", ErrInvalidDecimal)
	}
	d.scale = scale
	return d.normalised(), nil
}

func (d Decimal) normalised() Decimal {
	if d.coef.IsZero() {
		return Decimal{}
	}
	ten := uint256.NewInt(10)
	var q, r uint256.Int
	for d.scale > 0 {
		q.DivMod(&d.coef, ten, &r)
		if !r.IsZero() {
			break
		}
		d.coef.Set(&q)
		d.scale--
	}
	return d
}

// Coef returns the number's digits as an integer: d = Coef × 10^-Scale.
func (d Decimal) Coef() *big.Int { return d.coef.ToBig() }

// Scale returns the number of digits after the point.
func (d Decimal) Scale() uint8 { return d.scale }

// IsZero reports whether d is 0.
func (d Decimal) IsZero() bool { return d.coef.IsZero() }

// Rat returns d as a new exact *big.Rat.
func (d Decimal) Rat() *big.Rat {
	return new(big.Rat).SetFrac(d.coef.ToBig(), pow10(int(d.scale)))
}

// Cmp compares d and e: -1 if d < e, 0 if equal, +1 if d > e.
func (d Decimal) Cmp(e Decimal) int {
	if d.scale == e.scale {
		return d.coef.Cmp(&e.coef)
	}
	return d.Rat().Cmp(e.Rat())
}

// String returns the canonical decimal text: no exponent, no trailing zeros
// after the point, no point for a whole number.
func (d Decimal) String() string {
	s := d.coef.Dec()
	n := int(d.scale)
	if n == 0 {
		return s
	}
	if len(s) <= n {
		s = strings.Repeat("0", n-len(s)+1) + s
	}
	return s[:len(s)-n] + "." + s[len(s)-n:]
}

// MarshalText implements encoding.TextMarshaler.
func (d Decimal) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler (see ParseDecimal).
func (d *Decimal) UnmarshalText(b []byte) error {
	p, err := ParseDecimal(string(b))
	if err != nil {
		return err
	}
	*d = p
	return nil
}

// MarshalJSON encodes d as a JSON string ("3012.45").
func (d Decimal) MarshalJSON() ([]byte, error) { return []byte(`"` + d.String() + `"`), nil }

// UnmarshalJSON accepts only a JSON string (see ParseDecimal): a JSON number
// would have gone through a float in most clients.
func (d *Decimal) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%w (decimals are JSON strings)", ErrInvalidDecimal)
	}
	return d.UnmarshalText([]byte(s))
}

// Value implements driver.Valuer: the canonical text.
func (d Decimal) Value() (driver.Value, error) { return d.String(), nil }

// Scan implements sql.Scanner for decimal text (string or []byte).
func (d *Decimal) Scan(src any) error {
	switch v := src.(type) {
	case string:
		return d.UnmarshalText([]byte(v))
	case []byte:
		return d.UnmarshalText(v)
	default:
		return fmt.Errorf("scan decimal: unsupported type %T", src)
	}
}

var pow10Cache = func() [2*MaxDecimalScale + 2]*big.Int {
	var t [2*MaxDecimalScale + 2]*big.Int
	p := big.NewInt(1)
	for i := range t {
		t[i] = new(big.Int).Set(p)
		p.Mul(p, big.NewInt(10))
	}
	return t
}()

// pow10 returns 10^n; callers must not modify the result.
func pow10(n int) *big.Int {
	if n < len(pow10Cache) {
		return pow10Cache[n]
	}
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
}
