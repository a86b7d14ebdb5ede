package hdwallet

import (
	"fmt"
	"strconv"
	"strings"
)

// HardenedOffset is added to a child number to mark it hardened (i' or iH).
const HardenedOffset uint32 = 1 << 31

// MaxIndex is the largest deposit index: indexes are non-hardened, so they
// live in [0, 2^31).
const MaxIndex uint32 = HardenedOffset - 1

const (
	// AccountPath is the node whose extended public key a Deriver holds;
	// deposit address i is AccountPath + "/i".
	AccountPath = "m/44'/60'/0'/0"
	// SweepPath is the suggested key of the sweep wallet: account 1 of the
	// same mnemonic, so it can never coincide with a deposit address
	// (account 0) and is restorable from the same backup.
	SweepPath = "m/44'/60'/1'/0/0"
)

// accountPath is AccountPath, parsed.
var accountPath = Path{44 + HardenedOffset, 60 + HardenedOffset, 0 + HardenedOffset, 0}

// Path is a BIP-32 derivation path: child numbers from the master key down,
// hardened ones with HardenedOffset added.
type Path []uint32

// ParsePath parses a path such as "m/44'/60'/0'/0/7". It must start with "m";
// each component is a decimal number below 2^31 without sign or leading
// zeros, optionally followed by ', h or H for hardened. At most 255
// components. "m" alone is the master key.
func ParsePath(s string) (Path, error) {
	parts := strings.Split(s, "/")
	if parts[0] != "m" {
		return nil, fmt.Errorf("%w: must start with \"m\"", ErrInvalidPath)
	}
	parts = parts[1:]
	if len(parts) > 255 {
		return nil, fmt.Errorf("%w: more than 255 components", ErrInvalidPath)
	}
	p := make(Path, 0, len(parts))
	for i, c := range parts {
		var off uint32
		if n := len(c); n > 0 && (c[n-1] == '\'' || c[n-1] == 'h' || c[n-1] == 'H') {
			off, c = HardenedOffset, c[:n-1]
		}
		if c == "" || (len(c) > 1 && c[0] == '0') || strings.TrimLeft(c, "0123456789") != "" {
			return nil, fmt.Errorf("%w: component %d is not a decimal child number", ErrInvalidPath, i+1)
		}
		v, err := strconv.ParseUint(c, 10, 32)
		if err != nil || uint32(v) >= HardenedOffset {
			return nil, fmt.Errorf("%w: component %d is not below 2^31", ErrInvalidPath, i+1)
		}
		p = append(p, uint32(v)+off)
	}
	return p, nil
}

// DepositPath returns m/44'/60'/0'/0/index, or ErrIndexOutOfRange if index is
// not in [0, 2^31).
func DepositPath(index uint32) (Path, error) {
	if index > MaxIndex {
		return nil, fmt.Errorf("%w: %d", ErrIndexOutOfRange, index)
	}
	return append(append(Path{}, accountPath...), index), nil
}

// String formats the path with ' for hardened components, e.g.
// "m/44'/60'/0'/0/7".
func (p Path) String() string {
	var b strings.Builder
	b.WriteString("m")
	for _, c := range p {
		b.WriteByte('/')
		b.WriteString(strconv.FormatUint(uint64(c&^HardenedOffset), 10))
		if c >= HardenedOffset {
			b.WriteByte('\'')
		}
	}
	return b.String()
}
