package store

import (
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"

	"github.com/holiman/uint256"
)

// ErrInvalidAmount is returned when a value is not a non-negative decimal
// integer that fits in 256 bits.
var ErrInvalidAmount = errors.New("invalid amount: want a non-negative decimal integer below 2^256")

// Amount is an exact quantity of wei: an unsigned 256-bit integer.
//
// The zero value is 0 wei. Amount is a value type: copying it copies the
// number. It is stored as NUMERIC(78,0) in PostgreSQL and as decimal text in
// SQLite, and it marshals to JSON as a decimal string ("1000000000000000000")
// because JSON numbers lose precision above 2^53 in most clients.
type Amount struct {
	v uint256.Int
}

// NewAmount returns an Amount of n wei.
func NewAmount(n uint64) Amount {
	var a Amount
	a.v.SetUint64(n)
	return a
}

// AmountFromUint256 returns a copy of x as an Amount. A nil x is 0.
func AmountFromUint256(x *uint256.Int) Amount {
	var a Amount
	if x != nil {
		a.v.Set(x)
	}
	return a
}

// AmountFromBig converts x to an Amount. It fails when x is nil, negative or
// does not fit in 256 bits.
func AmountFromBig(x *big.Int) (Amount, error) {
	var a Amount
	if x == nil || x.Sign() < 0 {
		return a, ErrInvalidAmount
	}
	if overflow := a.v.SetFromBig(x); overflow {
		return Amount{}, ErrInvalidAmount
	}
	return a, nil
}

// ParseAmount parses a base-10 integer of wei ("0", "1500000000000000000").
// Signs, spaces, decimal points, exponents, hex and leading zeros are rejected.
func ParseAmount(s string) (Amount, error) {
	var a Amount
	if s == "" || len(s) > 78 {
		return a, ErrInvalidAmount
	}
	if len(s) > 1 && s[0] == '0' {
		return a, ErrInvalidAmount
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return a, ErrInvalidAmount
		}
	}
	if err := a.v.SetFromDecimal(s); err != nil {
		return Amount{}, ErrInvalidAmount
	}
	return a, nil
}

// MustParseAmount is ParseAmount for constants in tests and examples; it
// panics on a malformed amount.
func MustParseAmount(s string) Amount {
	a, err := ParseAmount(s)
	if err != nil {
		panic(fmt.Sprintf("store.MustParseAmount(%q): %v", s, err))
	}
	return a
}

// String returns the amount as a base-10 integer.
func (a Amount) String() string { return a.v.Dec() }

// Uint256 returns a copy of the amount as a *uint256.Int.
func (a Amount) Uint256() *uint256.Int { return new(uint256.Int).Set(&a.v) }

// Big returns the amount as a new *big.Int.
func (a Amount) Big() *big.Int { return a.v.ToBig() }

// IsZero reports whether the amount is 0.
func (a Amount) IsZero() bool { return a.v.IsZero() }

// Cmp compares a and b: -1 if a < b, 0 if equal, +1 if a > b.
func (a Amount) Cmp(b Amount) int { return a.v.Cmp(&b.v) }

// Add returns a + b. ok is false when the sum overflows 256 bits, in which
// case the returned amount must not be used.
func (a Amount) Add(b Amount) (sum Amount, ok bool) {
	_, overflow := sum.v.AddOverflow(&a.v, &b.v)
	return sum, !overflow
}

// Sub returns a - b. ok is false when b > a.
func (a Amount) Sub(b Amount) (diff Amount, ok bool) {
	_, underflow := diff.v.SubOverflow(&a.v, &b.v)
	return diff, !underflow
}

// Mul returns a × b. ok is false when the product overflows 256 bits.
func (a Amount) Mul(b Amount) (product Amount, ok bool) {
	_, overflow := product.v.MulOverflow(&a.v, &b.v)
	return product, !overflow
}

// Value implements driver.Valuer: the decimal text of the amount, which
// PostgreSQL casts to NUMERIC and SQLite stores as TEXT.
func (a Amount) Value() (driver.Value, error) { return a.v.Dec(), nil }

// Scan implements sql.Scanner. It accepts decimal text (string or []byte)
// and non-negative integers.
func (a *Amount) Scan(src any) error {
	switch v := src.(type) {
	case string:
		return a.scanText(v)
	case []byte:
		return a.scanText(string(v))
	case int64:
		if v < 0 {
			return fmt.Errorf("scan amount: negative value %d", v)
		}
		a.v.SetUint64(uint64(v))
		return nil
	case nil:
		return errors.New("scan amount: NULL (use *store.Amount for nullable columns)")
	default:
		return fmt.Errorf("scan amount: unsupported type %T", src)
	}
}

func (a *Amount) scanText(s string) error {
	// NUMERIC(78,0) has no fraction, so the stored text is a plain integer;
	// anything else means the column was written behind the store's back.
	p, err := ParseAmount(s)
	if err != nil {
		return fmt.Errorf("scan amount %q: %w", s, err)
	}
	*a = p
	return nil
}

// MarshalText implements encoding.TextMarshaler (decimal).
func (a Amount) MarshalText() ([]byte, error) { return []byte(a.v.Dec()), nil }

// UnmarshalText implements encoding.TextUnmarshaler (decimal only).
func (a *Amount) UnmarshalText(b []byte) error {
	p, err := ParseAmount(string(b))
	if err != nil {
		return err
	}
	*a = p
	return nil
}

// MarshalJSON encodes the amount as a JSON string of decimal digits.
func (a Amount) MarshalJSON() ([]byte, error) {
	return []byte(`"` + a.v.Dec() + `"`), nil
}

// UnmarshalJSON accepts only a JSON string of decimal digits: numbers are
// refused so that no client silently rounds an amount through a float.
func (a *Amount) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%w (amounts are JSON strings of decimal digits)", ErrInvalidAmount)
	}
	return a.UnmarshalText([]byte(s))
}
