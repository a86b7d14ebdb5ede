package settlement

import (
	"context"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func TestDepositFilter_FullToCapacity_NoFalseNegativesAboutOnePercentFalsePositives(t *testing.T) {
	f := newDepositFilter(0)
	added := make([]common.Address, f.capacity)
	for i := range added {
		added[i] = randAddr()
		f.add(added[i])
	}
	for _, a := range added {
		require.True(t, f.mayHave(a))
	}
	const others = 200_000
	fp := 0
	for i := 0; i < others; i++ {
		if f.mayHave(randAddr()) {
			fp++
		}
	}
	// 9.6 bits and 7 hashes per address are 1% at capacity; the bits are
	// rounded up to a power of two, so fewer.
	require.Less(t, float64(fp)/others, 0.015, "%d false positives of %d", fp, others)
	require.Equal(t, []common.Address{added[7]}, f.candidates([]common.Address{added[7]}))
}

// fakeDeposits is a ListDepositAddresses answer for the filter's own
// tests (settlement tests below use the real stores).
type fakeDeposits store.DepositAddresses

func (d fakeDeposits) ListDepositAddresses(_ context.Context, from uint32, limit int) (store.DepositAddresses, error) {
	page := store.DepositAddresses(d)
	page.Next = uint32(min(int64(from)+int64(limit), int64(page.Counter)))
	return page, nil
}

func TestDepositFilter_OutgrownByTheCounter_RebuiltLarger(t *testing.T) {
	f := newDepositFilter(0)
	g, ready, err := f.refresh(ctx, fakeDeposits{Counter: uint32(f.capacity) + 1, Highest: int64(f.capacity)})
	require.NoError(t, err)
	require.False(t, ready, "a new filter starts loading from the first index")
	require.NotSame(t, f, g)
	require.Equal(t, 2*(f.capacity+1), g.capacity)
	require.Zero(t, g.next)
}

func TestDepositFilter_InvoiceAboveTheCounter_NotReady(t *testing.T) {
	f := newDepositFilter(0)
	_, ready, err := f.refresh(ctx, fakeDeposits{Counter: 3, Highest: 2})
	require.NoError(t, err)
	require.True(t, ready)
	_, ready, err = f.refresh(ctx, fakeDeposits{Counter: 3, Highest: 9})
	require.NoError(t, err)
	require.False(t, ready)
}

// Settlement with the filter in use: payments to invoices created before
// and after the settler started, among many unrelated transactions, are
// all matched; a block with only strangers' transactions matches none.
func TestSettle_DepositFilter_MatchesInvoicesCreatedAnyTime(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		early := f.invoice(eth(1000))
		s := f.settler()
		f.mine(pay(randAddr(), eth(1)))
		f.sync(s)
		require.True(t, s.depositsReady, "the filter is in use once loaded")

		late := f.invoice(eth(1000))
		txs := []store.Transaction{pay(early.DepositAddress, eth(1000))}
		for i := 0; i < 200; i++ {
			txs = append(txs, pay(randAddr(), eth(5)))
		}
		txs = append(txs, pay(late.DepositAddress, eth(1000)))
		f.mine(txs...)
		f.sync(s)
		require.True(t, s.depositsReady)
		require.Equal(t, store.StatusPaid, f.get(early.ID).Status)
		require.Equal(t, store.StatusPaid, f.get(late.ID).Status)

		f.mine(pay(randAddr(), eth(1)), pay(randAddr(), eth(2)))
		f.sync(s)
		require.Len(t, f.payments(early.ID), 1)
		require.Len(t, f.payments(late.ID), 1)
	})
}

// An invoice inserted without reserving its derivation index (above the
// counter) is invisible to the filter's pages: settlement stops using the
// filter and still matches the payment.
func TestSettle_DepositFilter_InvoiceAboveCounter_FilterNotUsedPaymentMatched(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		s := f.settler()
		f.mine()
		f.sync(s)
		require.True(t, s.depositsReady)

		stray := f.invoice(eth(1000), func(inv *store.Invoice) { inv.DerivationIndex = 1_000_000 })
		f.mine(pay(stray.DepositAddress, eth(1000)), pay(randAddr(), eth(1)))
		f.sync(s)
		require.False(t, s.depositsReady)
		require.Equal(t, store.StatusPaid, f.get(stray.ID).Status)
	})
}
