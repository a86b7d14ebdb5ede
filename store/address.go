package store

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/ethereum/go-ethereum/common"
)

// ChecksumAddress is an address as it leaves the service: its JSON and text
// forms are EIP-55 (common.Address.Hex()). go-ethereum's common.Address
// marshals in lower case, so every record and response body that shows an
// address shows it through this type: records in their MarshalJSON, HTTP
// views as their field type.
type ChecksumAddress common.Address

// MarshalText returns the EIP-55 form.
func (a ChecksumAddress) MarshalText() ([]byte, error) {
	return []byte(common.Address(a).Hex()), nil
}

// UnmarshalText accepts what ParseAddress accepts.
func (a *ChecksumAddress) UnmarshalText(b []byte) error {
	addr, err := ParseAddress(string(b))
	if err != nil {
		return err
	}
	*a = ChecksumAddress(addr)
	return nil
}

// String returns the EIP-55 form.
func (a ChecksumAddress) String() string { return common.Address(a).Hex() }

// checksummed returns a pointer to a's ChecksumAddress, or nil.
func checksummed(a *common.Address) *ChecksumAddress {
	if a == nil {
		return nil
	}
	c := ChecksumAddress(*a)
	return &c
}

// ErrAddressChecksum is returned by ParseAddress for a mixed-case address
// whose case is not its EIP-55 checksum: a typo in an address that receives
// money.
var ErrAddressChecksum = errors.New("mixed-case address with a wrong EIP-55 checksum")

// errAddressSyntax is returned by ParseAddress for anything that is not 0x
// and 40 hex digits.
var errAddressSyntax = errors.New("an address is 0x followed by 40 hex digits")

// ParseAddress reads "0x" and 40 hex digits. All-lower-case and
// all-upper-case digits are taken as they are; mixed case must be the
// address's EIP-55 checksum (ErrAddressChecksum otherwise).
func ParseAddress(s string) (common.Address, error) {
	if len(s) != 42 || (s[:2] != "0x" && s[:2] != "0X") || !common.IsHexAddress(s) {
		return common.Address{}, errAddressSyntax
	}
	a := common.HexToAddress(s)
	digits := s[2:]
	if digits != strings.ToLower(digits) && digits != strings.ToUpper(digits) && a.Hex()[2:] != digits {
		return common.Address{}, ErrAddressChecksum
	}
	return a, nil
}

// The records' JSON forms: each shadows its common.Address fields with
// ChecksumAddress (a field of the outer struct wins over the embedded
// one's of the same name). Field order in the JSON is not significant.

// MarshalJSON shows miner in EIP-55.
func (b Block) MarshalJSON() ([]byte, error) {
	type plain Block
	return json.Marshal(struct {
		plain
		Miner ChecksumAddress `json:"miner"`
	}{plain(b), ChecksumAddress(b.Miner)})
}

// MarshalJSON shows from and to in EIP-55.
func (t Transaction) MarshalJSON() ([]byte, error) {
	type plain Transaction
	return json.Marshal(struct {
		plain
		From ChecksumAddress  `json:"from"`
		To   *ChecksumAddress `json:"to"`
	}{plain(t), ChecksumAddress(t.From), checksummed(t.To)})
}

// MarshalJSON shows from and token in EIP-55.
func (p Payment) MarshalJSON() ([]byte, error) {
	type plain Payment
	return json.Marshal(struct {
		plain
		From  ChecksumAddress  `json:"from"`
		Token *ChecksumAddress `json:"token,omitempty"`
	}{plain(p), ChecksumAddress(p.From), checksummed(p.Token)})
}

// MarshalJSON shows from and to in EIP-55.
func (t SweepTx) MarshalJSON() ([]byte, error) {
	type plain SweepTx
	return json.Marshal(struct {
		plain
		From       ChecksumAddress  `json:"from"`
		To         ChecksumAddress  `json:"to"`
		WrongToken *ChecksumAddress `json:"wrong_token,omitempty"`
	}{plain(t), ChecksumAddress(t.From), ChecksumAddress(t.To), checksummed(t.WrongToken)})
}
