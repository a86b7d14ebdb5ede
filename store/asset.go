package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ethereum/go-ethereum/common"
)

// NativeDecimals is the number of decimals of the native coin (1 unit =
// 10^18 wei).
const NativeDecimals = 18

// MaxDecimals bounds an asset's decimals: 10^77 is the largest power of ten
// below 2^256, so one whole unit of the asset still fits in an Amount.
const MaxDecimals = 77

// Asset is what an invoice is paid in: the chain's native coin (Address
// nil) or one ERC-20 token (Address its contract). Amounts of an asset are
// always integers of its base unit (wei for the native coin, 10^-Decimals of
// a token); Decimals only matter when formatting at the edge.
//
// Its JSON form is {"symbol": "USDC", "address": "0x…" (EIP-55) or null,
// "decimals": 6}.
type Asset struct {
	Symbol string
	// Address is the token contract; nil for the native coin.
	Address  *common.Address
	Decimals uint8
}

// NativeAsset is the chain's native coin under symbol (18 decimals).
func NativeAsset(symbol string) Asset {
	return Asset{Symbol: symbol, Decimals: NativeDecimals}
}

// IsNative reports whether a is the native coin.
func (a Asset) IsNative() bool { return a.Address == nil || *a.Address == (common.Address{}) }

// Token returns the token contract address, or nil for the native coin (a
// zero address counts as native).
func (a Asset) Token() *common.Address {
	if a.IsNative() {
		return nil
	}
	t := *a.Address
	return &t
}

// Same reports whether a and b are the same asset (same token contract, or
// both native); symbols and decimals are not compared.
func (a Asset) Same(b Asset) bool { return SameToken(a.Token(), b.Token()) }

// SameToken reports whether two token addresses name the same asset, nil or
// zero meaning the native coin.
func SameToken(a, b *common.Address) bool {
	an := a == nil || *a == (common.Address{})
	bn := b == nil || *b == (common.Address{})
	if an || bn {
		return an == bn
	}
	return *a == *b
}

// Validate checks that the asset is usable: a symbol and at most
// MaxDecimals decimals.
func (a Asset) Validate() error {
	if strings.TrimSpace(a.Symbol) == "" {
		return errors.New("asset: empty symbol")
	}
	if a.Decimals > MaxDecimals {
		return fmt.Errorf("asset %s: %d decimals, at most %d", a.Symbol, a.Decimals, MaxDecimals)
	}
	return nil
}

// Format returns x base units as a decimal string of whole units (see
// FormatUnits).
func (a Asset) Format(x Amount) string { return FormatUnits(x, a.Decimals) }

// Parse reads a decimal string of whole units into base units (see
// ParseUnits).
func (a Asset) Parse(s string) (Amount, error) { return ParseUnits(s, a.Decimals) }

// String is "USDC (0x…)" or the native symbol.
func (a Asset) String() string {
	if a.IsNative() {
		return a.Symbol
	}
	return a.Symbol + " (" + a.Address.Hex() + ")"
}

type assetJSON struct {
	Symbol   string  `json:"symbol"`
	Address  *string `json:"address"`
	Decimals uint8   `json:"decimals"`
}

// MarshalJSON encodes {"symbol", "address" (EIP-55, null for native),
// "decimals"}.
func (a Asset) MarshalJSON() ([]byte, error) {
	j := assetJSON{Symbol: a.Symbol, Decimals: a.Decimals}
	if t := a.Token(); t != nil {
		h := t.Hex()
		j.Address = &h
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes the form MarshalJSON writes. A mixed-case address
// must carry a valid EIP-55 checksum.
func (a *Asset) UnmarshalJSON(b []byte) error {
	var j assetJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	out := Asset{Symbol: j.Symbol, Decimals: j.Decimals}
	if j.Address != nil {
		addr, err := ParseAddress(*j.Address)
		if err != nil {
			return err
		}
		out.Address = &addr
	}
	*a = out
	return nil
}

// FormatUnits writes x base units of an asset with decimals decimals as a
// decimal string of whole units, exactly: no exponent, no trailing zeros in
// the fraction, no decimal point for a whole number ("12.5", "0.000001",
// "12"). It never goes through a float.
func FormatUnits(x Amount, decimals uint8) string {
	s := x.String()
	d := int(decimals)
	if d == 0 {
		return s
	}
	if len(s) <= d {
		s = strings.Repeat("0", d-len(s)+1) + s
	}
	whole, frac := s[:len(s)-d], strings.TrimRight(s[len(s)-d:], "0")
	if frac == "" {
		return whole
	}
	return whole + "." + frac
}

// ParseUnits reads a decimal string of whole units into base units of an
// asset with decimals decimals, exactly: "12.5" at 6 decimals is 12500000.
// The form is digits with at most one decimal point and at most decimals
// digits after it ("12", "12.5", "0.000001", "12.50"); signs, exponents,
// spaces, a leading or trailing point, leading zeros ("012") and results
// of 2^256 or more are refused with ErrInvalidAmount.
func ParseUnits(s string, decimals uint8) (Amount, error) {
	whole, frac, hasPoint := strings.Cut(s, ".")
	if whole == "" || hasPoint && frac == "" || len(whole) > 1 && whole[0] == '0' || len(s) > 200 {
		return Amount{}, ErrInvalidAmount
	}
	if len(frac) > int(decimals) {
		return Amount{}, fmt.Errorf("%w: at most %d digits after the decimal point", ErrInvalidAmount, decimals)
	}
	for _, part := range []string{whole, frac} {
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return Amount{}, ErrInvalidAmount
			}
		}
	}
	digits := strings.TrimLeft(whole+frac+strings.Repeat("0", int(decimals)-len(frac)), "0")
	if digits == "" {
		return Amount{}, nil
	}
	if len(digits) > 78 {
		return Amount{}, ErrInvalidAmount
	}
	return ParseAmount(digits)
}
