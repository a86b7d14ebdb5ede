package invoice

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hdwallet"
)

func TestAddrCache_AlwaysTheDeriversAddress(t *testing.T) {
	t.Parallel()
	m, err := hdwallet.ParseMnemonic("test test test test test test test test test test test junk")
	require.NoError(t, err)
	w, err := hdwallet.NewWallet(m, "")
	require.NoError(t, err)
	d := w.Deriver()
	c := newAddrCache(d, 8)
	check := func(idx uint32) {
		got, err := c.address(idx)
		require.NoError(t, err)
		want, err := d.Address(idx)
		require.NoError(t, err)
		require.Equal(t, want, got, "index %d", idx)
	}
	c.prefetch() // nothing seen yet: nothing to do
	require.Empty(t, c.addrs)
	check(5)
	for range 4 {
		c.prefetch()
	}
	require.Len(t, c.addrs, 8, "derived ahead: 6…13")
	// In order, with jumps (another replica took some), and backwards (a
	// slow request).
	for _, idx := range []uint32{6, 7, 9, 8, 30, 31, 12, 32} {
		c.prefetch()
		check(idx)
	}
	var wg sync.WaitGroup
	for i := range uint32(40) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.prefetch()
			got, err := c.address(100 + i)
			require.NoError(t, err)
			want, err := d.Address(100 + i)
			require.NoError(t, err)
			require.Equal(t, want, got)
		}()
	}
	wg.Wait()
	check(200)
	require.LessOrEqual(t, len(c.addrs), 16, "addresses other replicas took are dropped")
}
