package invoice

import (
	"sync"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/hdwallet"
)

// addrCache keeps the deposit addresses of the derivation indexes the
// counter is expected to hand out next, derived ahead of time.
//
// Deriving an address costs a secp256k1 point multiplication (~70 µs). The
// invoice transaction holds the derivation counter's row lock from taking
// the index to its commit, and every other invoice waits for that lock; so
// each request derives the next few addresses before it starts its
// transaction, and inside the transaction the address is a map lookup.
// A miss (another replica took those indexes, or a burst outran the cache)
// just derives inside the transaction as before: the cache changes how long
// the lock is held, never which address an index gets.
type addrCache struct {
	d     *hdwallet.Deriver
	ahead uint32 // how far past the last index seen to derive

	mu      sync.Mutex
	started bool   // an index has been seen: next means something
	next    uint32 // the index the counter is expected to hand out next
	addrs   map[uint32]common.Address
	pending map[uint32]bool
}

func newAddrCache(d *hdwallet.Deriver, ahead uint32) *addrCache {
	return &addrCache{d: d, ahead: ahead, addrs: make(map[uint32]common.Address), pending: make(map[uint32]bool)}
}

// perPrefetch bounds the addresses one request derives ahead: with n
// requests in flight the cache gains up to n×perPrefetch per round and
// loses n, so it keeps up.
const perPrefetch = 2

// prefetch derives up to perPrefetch missing addresses in
// [next, next+ahead), outside any transaction.
func (c *addrCache) prefetch() {
	c.mu.Lock()
	if !c.started {
		c.mu.Unlock()
		return
	}
	var todo []uint32
	for i := c.next; i < c.next+c.ahead && i <= hdwallet.MaxIndex && len(todo) < perPrefetch; i++ {
		if _, ok := c.addrs[i]; !ok && !c.pending[i] {
			c.pending[i] = true
			todo = append(todo, i)
		}
	}
	c.mu.Unlock()
	for _, i := range todo {
		addr, err := c.d.Address(i)
		c.mu.Lock()
		delete(c.pending, i)
		if err == nil && i >= c.next {
			c.addrs[i] = addr
		}
		c.mu.Unlock()
	}
}

// address returns the address of idx, from the cache or derived now, and
// moves the expected next index past idx.
func (c *addrCache) address(idx uint32) (common.Address, error) {
	c.mu.Lock()
	addr, ok := c.addrs[idx]
	delete(c.addrs, idx)
	if !c.started || idx >= c.next {
		c.started = true
		c.next = idx + 1
		if len(c.addrs) > int(2*c.ahead) { // indexes other replicas took
			for i := range c.addrs {
				if i < c.next {
					delete(c.addrs, i)
				}
			}
		}
	}
	c.mu.Unlock()
	if ok {
		return addr, nil
	}
	return c.d.Address(idx)
}
