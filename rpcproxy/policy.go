package rpcproxy

import (
	"bytes"
	"fmt"
	"strings"
)

// DefaultDenyMethods is the deny list used when Config.DenyMethods is nil:
// the namespaces that manage the node, hold keys or expose engine and pool
// internals. debug_ is not listed because it is blocked unconditionally.
func DefaultDenyMethods() []string {
	return []string{"admin_", "personal_", "miner_", "engine_", "txpool_"}
}

// alwaysBlocked is refused whatever the configuration says.
var alwaysBlocked = []byte("debug_")

// policy decides which methods may reach the node. An entry ending in "_" is
// a namespace prefix, any other entry an exact method name; both match
// ASCII-case-insensitively.
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
			if !validMethodName([]byte(e)) {
				return fmt.Errorf("rpcproxy: %s entry %q is not a method name or namespace prefix", what, e)
			}
			e = strings.ToLower(e)
			if strings.HasSuffix(e, "_") {
				*prefix = append(*prefix, []byte(e))
			} else {
				exact[e] = struct{}{}
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
