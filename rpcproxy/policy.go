package rpcproxy

import (
	"bytes"
	"fmt"
	"strings"
)

// DefaultDenyMethods is the deny list used when Config.DenyMethods is nil:
// everything that acts with the node's own accounts (signing, sending
// unsigned transactions, unlocking), changes the node's configuration or
// mining, or exposes engine and pool internals; docs/rpcproxy.md lists why
// each is there. debug_ is not listed because it is blocked
// unconditionally. What a wallet needs — eth_sendRawTransaction, reads,
// filters — is not on it.
func DefaultDenyMethods() []string {
	return []string{
		"admin_", "personal_", "miner_", "engine_", "txpool_", "clique_",
		"eth_sendTransaction", "eth_sign*", "eth_submitWork", "eth_submitHashrate",
		"evm_", "hardhat_", "anvil_",
	}
}

// alwaysBlocked is refused whatever the configuration says.
var alwaysBlocked = []byte("debug_")

// policy decides which methods may reach the node. An entry ending in "_" is
// a namespace prefix, one ending in "*" a prefix ("eth_sign*": eth_sign,
// eth_signTransaction, eth_signTypedData_v4), any other an exact method
// name; all match ASCII-case-insensitively.
type policy struct {
	allowExact  map[string]struct{}
	allowPrefix [][]byte
	denyExact   map[string]struct{}
	denyPrefix  [][]byte
}

func newPolicy(allow, deny []string) (*policy, error) {
	p := &policy{allowExact: map[string]struct{}{}, denyExact: map[string]struct{}{}}
	add := func(list []string, exact map[string]struct{}, prefix *[][]byte, what string) error {
		for _, e := range list {
			pre, star := strings.CutSuffix(e, "*")
			if !validMethodName([]byte(pre)) {
				return fmt.Errorf("rpcproxy: %s entry %q is not a method name, a namespace (eth_) or a prefix (eth_sign*)", what, e)
			}
			pre = strings.ToLower(pre)
			if star || strings.HasSuffix(pre, "_") {
				*prefix = append(*prefix, []byte(pre))
			} else {
				exact[pre] = struct{}{}
			}
		}
		return nil
	}
	if err := add(allow, p.allowExact, &p.allowPrefix, "AllowMethods"); err != nil {
		return nil, err
	}
	if err := add(deny, p.denyExact, &p.denyPrefix, "DenyMethods"); err != nil {
		return nil, err
	}
	return p, nil
}

// allowed reports whether method m (already a valid method name) may be
// forwarded: debug_ never; a deny-list match never; otherwise, when an allow
// list is configured, only a match.
func (p *policy) allowed(m []byte) bool {
	var buf [maxMethodLen]byte
	lower := buf[:len(m)]
	for i, c := range m {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	if bytes.HasPrefix(lower, alwaysBlocked) {
		return false
	}
	if match(lower, p.denyExact, p.denyPrefix) {
		return false
	}
	if len(p.allowExact) > 0 || len(p.allowPrefix) > 0 {
		return match(lower, p.allowExact, p.allowPrefix)
	}
	return true
}

func match(m []byte, exact map[string]struct{}, prefixes [][]byte) bool {
	if _, ok := exact[string(m)]; ok {
		return true
	}
	for _, pre := range prefixes {
		if bytes.HasPrefix(m, pre) {
			return true
		}
	}
	return false
}
