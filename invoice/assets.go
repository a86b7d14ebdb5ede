package invoice

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
	"github.com/evmpay/evmpay/store/problem"
)

// problem.CodeUnknownAsset: the request's asset is neither the native coin nor a
// configured token.

// DefaultNativeSymbol is the native coin's symbol when Config.Assets names
// none.
const DefaultNativeSymbol = api.DefaultNativeSymbol

// assetSet is the assets invoices may be for, by symbol (case-insensitive)
// and by token address.
type assetSet struct {
	native   store.Asset
	bySymbol map[string]store.Asset
	byToken  map[common.Address]store.Asset
	list     []store.Asset
}

func newAssetSet(assets []store.Asset) (*assetSet, error) {
	set := &assetSet{native: store.NativeAsset(DefaultNativeSymbol), bySymbol: map[string]store.Asset{},
		byToken: map[common.Address]store.Asset{}}
	for _, a := range assets {
		if a.IsNative() {
			if err := a.Validate(); err != nil {
				return nil, fmt.Errorf("invoice: Assets: %w", err)
			}
			set.native = store.NativeAsset(a.Symbol)
		}
	}
	set.bySymbol[asciiUpper(set.native.Symbol)] = set.native
	set.list = append(set.list, set.native)
	for _, a := range assets {
		if a.IsNative() {
			continue
		}
		if err := a.Validate(); err != nil {
			return nil, fmt.Errorf("invoice: Assets: %w", err)
		}
		key := asciiUpper(a.Symbol)
		if _, dup := set.bySymbol[key]; dup {
			return nil, fmt.Errorf("invoice: Assets: symbol %q given twice", a.Symbol)
		}
		if _, dup := set.byToken[*a.Address]; dup {
			return nil, fmt.Errorf("invoice: Assets: token %s given twice", a.Address.Hex())
		}
		a.Address = a.Token() // a copy the caller cannot change
		set.bySymbol[key], set.byToken[*a.Address] = a, a
		set.list = append(set.list, a)
	}
	return set, nil
}

// lookup finds an asset by symbol (any ASCII case) or token address (any case; a
// mixed-case address must carry its EIP-55 checksum).
func (set *assetSet) lookup(name string) (store.Asset, bool) {
	if strings.HasPrefix(name, "0x") || strings.HasPrefix(name, "0X") {
		addr, err := store.ParseAddress(name)
		if err != nil {
			return store.Asset{}, false
		}
		a, ok := set.byToken[addr]
		return a, ok
	}
	a, ok := set.bySymbol[asciiUpper(name)]
	return a, ok
}

// asciiUpper upper-cases the ASCII letters of s and nothing else: symbols
// match in any ASCII case only. Unicode case mapping would take "uſdc"
// (a long s, U+017F) for "USDC".
func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - ('a' - 'A')
		}
	}
	return string(b)
}

// parseAsset reads the optional "asset" member: absent or null is the
// native coin.
func (s *Service) parseAsset(c *chain, raw json.RawMessage) (store.Asset, *problem.Problem) {
	if isNull(raw) {
		return c.assets.native, nil
	}
	return s.parseAssetName(c, raw, "asset")
}

// parseAssetName reads one asset name, a symbol or token address
// configured on chain c, from the member field.
func (s *Service) parseAssetName(c *chain, raw json.RawMessage, field string) (store.Asset, *problem.Problem) {
	set := c.assets
	var name string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &name) != nil || name == "" {
		return store.Asset{}, problem.OfField(problem.CodeInvalidField, field,
			field+` must be a string: a configured symbol ("USDC") or token address`)
	}
	a, ok := set.lookup(name)
	if !ok {
		symbols := make([]string, 0, len(set.list))
		for _, a := range set.list {
			symbols = append(symbols, a.Symbol)
		}
		return store.Asset{}, problem.OfField(problem.CodeUnknownAsset, field,
			fmt.Sprintf("asset %q is not accepted here (accepted: %s)", truncate(name, 64), strings.Join(symbols, ", ")))
	}
	return a, nil
}

// parseAssetAmount reads the amount of an invoice for asset a from exactly
// one of "amount" (base units: a decimal integer string, as in responses),
// "amount_formatted" (whole units with at most a.Decimals digits after the
// point, "12.5") or, for the native coin only, "amount_wei".
func (s *Service) parseAssetAmount(c *chain, a store.Asset, ms map[string]json.RawMessage) (store.Amount, *problem.Problem) {
	given := 0
	for _, name := range []string{"amount", "amount_formatted", "amount_wei"} {
		if !isNull(ms[name]) {
			given++
		}
	}
	if !a.IsNative() && !isNull(ms["amount_wei"]) {
		return store.Amount{}, problem.OfField(problem.CodeInvalidField, "amount_wei",
			"amount_wei is for native-coin invoices; a token invoice takes amount (base units) or amount_formatted")
	}
	switch {
	case given == 0:
		return store.Amount{}, problem.OfField(problem.CodeMissingField, "amount", "amount (base units) or amount_formatted is required")
	case given > 1:
		return store.Amount{}, problem.OfField(problem.CodeInvalidField, "amount", "give exactly one of amount, amount_formatted and amount_wei")
	case !isNull(ms["amount_wei"]):
		return s.parseAmount(ms["amount_wei"])
	}
	name, raw := "amount", ms["amount"]
	if isNull(raw) {
		name, raw = "amount_formatted", ms["amount_formatted"]
	}
	var str string
	if raw[0] != '"' || json.Unmarshal(raw, &str) != nil {
		return store.Amount{}, problem.OfField(problem.CodeInvalidAmount, name, name+` must be a JSON string, e.g. "12500000" (amount) or "12.5" (amount_formatted)`)
	}
	var amt store.Amount
	var err error
	if name == "amount" {
		amt, err = store.ParseAmount(str)
	} else {
		amt, err = a.Parse(str)
	}
	if err != nil {
		detail := "amount must be a whole number of base units in decimal digits, without sign, point, exponent or leading zeros"
		if name == "amount_formatted" {
			detail = fmt.Sprintf("amount_formatted must be a decimal number of %s with at most %d digits after the point, without sign, exponent or leading zeros",
				a.Symbol, a.Decimals)
		}
		return store.Amount{}, problem.OfField(problem.CodeInvalidAmount, name, detail)
	}
	if amt.IsZero() {
		return store.Amount{}, problem.OfField(problem.CodeInvalidAmount, name, name+" must be greater than 0")
	}
	if a.IsNative() && amt.Cmp(*s.cfg.MaxAmount) > 0 {
		return store.Amount{}, problem.OfField(problem.CodeInvalidAmount, name, name+" must be at most "+s.cfg.MaxAmount.String()+" wei")
	}
	if t := a.Token(); t != nil {
		max, ok := c.tokenMax[*t]
		if !ok {
			max = MaxTokenAmount
		}
		if amt.Cmp(max) > 0 {
			return store.Amount{}, problem.OfField(problem.CodeInvalidAmount, name, fmt.Sprintf("%s must be at most %s %s (%s base units: more than exists of the token)",
				name, a.Format(max), a.Symbol, max))
		}
	}
	return amt, nil
}

// paymentURI is the EIP-681 request for an invoice on chain chainID: a
// native transfer, or the token's transfer(deposit, amount).
func paymentURI(chainID uint64, a store.Asset, deposit common.Address, amount store.Amount) (string, error) {
	if t := a.Token(); t != nil {
		return FormatTransferURI(TransferURI{Token: *t, ChainID: chainID, To: deposit, Amount: amount.Uint256()})
	}
	return FormatPaymentURI(PaymentURI{Address: deposit, ChainID: chainID, Value: amount.Uint256()})
}

// Assets returns the assets invoices on New's chain may be for: the native
// coin first, then the configured tokens (ChainAssets: another chain's).
func (s *Service) Assets() []store.Asset {
	out := make([]store.Asset, len(s.homeChain().assets.list))
	copy(out, s.homeChain().assets.list)
	return out
}

// publicTokenInvoice is a token invoice as a payer sees it: the asset and
// its amounts in base units and formatted instead of amount_wei/paid_wei.
type publicTokenInvoice struct {
	Status          string                `json:"status"`
	Asset           store.Asset           `json:"asset"`
	Amount          store.Amount          `json:"amount"`
	AmountFormatted string                `json:"amount_formatted"`
	Paid            store.Amount          `json:"paid"`
	PaidFormatted   string                `json:"paid_formatted"`
	ChainID         uint64                `json:"chain_id"`
	DepositAddress  store.ChecksumAddress `json:"deposit_address"`
	PaymentURI      string                `json:"payment_uri"`
	ExpiresAt       time.Time             `json:"expires_at"`
	// Remaining is what is still due, in base units (0 once paid in full).
	Remaining          store.Amount `json:"remaining"`
	RemainingFormatted string       `json:"remaining_formatted"`
	publicPayer
}

// publicView is what GET /v1/public/invoice answers: rest is what is still
// due, p what the checkout page needs whatever the asset.
func publicView(inv store.Invoice, rest store.Amount, p publicPayer) any {
	if !inv.IsToken() {
		return publicInvoice{
			Status: inv.Status, AmountWei: inv.AmountWei, PaidWei: inv.PaidWei, ChainID: inv.ChainID,
			DepositAddress: store.ChecksumAddress(inv.DepositAddress), PaymentURI: inv.PaymentURI, ExpiresAt: inv.ExpiresAt,
			RemainingWei: rest, publicPayer: p,
		}
	}
	a := inv.Asset()
	return publicTokenInvoice{
		Status: inv.Status, Asset: a, Amount: inv.AmountWei, AmountFormatted: a.Format(inv.AmountWei),
		Paid: inv.PaidWei, PaidFormatted: a.Format(inv.PaidWei), ChainID: inv.ChainID,
		DepositAddress: store.ChecksumAddress(inv.DepositAddress), PaymentURI: inv.PaymentURI, ExpiresAt: inv.ExpiresAt,
		Remaining: rest, RemainingFormatted: a.Format(rest), publicPayer: p,
	}
}
