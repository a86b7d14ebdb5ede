package invoice

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"
)

// PaymentURI is an EIP-681 request to pay native currency:
// ethereum:<address>@<chainId>?value=<wei>.
type PaymentURI struct {
	// Address receives the payment. It must not be the zero address.
	Address common.Address
	// ChainID is the EIP-155 chain id; it must not be zero.
	ChainID uint64
	// Value is the amount in wei; nil means the URI names no amount.
	Value *uint256.Int
}

// Errors from ParsePaymentURI and FormatPaymentURI. Every such error wraps
// ErrInvalidPaymentURI and exactly one of the others, which says which part
// is wrong; test with errors.Is.
var (
	ErrInvalidPaymentURI = errors.New("invoice: invalid payment URI")

	ErrURISyntax   = errors.New("syntax")
	ErrURIScheme   = errors.New("scheme")
	ErrURIAddress  = errors.New("address")
	ErrURIChainID  = errors.New("chain id")
	ErrURIValue    = errors.New("value")
	ErrURIParam    = errors.New("parameter")
	ErrURIFunction = errors.New("function call")
)

// maxURILength bounds the input: the longest URI we accept (address, 20-digit
// chain id, 78-digit value and the three gas hints) is far shorter.
const maxURILength = 1024

// uint256 max is 78 decimal digits; uint64 max is 20.
const (
	maxValueDigits   = 78
	maxChainIDDigits = 20
)

func uriError(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrInvalidPaymentURI, kind, fmt.Sprintf(format, args...))
}

// FormatPaymentURI returns "ethereum:<EIP-55 address>@<chainId>" followed by
// "?value=<wei>" when p.Value is set. The value is a plain decimal integer
// (never scientific notation, never a fraction). It fails on the zero
// address or a zero chain id.
func FormatPaymentURI(p PaymentURI) (string, error) {
	if p.Address == (common.Address{}) {
		return "", uriError(ErrURIAddress, "zero address")
	}
	if p.ChainID == 0 {
		return "", uriError(ErrURIChainID, "zero chain id")
	}
	var b strings.Builder
	b.Grow(128)
	b.WriteString("ethereum:")
	b.WriteString(p.Address.Hex())
	b.WriteByte('@')
	b.WriteString(strconv.FormatUint(p.ChainID, 10))
	if p.Value != nil {
		b.WriteString("?value=")
		b.WriteString(p.Value.Dec())
	}
	return b.String(), nil
}

// ParsePaymentURI reads an EIP-681 native-currency payment request of the
// shape FormatPaymentURI writes. It is deliberately strict, because a URI
// that means something other than what we read would move money elsewhere:
//
//   - scheme "ethereum:" (any case), optionally followed by "pay-";
//   - the target is a 0x address of 40 hex digits: all lower case, all upper
//     case, or mixed case with a valid EIP-55 checksum; ENS names and the
//     zero address are rejected;
//   - "@<chainId>" is required: a decimal uint64 above zero, no sign or
//     leading zeros;
//   - a function call ("/transfer" and the like, i.e. a token payment) is
//     rejected;
//   - parameters: "value" at most once, a decimal integer of wei without
//     sign, fraction, exponent or leading zeros, at most 2^256-1; the gas
//     hints "gas", "gasLimit" and "gasPrice" are checked the same way and
//     ignored; any other parameter, a repeated parameter, an empty parameter,
//     a fragment ("#") or percent-encoding is rejected.
//
// Errors wrap ErrInvalidPaymentURI and one of ErrURISyntax, ErrURIScheme,
// ErrURIAddress, ErrURIChainID, ErrURIValue, ErrURIParam, ErrURIFunction.
func ParsePaymentURI(s string) (PaymentURI, error) {
	var p PaymentURI
	if len(s) > maxURILength {
		return p, uriError(ErrURISyntax, "longer than %d bytes", maxURILength)
	}
	const scheme = "ethereum:"
	if len(s) < len(scheme) || !strings.EqualFold(s[:len(scheme)], scheme) {
		return p, uriError(ErrURIScheme, "must start with %q", scheme)
	}
	rest := s[len(scheme):]
	if strings.ContainsAny(rest, "#%") {
		return p, uriError(ErrURISyntax, "fragments and percent-encoding are not allowed")
	}
	rest = strings.TrimPrefix(rest, "pay-")

	target, query, hasQuery := strings.Cut(rest, "?")
	if strings.Contains(target, "/") {
		return p, uriError(ErrURIFunction, "function calls (such as /transfer) are not supported; only native-currency payments")
	}
	addr, chain, hasChain := strings.Cut(target, "@")

	var err error
	if p.Address, err = parseAddress(addr); err != nil {
		return PaymentURI{}, err
	}
	if !hasChain {
		return PaymentURI{}, uriError(ErrURIChainID, "missing (expected @<chainId> after the address)")
	}
	if p.ChainID, err = parseChainID(chain); err != nil {
		return PaymentURI{}, err
	}
	if hasQuery {
		if p.Value, err = parseParams(query); err != nil {
			return PaymentURI{}, err
		}
	}
	return p, nil
}

func parseAddress(a string) (common.Address, error) {
	if len(a) != 42 || a[:2] != "0x" {
		return common.Address{}, uriError(ErrURIAddress, "must be 0x followed by 40 hex digits (ENS names are not supported)")
	}
	hasLower, hasUpper := false, false
	for i := 2; i < len(a); i++ {
		switch c := a[i]; {
		case c >= '0' && c <= '9':
		case c >= 'a' && c <= 'f':
			hasLower = true
		case c >= 'A' && c <= 'F':
			hasUpper = true
		default:
			return common.Address{}, uriError(ErrURIAddress, "must be 0x followed by 40 hex digits")
		}
	}
	addr := common.HexToAddress(a)
	if hasLower && hasUpper && addr.Hex() != a {
		return common.Address{}, uriError(ErrURIAddress, "mixed-case address fails its EIP-55 checksum")
	}
	if addr == (common.Address{}) {
		return common.Address{}, uriError(ErrURIAddress, "zero address")
	}
	return addr, nil
}

func parseChainID(c string) (uint64, error) {
	if err := checkDecimal(c, maxChainIDDigits); err != "" {
		return 0, uriError(ErrURIChainID, "%s", err)
	}
	id, err := strconv.ParseUint(c, 10, 64)
	if err != nil {
		return 0, uriError(ErrURIChainID, "does not fit in 64 bits")
	}
	if id == 0 {
		return 0, uriError(ErrURIChainID, "must not be zero")
	}
	return id, nil
}

// parseParams reads the query string and returns the value, if any.
func parseParams(q string) (*uint256.Int, error) {
	if q == "" {
		return nil, uriError(ErrURISyntax, "empty query after '?'")
	}
	var value *uint256.Int
	seen := make(map[string]bool, 4)
	for kv := range strings.SplitSeq(q, "&") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || v == "" {
			return nil, uriError(ErrURIParam, "each parameter must be key=value")
		}
		switch k {
		case "value", "gas", "gasLimit", "gasPrice":
		default:
			return nil, uriError(ErrURIParam, "unsupported parameter %q", truncate(k, 32))
		}
		if seen[k] {
			return nil, uriError(ErrURIParam, "%q given more than once", k)
		}
		seen[k] = true
		if err := checkDecimal(v, maxValueDigits); err != "" {
			if k == "value" {
				return nil, uriError(ErrURIValue, "%s", err)
			}
			return nil, uriError(ErrURIParam, "%s: %s", k, err)
		}
		n, err := uint256.FromDecimal(v)
		if err != nil {
			if k == "value" {
				return nil, uriError(ErrURIValue, "above 2^256-1 wei")
			}
			return nil, uriError(ErrURIParam, "%s: above 2^256-1", k)
		}
		if k == "value" {
			value = n
		}
	}
	return value, nil
}

// checkDecimal returns "" if s is a canonical non-negative decimal integer of
// at most maxDigits digits, and what is wrong with it otherwise.
func checkDecimal(s string, maxDigits int) string {
	switch {
	case s == "":
		return "empty"
	case s[0] == '-' || s[0] == '+':
		return "must be an unsigned integer"
	case strings.ContainsAny(s, ".eE"):
		return "must be an integer (no decimal point or exponent)"
	case strings.TrimLeft(s, "0123456789") != "":
		return "must be a decimal integer"
	case len(s) > 1 && s[0] == '0':
		return "must not have leading zeros"
	case len(s) > maxDigits:
		return "too large"
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
