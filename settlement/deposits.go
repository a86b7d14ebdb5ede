package settlement

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/bits"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
)

// A block of a busy chain has hundreds of transactions, and nearly none of
// them pays an invoice. Asking the database about every recipient costs a
// probe of the deposit-address index each, a random page of an index as
// large as the invoices (10 million at docs/scale.md's year): 15 ms of a
// 35 ms block there, with the indexer's writes pushing those pages out of
// the cache. So settlement keeps a Bloom filter of every invoice's deposit
// address and asks the database only about the recipients the filter
// cannot rule out — those that pay an invoice, and about 1% of the others.
//
// Never missing an invoice rests on two facts:
//
//   - The filter is filled by derivation index, each page read in one
//     snapshot up to the derivation index counter of that snapshot
//     (store.SettlementStore.ListDepositAddresses). The counter moves in
//     the transaction that inserts the invoices given those indexes, so
//     every invoice below it is committed and in the page. An invoice at
//     or above the counter (inserted without reserving its index) makes
//     the filter unusable: the database answers for every recipient, as
//     it does while the filter is still loading.
//   - The filter is brought up to date inside the block's transaction,
//     after the block was read: a transaction of that block was signed
//     before the block was mined, and so before it was indexed and read,
//     so the invoice it pays (whose address the payer had to know) was
//     committed before the refresh. A payment to an address no invoice had
//     yet (predicted from the public key) is missed with or without the
//     filter.

// Filter sizing: 7 bits per address, all in one 512-bit block (a cache
// line: one memory access per lookup, where bits spread over the whole
// filter cost up to seven cache misses, 0.4 µs an address), 12 bits per
// address — about 1% false positives — for twice the invoices there are
// when it is built (at least 1 M); it is rebuilt, twice as large, when the
// derivation index counter passes what it was sized for.
const (
	filterHashes      = 7
	filterBitsPerAddr = 12
	filterMinCapacity = 1 << 20
	// filterPage is how many addresses one refresh reads at most: a
	// filter over 10 M invoices loads in 10 blocks, meanwhile the database
	// answers for every recipient.
	filterPage = 1_000_000
)

// depositFilter is the Bloom filter of the deposit addresses of every
// invoice with a derivation index below next. Only the Settler's sync
// goroutine uses it.
type depositFilter struct {
	seed1, seed2 maphash.Seed
	bits         []uint64 // blocks of 8 words (512 bits)
	blockMask    uint64   // number of blocks − 1
	capacity     int      // addresses the bits were sized for
	n            int      // addresses added
	next         uint32   // every invoice below this index is in the filter
	// ready: at the last refresh next had reached the counter and no
	// invoice had an index at or above it.
	ready bool
}

func newDepositFilter(capacity int) *depositFilter {
	capacity = max(capacity, filterMinCapacity)
	blocks := uint64(float64(capacity)*filterBitsPerAddr) / 512
	blocks = 1 << bits.Len64(blocks-1) // a power of two: a block is a mask away
	return &depositFilter{seed1: maphash.MakeSeed(), seed2: maphash.MakeSeed(),
		bits: make([]uint64, 8*blocks), blockMask: blocks - 1, capacity: capacity}
}

// block returns the 512-bit block of a and the hash whose 9-bit pieces
// pick its bits in it. The seeds are random per process, so no one can
// choose addresses that collide with the deposit addresses.
func (f *depositFilter) block(a common.Address) ([]uint64, uint64) {
	b := maphash.Bytes(f.seed1, a[:]) & f.blockMask
	return f.bits[8*b : 8*b+8 : 8*b+8], maphash.Bytes(f.seed2, a[:])
}

func (f *depositFilter) add(a common.Address) {
	blk, h := f.block(a)
	for i := 0; i < filterHashes; i++ {
		bit := h >> (9 * i) & 511
		blk[bit/64] |= 1 << (bit % 64)
	}
	f.n++
}

// mayHave is false only for an address that was never added.
func (f *depositFilter) mayHave(a common.Address) bool {
	blk, h := f.block(a)
	for i := 0; i < filterHashes; i++ {
		bit := h >> (9 * i) & 511
		if blk[bit/64]&(1<<(bit%64)) == 0 {
			return false
		}
	}
	return true
}

// depositReader is what the filter reads.
type depositReader interface {
	ListDepositAddresses(ctx context.Context, from uint32, limit int) (store.DepositAddresses, error)
}

// refresh adds the invoices created since the last refresh, at most
// filterPage of them, and reports whether the filter now holds every
// invoice. It returns the filter to use from now on: a new, larger one
// (still loading) when this one outgrew its size.
func (f *depositFilter) refresh(ctx context.Context, st depositReader) (*depositFilter, bool, error) {
	page, err := st.ListDepositAddresses(ctx, f.next, filterPage)
	if err != nil {
		return f, false, fmt.Errorf("settlement: read deposit addresses: %w", err)
	}
	if int(page.Counter) > f.capacity {
		// Sized for the indexes handed out, which bound the invoices.
		return newDepositFilter(2 * int(page.Counter)), false, nil
	}
	for _, a := range page.Addresses {
		f.add(a)
	}
	f.next = page.Next
	f.ready = f.next == page.Counter && page.Highest < int64(page.Counter)
	return f, f.ready, nil
}

// candidates are the recipients among to that may be deposit addresses.
func (f *depositFilter) candidates(to []common.Address) []common.Address {
	out := make([]common.Address, 0, len(to)/32+1)
	for _, a := range to {
		if f.mayHave(a) {
			out = append(out, a)
		}
	}
	return out
}
