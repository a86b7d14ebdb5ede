package invoice

import (
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"
)

// TransferURI is an EIP-681 request to pay an ERC-20 token:
// ethereum:<token>@<chainId>/transfer?address=<recipient>&uint256=<base units>.
// A wallet that reads it calls the token's transfer(recipient, amount).
type TransferURI struct {
	// Token is the ERC-20 contract. It must not be the zero address.
	Token common.Address
	// ChainID is the EIP-155 chain id; it must not be zero.
	ChainID uint64
	// To receives the tokens (the invoice's deposit address). It must not be
	// the zero address.
	To common.Address
	// Amount is in the token's base units (10^-decimals of a token); nil
	// means the URI names no amount.
	Amount *uint256.Int
}

// FormatTransferURI returns
// "ethereum:<EIP-55 token>@<chainId>/transfer?address=<EIP-55 recipient>"
// followed by "&uint256=<base units>" when t.Amount is set. The amount is a
// plain decimal integer of base units (never scientific notation, never a
// fraction: EIP-681's "2.014e18" forms are not written).
func FormatTransferURI(t TransferURI) (string, error) {
	if t.Token == (common.Address{}) {
		return "", uriError(ErrURIAddress, "zero token address")
	}
	if t.To == (common.Address{}) {
		return "", uriError(ErrURIAddress, "zero recipient address")
	}
	if t.ChainID == 0 {
		return "", uriError(ErrURIChainID, "zero chain id")
	}
	var b strings.Builder
	b.Grow(192)
	b.WriteString("ethereum:")
	b.WriteString(t.Token.Hex())
	b.WriteByte('@')
	b.WriteString(strconv.FormatUint(t.ChainID, 10))
	b.WriteString("/transfer?address=")
	b.WriteString(t.To.Hex())
	if t.Amount != nil {
		b.WriteString("&uint256=")
		b.WriteString(t.Amount.Dec())
	}
	return b.String(), nil
}

// ParseTransferURI reads an EIP-681 ERC-20 transfer request of the shape
// FormatTransferURI writes, as strictly as ParsePaymentURI reads a native
// one: the same scheme, address and chain id rules; the function must be
// "transfer"; parameters "address" (required, an address under the same
// rules) and "uint256" (optional, a canonical decimal integer of base units
// at most 2^256-1), each at most once; the gas hints "gas", "gasLimit" and
// "gasPrice" are checked and ignored; a "value" (native coin sent with a
// token call) or any other parameter is rejected.
func ParseTransferURI(s string) (TransferURI, error) {
	var t TransferURI
	if len(s) > maxURILength {
		return t, uriError(ErrURISyntax, "longer than %d bytes", maxURILength)
	}
	const scheme = "ethereum:"
	if len(s) < len(scheme) || !strings.EqualFold(s[:len(scheme)], scheme) {
		return t, uriError(ErrURIScheme, "must start with %q", scheme)
	}
	rest := s[len(scheme):]
	if strings.ContainsAny(rest, "#%") {
		return t, uriError(ErrURISyntax, "fragments and percent-encoding are not allowed")
	}
	rest = strings.TrimPrefix(rest, "pay-")
	target, query, hasQuery := strings.Cut(rest, "?")
	target, fn, hasFn := strings.Cut(target, "/")
	if !hasFn || fn != "transfer" {
		return t, uriError(ErrURIFunction, "must call /transfer")
	}
	addr, chain, hasChain := strings.Cut(target, "@")
	var err error
	if t.Token, err = parseAddress(addr); err != nil {
		return TransferURI{}, err
	}
	if !hasChain {
		return TransferURI{}, uriError(ErrURIChainID, "missing (expected @<chainId> after the token address)")
	}
	if t.ChainID, err = parseChainID(chain); err != nil {
		return TransferURI{}, err
	}
	if !hasQuery || query == "" {
		return TransferURI{}, uriError(ErrURIParam, "missing address parameter")
	}
	seen := make(map[string]bool, 4)
	for kv := range strings.SplitSeq(query, "&") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || v == "" {
			return TransferURI{}, uriError(ErrURIParam, "each parameter must be key=value")
		}
		if seen[k] {
			return TransferURI{}, uriError(ErrURIParam, "%q given more than once", truncate(k, 32))
		}
		seen[k] = true
		switch k {
		case "address":
			if t.To, err = parseAddress(v); err != nil {
				return TransferURI{}, err
			}
		case "uint256":
			if msg := checkDecimal(v, maxValueDigits); msg != "" {
				return TransferURI{}, uriError(ErrURIValue, "%s", msg)
			}
			if t.Amount, err = uint256.FromDecimal(v); err != nil {
				return TransferURI{}, uriError(ErrURIValue, "above 2^256-1")
			}
		case "gas", "gasLimit", "gasPrice":
			if msg := checkDecimal(v, maxValueDigits); msg != "" {
				return TransferURI{}, uriError(ErrURIParam, "%s: %s", k, msg)
			}
		default:
			return TransferURI{}, uriError(ErrURIParam, "unsupported parameter %q", truncate(k, 32))
		}
	}
	if !seen["address"] {
		return TransferURI{}, uriError(ErrURIParam, "missing address parameter")
	}
	return t, nil
}
