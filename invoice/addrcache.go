package invoice

import (
	"sync"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/hdwallet"
)

// addrCache keeps the deposit addresses of the derivation indexes the
// counter is expected to hand out next, derived ahead of time.
//
// Deriving an address costs a secp256k1 point multiplication (~35 µs). The
// invoice transaction holds the derivation counter's row lock from taking
// the index to its commit, and every other invoice waits for that lock; so
// requests derive the next addresses before they start their transaction,
// and inside the transaction the address is a map lookup. They derive them
// in runs of consecutive indexes (hdwallet's Deriver.Addresses), which
// share the costly field inversion: a run of 16 costs about 30% less per
// address than 16 single derivations. A miss (another replica took those
// indexes, or a burst outran the cache) just derives inside the
// transaction as before: the cache changes how long the lock is held and
// what an address costs, never which address an index gets.
type addrCache struct {
	d     *hdwallet.Deriver
	ahead uint32 // how far past the last index seen to derive
	run   uint32 // how many addresses one prefetch derives

	mu       sync.Mutex
	started  bool   // an index has been seen: next means something
	next     uint32 // the index the counter is expected to hand out next
	frontier uint32 // the indexes below it (from next) are cached or being derived
	addrs    map[uint32]common.Address
}

func newAddrCache(d *hdwallet.Deriver, ahead uint32) *addrCache {
	return &addrCache{d: d, ahead: ahead, run: min(max(ahead/4, 1), maxPrefetchRun),
		addrs: make(map[uint32]common.Address)}
}

// maxPrefetchRun bounds the addresses one request derives ahead (~0.5 ms
// at 16), and so what that request's latency gains from it. A run starts
// only once a whole run of the look-ahead window is missing, so that runs
// stay long; a run is a quarter of the window, at most 16 (the default
// window is 128), so requests in flight refill the window faster than
// batches drain it.
const maxPrefetchRun = 16

// prefetch derives the next run of missing addresses of [next, next+ahead),
// outside any transaction, when a whole run is missing.
func (c *addrCache) prefetch() {
	c.mu.Lock()
	if !c.started {
		c.mu.Unlock()
		return
	}
	from := max(c.frontier, c.next)
	end := min(uint64(c.next)+uint64(c.ahead), uint64(hdwallet.MaxIndex)+1)
	if uint64(from)+uint64(c.run) > end {
		c.mu.Unlock()
		return
	}
	c.frontier = from + c.run
	c.mu.Unlock()
	addrs, err := c.d.Addresses(from, int(c.run))
	if err != nil {
		return
	}
	c.mu.Lock()
	for i, addr := range addrs {
		if idx := from + uint32(i); addr != (common.Address{}) && idx >= c.next {
			c.addrs[idx] = addr // the zero address: no valid key, left to address
		}
	}
	c.mu.Unlock()
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
